package config

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/template"
)

// Hard limits of the format, independent of any configuration.
const (
	MaxParties = protocol.MaxParties
	maxDim     = template.MaxDim
	maxTopK    = protocol.MaxTopK
)

// Params is a checked configuration with every derived parameter. It is
// immutable: accessors return copies.
type Params struct {
	lit       Literal
	dir       string
	threshold int
	cluster   [16]byte
	spec      *ModeSpec
	gallery   template.Levels // modes with levels
	query     template.Levels
	ring      additive.Ring // modes with levels: the share ring their scores fit
	operators map[string][]*ecdsa.PublicKey
	clients   map[string][]*ecdsa.PublicKey // operators' and devices'
	seals     []*seal.PublicKey             // by party; nil where none
	shardKey  *[32]byte                     // the placement key, where held (WithShardKey)
}

// sealKeys parses the parties' sealing keys; the parties of a mode whose
// enrollments are sealed (ModeSpec.Sealed) must have one.
func (p *Params) sealKeys() error {
	p.seals = make([]*seal.PublicKey, len(p.lit.Parties))
	for i, m := range p.lit.Parties {
		if m.Seal == "" {
			if p.spec.Sealed {
				return fmt.Errorf("%s %s has no seal key, which mode %s's sealed enrollment needs: its home predates it; run 'idface party rotate --home DIR' on its host (it adds one) and assemble the configuration again from the new %s.pub.json", p.spec.PartyRole, m.Name, p.spec.Name, m.Name)
			}
			continue
		}
		k, err := seal.ParsePublicKey(m.Seal)
		if err != nil {
			return fmt.Errorf("party %s: %w", m.Name, err)
		}
		p.seals[i] = k
	}
	return nil
}

// SealKey is party k's sealing key (Member.Seal).
func (p *Params) SealKey(k int) (*seal.PublicKey, bool) {
	if k < 0 || k >= len(p.seals) || p.seals[k] == nil {
		return nil, false
	}
	return p.seals[k], true
}

// OperatorKeys are the named operator's signing keys (its certificates'
// public keys: two during its key rotation), which every party checks
// enrollments and deletions against.
func (p *Params) OperatorKeys(name string) []*ecdsa.PublicKey { return p.operators[name] }

// ClientKeys are the named client's signing keys, operator or device
// (hidden probes are signed by the device that made them).
func (p *Params) ClientKeys(name string) []*ecdsa.PublicKey { return p.clients[name] }

// OperatorSigned reports whether verify accepts one of the named
// operator's keys.
func OperatorSigned(keys []*ecdsa.PublicKey, verify func(*ecdsa.PublicKey) bool) bool {
	for _, k := range keys {
		if verify(k) {
			return true
		}
	}
	return false
}

func (p *Params) derive() error {
	p.threshold = template.MinAcceptScore(*p.lit.Tau, p.lit.Alpha, p.lit.Beta)
	if p.spec.Levels {
		var err error
		if p.gallery, err = template.ParseLevels(p.lit.GalleryLevels); err != nil {
			return err
		}
		if p.query, err = template.ParseLevels(p.lit.QueryLevels); err != nil {
			return err
		}
		for _, lv := range []template.Levels{p.gallery, p.query} {
			if err := lv.Validate(p.lit.Dim); err != nil {
				return err
			}
		}
		p.threshold = template.LevelsMinAcceptScore(*p.lit.Tau, p.gallery, p.query)
	}
	if c := p.lit.Calibration; c != nil {
		g, q := p.Transform()
		switch {
		case !(c.TargetFPIR > 0 && c.TargetFPIR < 1):
			return fmt.Errorf("calibration: target FPIR %v is not in (0, 1)", c.TargetFPIR)
		case c.Rows < 0:
			return fmt.Errorf("calibration: rows %d: want the number of ids it was calibrated for, or none (the ids its split enrolled)", c.Rows)
		case c.Dim != p.lit.Dim || c.GalleryLevels != g.String() || c.QueryLevels != q.String():
			return fmt.Errorf("calibration: made for d = %d, gallery %s and query %s, but this cluster uses d = %d, %s and %s: calibrate again with the cluster's transform",
				c.Dim, c.GalleryLevels, c.QueryLevels, p.lit.Dim, g, q)
		case c.Threshold != p.threshold:
			return fmt.Errorf("calibration: its threshold is score >= %d but tau = %v gives score >= %d: calibrate again, or remove \"calibration\" to rely on tau alone", c.Threshold, *p.lit.Tau, p.threshold)
		}
	}
	if p.spec.Levels {
		r, err := additive.RingFor(p.gallery, p.query)
		if err != nil {
			return err
		}
		p.ring = r
	}
	return p.checkScheme()
}

