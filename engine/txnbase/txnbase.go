// Package txnbase is the base under the two transaction cores,
// engine/rowtxn (the share holders' two-phase transactions) and
// modes/hemode (the HE sequencer's numbered changes): what they have in
// common below their protocols. That is a server that stops once its log
// fails (Stop), one authority on operators' signatures, nonces and
// replays (Operators), the change counters and the answer to a change
// rolled back everywhere (Counters, AbortCode), the other parties
// (Peers), presumed abort of one's own undecided change at a restart
// (AbortAtRestart), and the row map that a digest attests (RowMap).
//
// The cores stay two (docs/DESIGN-NOTES.md, "Why HE's changes are not
// engine/rowtxn's transactions"): rowtxn logs each party's own share,
// numbers an aborted prepare's rows again and has every party vote on a
// deletion; hemode never logs a template, burns an aborted batch's slots,
// orders deletions at a sequencer, and its key server follows the changes
// without voting.
package txnbase

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
)

// Stop is a server's fail-stop: once its log cannot be written it
// refuses every request, since going on could acknowledge what is not
// durable or diverge from the other servers.
type Stop struct {
	env    engine.Env
	core   string // the core's name, in the error that stops the server
	failed atomic.Bool
}

// NewStop is the fail-stop of env's server, run by the named core.
func NewStop(env engine.Env, core string) *Stop { return &Stop{env: env, core: core} }

// Failed reports whether the log has failed.
func (s *Stop) Failed() bool { return s.failed.Load() }

// Guard refuses requests once the log has failed.
func (s *Stop) Guard(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if s.failed.Load() {
			return s.refusal()
		}
		return h(ctx, r)
	}
}

// Fatal stops the server (engine.Env.Fatal) for a failed log write and is
// the answer to the request that met it.
func (s *Stop) Fatal(err error) *protocol.Error {
	s.failed.Store(true)
	s.env.Fatal(fmt.Errorf("%s: cannot write the log: %w", s.core, err))
	return s.refusal()
}

func (s *Stop) refusal() *protocol.Error {
	return protocol.Errorf(protocol.CodeUnavailable, "%s cannot write its log and is stopping: send the request again once it is restarted (its own log says what failed)", s.env.Self)
}

// Operators is the one authority on an operator's signature of a change:
// the operators' keys and the nonces already used here (from the log at
// start, then at every change logged), so that no signed change applies
// twice. The caller's lock guards the nonces.
type Operators struct {
	keys    func(signer string) []*ecdsa.PublicKey // nil: no operator
	cluster [16]byte
	used    map[[16]byte]struct{}
}

// NewOperators trusts keys (config.Params.OperatorKeys) in cluster.
func NewOperators(keys func(signer string) []*ecdsa.PublicKey, cluster [16]byte) *Operators {
	return &Operators{keys: keys, cluster: cluster, used: map[[16]byte]struct{}{}}
}

// Signed checks that an operator of this cluster signed op on exactly
// ids, in order (hashes not nil: a sealed enrollment whose parts have
// these hashes). It does not look at the nonce (Check does).
func (o *Operators) Signed(a protocol.Auth, op protocol.OpKind, ids []string, hashes [][32]byte) *protocol.Error {
	var keys []*ecdsa.PublicKey
	if o.keys != nil {
		keys = o.keys(a.Signer)
	}
	if len(keys) == 0 {
		return protocol.Errorf(protocol.CodeForbidden, "%s is not signed by an operator of this cluster (signer %q): only an operator's client, with its own key, may change the gallery", change(op, len(ids)), a.Signer)
	}
	if !config.OperatorSigned(keys, func(key *ecdsa.PublicKey) bool {
		if hashes != nil {
			return op == protocol.OpPut && a.VerifySealed(key, o.cluster, ids, hashes)
		}
		return a.Verify(key, o.cluster, op, ids)
	}) {
		return protocol.Errorf(protocol.CodeForbidden, "%s does not match the signature of %q (other ids, parts or cluster were signed): send it again, unaltered, from the operator's client", change(op, len(ids)), a.Signer)
	}
	return nil
}

// Check is Signed, then Fresh (caller holds the nonces' lock).
func (o *Operators) Check(a protocol.Auth, op protocol.OpKind, ids []string, hashes [][32]byte) *protocol.Error {
	if err := o.Signed(a, op, ids, hashes); err != nil {
		return err
	}
	return o.Fresh(a, op, len(ids))
}

// Fresh refuses a change of n rows whose nonce was used here (caller
// holds the nonces' lock).
func (o *Operators) Fresh(a protocol.Auth, op protocol.OpKind, n int) *protocol.Error {
	if o.Used(a.Nonce) {
		return protocol.Errorf(protocol.CodeForbidden, "%s replays an operator signature that was used before (nonce %x): sign the request again", change(op, n), a.Nonce[:8])
	}
	return nil
}

// Used reports whether nonce was used here; Use records it (caller holds
// the nonces' lock).
func (o *Operators) Used(nonce [16]byte) bool { _, ok := o.used[nonce]; return ok }
func (o *Operators) Use(nonce [16]byte)       { o.used[nonce] = struct{}{} }

