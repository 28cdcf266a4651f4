package config

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/idface/idface/protocol"
)

// ModeSpec is what configuration needs to know of a mode, declared by the
// mode's own package (engine.Register passes it here): the members it
// has, the options it takes and the parameters it derives. config knows
// no mode by itself; a mode that is not registered is an error. Its
// registry is the only one: engine.LookupMode reads Engine.
type ModeSpec struct {
	Name Mode
	// Summary says in a few words what the mode is (help, demo).
	Summary string
	// Order places the mode in lists (help, demo): smaller first.
	Order int
	Layout
	// Levels: the mode takes gallery and query level transforms
	// (GalleryLevels, QueryLevels); the mode derives what it needs from
	// them (blind.Ring: shares over a ring Z_(2^k) sized for their scores).
	Levels bool
	// Scheme: the mode takes an encryption scheme (Literal.Scheme).
	Scheme bool
	// Sealed: the operator's client makes the parties' shares and seals
	// each party's to its seal key (internal/codec/seal), so no server sees a
	// template; every party then needs one (Member.Seal).
	Sealed bool
	// SealedShares makes, at the operator's client, every party's
	// plaintext part of a sealed enrollment of items (party order; entry
	// is the party that relays them): a flag byte (1: seeds of
	// rowtxn's seed size, 0: full shares) and one unit per item. Required
	// when Sealed.
	SealedShares func(p *Params, entry int, items []protocol.Item) ([][]byte, error)
	// HiddenProbe, when set, lets the mode's clusters hide probes
	// (Literal.HideProbes): it makes, at the device's client, every party's
	// plaintext part of a hidden-probe identify of tmpl (party order),
	// which the client seals to each party. Optional.
	HiddenProbe func(p *Params, tmpl []float32) ([][]byte, error)
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
	// Derive computes the mode's own parameters from the checked
	// configuration (the HE scheme, ...); Params.Derived returns them.
	// Optional.
	Derive func(p *Params) (any, error)
	// MaxEnrollBatch caps the templates of one enrollment request below
	// protocol.MaxBatch. Optional.
	MaxEnrollBatch func(p *Params) int
	// Shards: the mode's parties and helper may each run as a coordinator
	// and Literal.Shards shard servers (shard.go).
	Shards bool
	// Engine is the rest of the mode's declaration, what the programs
	// need (an *engine.Mode, which engine.Register sets); nil for a mode
	// registered with RegisterMode alone (a test's).
	Engine any
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

var modes = struct {
	sync.RWMutex
	m map[Mode]*ModeSpec
}{m: map[Mode]*ModeSpec{}}

// RegisterMode adds a mode; its package calls it (through engine.Register)
// from an init function. A second registration of a name panics: two
// packages claiming one mode is a programming error.
func RegisterMode(s ModeSpec) {
	switch {
	case s.Name == "" || strings.ContainsAny(string(s.Name), " \t\n"):
		panic(fmt.Sprintf("config: mode name %q", s.Name))
	case s.PartyRole != RoleShareHolder && s.PartyRole != RoleLocalServer:
		panic(fmt.Sprintf("config: mode %s: party role %q", s.Name, s.PartyRole))
	case s.Helper != "" && s.Helper != RoleKeyServer && s.Helper != RoleDecider:
		panic(fmt.Sprintf("config: mode %s: helper role %q", s.Name, s.Helper))
	case s.Sealed && s.SealedShares == nil:
		panic(fmt.Sprintf("config: mode %s: sealed without SealedShares", s.Name))
	case s.MinParties < 1 || s.MaxParties > MaxParties || s.MinParties > s.MaxParties ||
		s.DefaultParties < s.MinParties || s.DefaultParties > s.MaxParties:
		panic(fmt.Sprintf("config: mode %s: parties %d..%d, default %d", s.Name, s.MinParties, s.MaxParties, s.DefaultParties))
	}
	modes.Lock()
	defer modes.Unlock()
	if _, dup := modes.m[s.Name]; dup {
		panic(fmt.Sprintf("config: mode %s registered twice", s.Name))
	}
	modes.m[s.Name] = &s
}

// Modes lists the registered modes in the order the CLI shows them.
func Modes() []Mode {
	modes.RLock()
	defer modes.RUnlock()
	var out []Mode
	for m := range modes.m {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := modes.m[out[i]], modes.m[out[j]]
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return a.Name < b.Name
	})
	return out
}

// Spec returns a registered mode's declaration.
func Spec(m Mode) (*ModeSpec, error) {
	modes.RLock()
	s, ok := modes.m[m]
	modes.RUnlock()
	if !ok {
		return nil, unknownMode(string(m))
	}
	return s, nil
}

// ParseMode checks a mode name against the registered modes.
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
	if len(names) == 0 { // a program that imports config without the modes
		return fmt.Errorf("config: mode %q: no modes are registered in this program (import github.com/idface/idface/modes)", s)
	}
	return fmt.Errorf("config: mode %q: want one of %s", s, strings.Join(names, ", "))
}

// checkLayout checks lit's members against its mode's layout.
func checkLayout(s *ModeSpec, lit Literal) error {
	if !s.Levels && (lit.GalleryLevels != "" || lit.QueryLevels != "") {
		return fmt.Errorf("mode %s takes no gallery or query levels", s.Name)
	}
	if !s.Scheme && lit.Scheme != "" {
		return fmt.Errorf("scheme %q: mode %s takes no encryption scheme", lit.Scheme, s.Name)
	}
	if lit.HideProbes && s.HiddenProbe == nil {
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