// Spec is the cluster's mode as its package declared it.
func (p *Params) Spec() *ModeSpec { return p.spec }

// Ring is the share ring Z_(2^k) of a mode with levels (blind,
// replicated): the smallest k that holds every score of the cluster's
// gallery and query levels (k = 8 for a ternary gallery with beta <= 127);
// the zero Ring, which every engine refuses, in another mode.
func (p *Params) Ring() additive.Ring { return p.ring }

// ClusterID identifies the cluster in row-map digests.
func (p *Params) ClusterID() [16]byte { return p.cluster }

// Literal returns a copy of the checked literal, defaults filled in.
func (p *Params) Literal() Literal { return p.lit.clone() }

// Dir is the cluster directory the configuration was loaded from.
func (p *Params) Dir() string { return p.dir }

// Serial numbers this configuration among the cluster's successive ones.
func (p *Params) Serial() int { return p.lit.Serial }

// Hash fingerprints the configuration (SHA-256 of its checked literal):
// servers report it, so that 'cluster status' shows servers that run
// different configurations.
func (p *Params) Hash() [32]byte {
	b, _ := json.Marshal(p.lit)
	return sha256.Sum256(b)
}

// Member returns the named server or client.
func (p *Params) Member(name string) (Member, bool) {
	if m, ok := p.Server(name); ok {
		return m, true
	}
	for _, m := range p.lit.Clients {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func (p *Params) Mode() Mode   { return p.lit.Mode }
func (p *Params) Dim() int     { return p.lit.Dim }
func (p *Params) Alpha() int   { return p.lit.Alpha }
func (p *Params) Beta() int    { return p.lit.Beta }
func (p *Params) Tau() float64 { return *p.lit.Tau }

// Threshold is the least integer score accepted under tau (paper Sec.
// 4.1 and 4.3: <T_alpha(x), T_beta(y)> against tau).
func (p *Params) Threshold() int { return p.threshold }

// Calibration says how tau was chosen, when it was calibrated for a
// target FPIR.
func (p *Params) Calibration() (Calibration, bool) {
	if p.lit.Calibration == nil {
		return Calibration{}, false
	}
	return *p.lit.Calibration, true
}

// Transform is the gallery and query transform of the cluster's scores:
// the levels of a mode that takes them, T_alpha and T_beta ("1:alpha",
// "1:beta") otherwise.
func (p *Params) Transform() (gallery, query template.Levels) {
	if p.spec.Levels {
		return p.gallery, p.query
	}
	return template.TernaryLevels(p.lit.Alpha), template.TernaryLevels(p.lit.Beta)
}

// RevealScores reports a research cluster whose answers carry scores.
func (p *Params) RevealScores() bool { return p.lit.RevealScores }

// Batch is how an entry groups concurrent identifies in a mode that
// batches: at most max in one pass, the first held at most wait.
func (p *Params) Batch() (maxItems int, wait time.Duration) {
	maxItems, wait = p.lit.BatchMax, time.Duration(p.lit.BatchWait)
	if maxItems == 0 {
		maxItems = DefaultBatchMax
	}
	if wait == 0 {
		wait = DefaultBatchWait
	}
	return maxItems, wait
}

// HideProbes reports a cluster whose probes no server sees.
func (p *Params) HideProbes() bool { return p.lit.HideProbes }

// MaxTopK caps the candidates one identify may return.
func (p *Params) MaxTopK() int { return p.lit.MaxTopK }

// GalleryLevels and QueryLevels are the transforms of a mode that takes
// levels (ModeSpec.Levels).
func (p *Params) GalleryLevels() template.Levels { return p.gallery }
func (p *Params) QueryLevels() template.Levels   { return p.query }

// Decider returns the decider (a mode whose helper is RoleDecider).
func (p *Params) Decider() (Member, bool) {
	if p.lit.Decider == nil {
		return Member{}, false
	}
	return *p.lit.Decider, true
}

// DeciderName names the decider ("" in a mode without one).
func (p *Params) DeciderName() string {
	d, _ := p.Decider()
	return d.Name
}

// Scheme is the cluster's encryption scheme in a mode with schemes: the
// one Literal.Scheme names, the mode's first when it names none.
func (p *Params) Scheme() (Scheme, bool) {
	for i, s := range p.spec.Schemes {
		if s.Name == p.lit.Scheme || p.lit.Scheme == "" && i == 0 {
			return s, true
		}
	}
	return Scheme{}, false
}

// MaxEnrollBatch is the most templates one enrollment request may carry:
// protocol.MaxBatch, or less where the mode's parties log a batch in one
// record (ModeSpec.LogShares) or encrypt its column groups within one
// request (ModeSpec.EnrollGroups).
func (p *Params) MaxEnrollBatch() int {
	n := protocol.MaxBatch
	if p.spec.LogShares > 0 {
		n = min(n, protocol.LogBatch(p.spec.LogShares*p.Dim()*p.ring.Bits/8+p.spec.LogExtra))
	}
	if s, ok := p.Scheme(); ok && p.spec.EnrollGroups > 0 {
		n = min(n, p.spec.EnrollGroups*s.GroupRows(p.Alpha(), p.Beta()))
	}
	return n
}

// Mu is the number of parties (local servers in mode he).
func (p *Params) Mu() int { return len(p.lit.Parties) }

// Parties lists the parties (local servers in mode he) in index order.
func (p *Params) Parties() []Member { return append([]Member(nil), p.lit.Parties...) }

// Party returns party k.
func (p *Params) Party(k int) Member { return p.lit.Parties[k] }

// PartyIndex returns the index of the named party, or -1.
func (p *Params) PartyIndex(name string) int {
	for i, m := range p.lit.Parties {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// KeyServer returns the key server (a mode whose helper is RoleKeyServer).
func (p *Params) KeyServer() (Member, bool) {
	if p.lit.KeyServer == nil {
		return Member{}, false
	}
	return *p.lit.KeyServer, true
}

// Servers lists every server process: the parties, then the key server
// or the decider.
func (p *Params) Servers() []Member {
	s := p.Parties()
	if k, ok := p.KeyServer(); ok {
		s = append(s, k)
	}
	if d, ok := p.Decider(); ok {
		s = append(s, d)
	}
	return s
}

// Clients lists the client identities.
func (p *Params) Clients() []Member { return append([]Member(nil), p.lit.Clients...) }

// Server returns the named server.
func (p *Params) Server(name string) (Member, bool) {
	for _, m := range p.Servers() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// Client returns the named client; "" is the first operator.
func (p *Params) Client(name string) (Member, bool) {
	for _, m := range p.lit.Clients {
		if m.Name == name || (name == "" && ClientRole(m) == RoleOperator) {
			return m, true
		}
	}
	return Member{}, false
}

// ClientRole is a client's role: RoleOperator or RoleDevice (New refuses
// a client without one).
func ClientRole(m Member) string { return m.Role }

// Pins maps every member's certificate pin to its identity and role.
func (p *Params) Pins() map[string]network.Peer {
	pins := map[string]network.Peer{}
	for _, m := range p.Servers() {
		r := network.RoleParty
		if p.PartyIndex(m.Name) < 0 { // the key server or the decider
			r = network.RoleHelper
		}
		for _, pin := range m.Pins() {
			pins[pin] = network.Peer{Name: m.Name, Role: r}
		}
	}
	for _, m := range p.lit.Clients {
		r := network.RoleOperator
		if ClientRole(m) == RoleDevice {
			r = network.RoleDevice
		}
		for _, pin := range m.Pins() {
			pins[pin] = network.Peer{Name: m.Name, Role: r}
		}
	}
	return pins
}

// Block is the bytes of one streamed block of selected columns.
func (p *Params) Block() int { return p.lit.Block }

// Timeouts.
type Timeouts struct {
	Request     time.Duration // one request between servers
	Identify    time.Duration // a whole identify at the entry (HE sums every group)
	DigestWait  time.Duration // a helper waits this long for its row map to catch up
	DeciderWait time.Duration // blind: the decider holds a query's shares this long for the rest
	OutboxRetry time.Duration // undelivered decisions are retried this often
	OutboxSend  time.Duration // one retry's deadline
	Shutdown    time.Duration // in-flight requests finish within this on SIGTERM
	KeyFetch    time.Duration // a new local server waits this long for the key server
	// Progress: a server running a change reports that it still works
	// this often (protocol.Working); its requester waits a Request
	// timeout for each report, so only a silent server is taken for down.
	Progress time.Duration
	// KeyFetchTry bounds one attempt to fetch the public key, and
	// KeyFetchPause separates attempts while the key server starts
	// (defaults DefaultKeyFetchTry and DefaultKeyFetchPause).
	KeyFetchTry   time.Duration
	KeyFetchPause time.Duration
}

// Defaults of a new local server's public-key fetch (mode he): one attempt
// may take 5 s, and attempts are 200 ms apart until KeyFetch has passed.
const (
	DefaultKeyFetchTry   = 5 * time.Second
	DefaultKeyFetchPause = 200 * time.Millisecond
)

// Timeouts returns the derived timeouts.
func (p *Params) Timeouts() Timeouts {
	t := time.Duration(p.lit.Timeout)
	id := t * time.Duration(max(1, p.spec.IdentifyTimeouts))
	return Timeouts{
		Request:       t,
		Identify:      id,
		DigestWait:    min(2*time.Second, t/4),
		DeciderWait:   t / 3,
		OutboxRetry:   500 * time.Millisecond,
		OutboxSend:    min(5*time.Second, t),
		Shutdown:      10 * time.Second,
		KeyFetch:      30 * time.Second,
		Progress:      min(max(t/6, 20*time.Millisecond), 5*time.Second),
		KeyFetchTry:   DefaultKeyFetchTry,
		KeyFetchPause: DefaultKeyFetchPause,
	}
}

// checkScheme checks the options of a mode with an encryption scheme and
// a key server (ModeSpec.Schemes): the scheme is one the mode takes, and
// the key server's rate and pass share are in range (0 takes the mode's
// default).
func (p *Params) checkScheme() error {
	if len(p.spec.Schemes) == 0 {
		return nil
	}
	if _, ok := p.Scheme(); !ok {
		var names []string
		for _, s := range p.spec.Schemes {
			names = append(names, s.Name)
		}
		return fmt.Errorf("scheme %q: want one of %s", p.lit.Scheme, strings.Join(names, ", "))
	}
	if r := p.lit.KeyServerRate; !(r >= 0 && r <= math.MaxFloat64) {
		return fmt.Errorf("key_server_rate %v: want the key server's queries a second per local server, a positive number (0 or none: the default, 200)", r)
	}
	if f := p.lit.KeyServerMaxPass; !(f >= 0 && f <= 1) {
		return fmt.Errorf("key_server_max_pass %v: want the share of the live rows one query may pass, in (0, 1] (0 or none: the default, derived from tau)", f)
	}
	return nil
}