// change names a change of n rows in messages.
func change(op protocol.OpKind, n int) string {
	noun := map[protocol.OpKind]string{protocol.OpPut: "enrollment", protocol.OpDelete: "deletion"}[op]
	if noun == "" {
		noun = op.String()
	}
	if n == 1 {
		return "the " + noun + " of 1 row"
	}
	return fmt.Sprintf("the %s of %d rows", noun, n)
}

// Counters count the changes a server runs (engine.NewChangeCounters).
type Counters struct{ Enrolled, Deleted, Aborts prometheus.Counter }

// NewCounters registers the change counters.
func NewCounters(reg prometheus.Registerer) Counters {
	var c Counters
	c.Enrolled, c.Deleted, c.Aborts = engine.NewChangeCounters(reg)
	return c
}

// Rollback counts a change rolled back at every party and is its answer:
// code is the first refusal's (AbortCode), why each party's refusal.
func (c Counters) Rollback(code protocol.Code, why []string) *protocol.Error {
	c.Aborts.Inc()
	code = AbortCode(code)
	todo := "correct the request and send it again"
	if code == protocol.CodeAborted {
		todo = "send it again (a party that was down or busy may be back)"
	}
	return protocol.Errorf(code, "rolled back at every party, nothing changed (%s): %s", strings.Join(why, "; "), todo)
}

// AbortCode is the code of a change rolled back for a refusal of code c:
// c itself when the request was at fault (a duplicate, an unknown id, a
// bad request: sending it again cannot help), else CodeAborted.
func AbortCode(c protocol.Code) protocol.Code {
	switch c {
	case protocol.CodeDuplicate, protocol.CodeUnknownID, protocol.CodeBadRequest:
		return c
	}
	return protocol.CodeAborted
}

// Peers lists the names of every party but party self, in party order.
func Peers(p *config.Params, self int) []string {
	var out []string
	for k, m := range p.Parties() {
		if k != self {
			out = append(out, m.Name)
		}
	}
	return out
}

// AbortAtRestart is presumed abort at a restart: the server's own last
// change, prepared but never decided, is aborted. abort (its decision)
// is logged first, then apply settles it in memory; attrs go to the
// server's log.
func AbortAtRestart(env engine.Env, log engine.Log, abort store.Record, apply func() error, attrs ...any) error {
	if _, err := log.Append(abort); err != nil {
		return err
	}
	if err := apply(); err != nil {
		return err
	}
	env.Log.Info("aborted a change left undecided by a crash", attrs...)
	return nil
}

// RowMap is the row map that a digest attests: per segment (an origin
// party's rows in rowtxn, the sequencer's order in hemode) the id of
// every slot, and the count and set hash of the live rows, with one index
// of the live ids. The live bits that queries read stay beside the data
// they read (rowtxn's share stores, hemode's bitset for the key server).
// The caller's lock guards it.
type RowMap struct {
	cluster [16]byte
	segs    []rowSeg
	index   *rowmap.Index
}

type rowSeg struct {
	ids  rowmap.IDs
	hash rowmap.Hash
	live int
}

// NewRowMap is an empty row map of segs segments in cluster.
func NewRowMap(cluster [16]byte, segs int) *RowMap {
	m := &RowMap{cluster: cluster, segs: make([]rowSeg, segs)}
	m.index = rowmap.NewIndex(func(r rowmap.Ref) string { return m.segs[r.Seg].ids.At(r.Seq) })
	return m
}

// Reserve appends a slot for id to segment seg, not live yet.
func (m *RowMap) Reserve(seg int, id string) { m.segs[seg].ids.Append(id) }

// Commit makes the reserved slot r live.
func (m *RowMap) Commit(r rowmap.Ref) {
	s := &m.segs[r.Seg]
	id := s.ids.At(r.Seq)
	m.index.Insert(id, r)
	s.hash.Toggle(rowmap.RowHash(m.cluster, r.Seg, r.Seq, id))
	s.live++
}

// Remove makes row r dead if id is live there, and reports whether it was.
func (m *RowMap) Remove(r rowmap.Ref, id string) bool {
	if at, ok := m.index.Lookup(id); !ok || at != r {
		return false
	}
	s := &m.segs[r.Seg]
	m.index.Remove(id)
	s.hash.Toggle(rowmap.RowHash(m.cluster, r.Seg, r.Seq, id))
	s.live--
	return true
}

// Lookup finds a live id's row.
func (m *RowMap) Lookup(id string) (rowmap.Ref, bool) { return m.index.Lookup(id) }

// ID is the id of slot seq of segment seg; Len counts the segment's
// slots, Live its live rows.
func (m *RowMap) ID(seg, seq int) string { return m.segs[seg].ids.At(seq) }
func (m *RowMap) Len(seg int) int        { return m.segs[seg].ids.Len() }
func (m *RowMap) Live(seg int) int       { return m.segs[seg].live }

// Digest summarises the row map, a segment at a time.
func (m *RowMap) Digest() protocol.Digest {
	g := make(protocol.Digest, len(m.segs))
	for i, s := range m.segs {
		g[i] = protocol.SegDigest{Rows: uint32(s.ids.Len()), Live: uint32(s.live), Hash: s.hash}
	}
	return g
}
