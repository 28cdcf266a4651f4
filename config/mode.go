package config

import (
	"fmt"
	"strings"

	"github.com/idface/idface/template"
)

// ModeSpec is what configuration needs to know of a mode, as plain data:
// the members it has, the options it takes, what it promises. The list of
// modes (modeList, modes.go) is an explicit value, not a registry filled
// by init functions: any program that checks a configuration knows every
// mode's declaration without linking a mode's engine. What a server runs
// is the mode's engine (engine.Mode, listed by package modes); what a
// device runs is its device part (package device).
type ModeSpec struct {
	Name Mode
	// Summary says in a few words what the mode is (help, demo).
	Summary string
	Layout
	// Levels: the mode takes gallery and query level transforms
	// (GalleryLevels, QueryLevels) and shares over the ring their scores
	// fit (Params.Ring).
	Levels bool
	// Schemes are the encryption schemes the mode takes (Literal.Scheme),
	// the default first; none for a mode without encryption. A mode with
	// schemes has a key server (Literal.KeyServerRate, KeyServerMaxPass).
	Schemes []Scheme
	// EnrollGroups, in a mode with schemes: one enrollment request
	// touches at most this many column groups (each costs every local
	// server 2d fresh encryptions within one request's timeout).
	EnrollGroups int
	// LogShares and LogExtra, in a mode with levels: a party logs a whole
	// enrollment batch in one record, LogShares vectors of d ring
	// elements and LogExtra bytes a row (Params.MaxEnrollBatch).
	LogShares, LogExtra int
	// Sealed: the operator's client makes the parties' shares and seals
	// each party's to its seal key (internal/codec/seal), so no server sees a
	// template; every party then needs one (Member.Seal). The shares are
	// made by the mode's device part (device.Sealer).
	Sealed bool
	// HideProbes: the mode's clusters may hide probes (Literal.HideProbes):
	// the device's client makes every party's part of a hidden-probe
	// identify (device.ProbeHider).
	HideProbes bool
	// NoRevealScores: the mode never reveals scores, even to research
	// clusters.
	NoRevealScores string
	// Reshare: the mode's parties refresh every share with a zero-sharing
	// on an operator's request (idface reshare).
	Reshare bool
	// Outage: the mode answers with one party down (degraded): its entry
	// runs a query without a helper it cannot reach, and a client whose
	// entry cannot be reached identifies through another party.
	Outage bool
	// IdentifyTimeouts is how many request timeouts a whole identify may
	// take at the entry (1 when zero).
	IdentifyTimeouts int
	// Trust states what the mode assumes of its servers, one line
	// (cluster status, docs/SECURITY.md).
	Trust string
	// Shards: the mode's parties and helper may each run as a coordinator
	// and Literal.Shards shard servers (shard.go).
	Shards bool
}

// Scheme is an encryption scheme of a mode (ModeSpec.Schemes): a column
// group of its database packs Slots * (SlotBits / LogBase(alpha, beta))
// templates (heidface's GroupRows, checked against it by
// hemode.TestSchemesAreHeidface).
type Scheme struct {
	Name            string
	Slots, SlotBits int
}

// GroupRows is the templates one column group holds for weights alpha
// and beta.
func (s Scheme) GroupRows(alpha, beta int) int {
	return s.Slots * max(1, s.SlotBits/template.LogBase(alpha, beta))
}

// Layout is a mode's members: parties that hold the rows, in one role,
// and at most one helper server that holds none (a key server or a
// decider).
type Layout struct {
	PartyRole string // RoleShareHolder or RoleLocalServer
	// PartyNoun names the parties in messages ("share holders").
	PartyNoun string
	// MinParties..MaxParties parties; DefaultParties when not said.
	MinParties, MaxParties, DefaultParties int
	// Helper is RoleKeyServer, RoleDecider or "" (none).
	Helper string
	// Hint ends the message about a wrong number of parties.
	Hint string
	// Origins: every party commits the changes sent to it, to its own
	// segment of the rows, beside the others' (client.Bulk.Spread spreads
	// a bulk enrollment over them); otherwise one party orders every
	// change and the others forward theirs to it.
	Origins bool
}

// Slot is a server of a layout: its name in a cluster that idface makes
// (cluster init, demo, bench, tests) and its role.
type Slot struct{ Name, Role string }

// Members lists the servers of a cluster of this layout with n parties,
// in the order of Params.Servers: parties p1..pn, then the helper ("key"
// for a key server, "decider").
func (l Layout) Members(n int) []Slot {
	var out []Slot
	for i := 1; i <= n; i++ {
		out = append(out, Slot{fmt.Sprintf("p%d", i), l.PartyRole})
	}
	switch l.Helper {
	case RoleKeyServer:
		out = append(out, Slot{"key", RoleKeyServer})
	case RoleDecider:
		out = append(out, Slot{"decider", RoleDecider})
	}
	return out
}

// Modes lists the modes in the order the CLI shows them.
func Modes() []Mode {
	out := make([]Mode, len(modeList))
	for i := range modeList {
		out[i] = modeList[i].Name
	}
	return out
}

// MustSpec returns mode m's declaration, a copy, for the mode's engine
// package (engine.Mode embeds it); it panics on a mode config does not
// declare, a programming error.
func MustSpec(m Mode) ModeSpec {
	s, err := Spec(m)
	if err != nil {
		panic(err)
	}
	return *s
}

// Spec returns a mode's declaration.
func Spec(m Mode) (*ModeSpec, error) {
	for i := range modeList {
		if modeList[i].Name == m {
			return &modeList[i], nil
		}
	}
	return nil, unknownMode(string(m))
}

// ParseMode checks a mode name against the modes.
func ParseMode(s string) (Mode, error) {
	if _, err := Spec(Mode(s)); err != nil {
		return "", err
	}
	return Mode(s), nil
}

func unknownMode(s string) error {
	var names []string
	for _, m := range Modes() {
		names = append(names, string(m))
	}
	return fmt.Errorf("config: mode %q: want one of %s", s, strings.Join(names, ", "))
}

// checkLayout checks lit's members against its mode's layout.
func checkLayout(s *ModeSpec, lit Literal) error {
	if !s.Levels && (lit.GalleryLevels != "" || lit.QueryLevels != "") {
		return fmt.Errorf("mode %s takes no gallery or query levels", s.Name)
	}
	if len(s.Schemes) == 0 && lit.Scheme != "" {
		return fmt.Errorf("scheme %q: mode %s takes no encryption scheme", lit.Scheme, s.Name)
	}
	if lit.HideProbes && !s.HideProbes {
		return fmt.Errorf("hide_probes: mode %s cannot hide probes (replicated mode can: --mode replicated --hide-probes)", s.Name)
	}
	if s.NoRevealScores != "" && lit.RevealScores {
		return fmt.Errorf("reveal_scores: %s", s.NoRevealScores)
	}
	mu := len(lit.Parties)
	if mu < s.MinParties || mu > s.MaxParties {
		if s.MinParties == s.MaxParties {
			return fmt.Errorf("mode %s has exactly %d %s, not %d%s", s.Name, s.MinParties, s.PartyNoun, mu, s.Hint)
		}
		return fmt.Errorf("mode %s needs %d..%d %s, not %d%s", s.Name, s.MinParties, s.MaxParties, s.PartyNoun, mu, s.Hint)
	}
	for _, h := range []struct {
		role string
		m    *Member
	}{{RoleKeyServer, lit.KeyServer}, {RoleDecider, lit.Decider}} {
		switch {
		case h.role == s.Helper && (h.m == nil || h.m.Addr == ""):
			return fmt.Errorf("mode %s needs a %s with an address", s.Name, roleNoun(h.role))
		case h.role != s.Helper && h.m != nil:
			return fmt.Errorf("mode %s has no %s", s.Name, roleNoun(h.role))
		case h.m != nil && h.m.Role != "" && h.m.Role != h.role:
			return fmt.Errorf("%s is a %s, not a %s", h.m.Name, h.m.Role, h.role)
		}
	}
	for _, m := range lit.Parties {
		if m.Role != "" && m.Role != s.PartyRole {
			return fmt.Errorf("%s is a %s; the parties of mode %s are %ss", m.Name, m.Role, s.Name, s.PartyRole)
		}
	}
	return nil
}

// roleNoun is a role in words: "key server", "decider".
func roleNoun(role string) string { return strings.ReplaceAll(role, "-", " ") }
