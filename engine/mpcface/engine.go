// Package mpcface is the protocol engine of 2PCFace and (mu,nu)-MPCFace
// (paper App. G and H): each of mu parties holds XOR shares of every
// enrolled row's T_alpha(x) in column-major stores; any party is the entry
// for its devices. Enrollment and deletion are two-phase transactions
// (coordinator: the entry, participants: every other party); a query
// broadcasts T_beta(y) and the helpers stream their selected columns to
// the entry, which XORs and scores them (Fig. "2pc_id").
//
// The engine holds no socket and opens no file: it talks through
// engine.Env's network and appends to an engine.Log; the server runtime
// wires both.
//
// # Security model
//
// Semi-honest, non-colluding parties. One party's store is uniformly random.
// The entry of a query reconstructs every row's ternary bits at the query's
// positions (the paper's design); see docs/SECURITY.md.
package mpcface

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/rowmap"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/protocol"
)

// Engine is one party of a 2PC/MPC cluster.
type Engine struct {
	env  engine.Env
	p    *config.Params
	self int
	log  engine.Log
	st   *state

	txnMu  sync.Mutex // serialises the transactions this party originates
	outbox *engine.Outbox
	tr     *engine.Transformers // T_beta for queries
	failed atomic.Bool          // the log could not be written: refuse everything

	replay *replayState // during recovery only
	m      metrics
}

type metrics struct {
	enrolled, deleted, aborts prometheus.Counter
	wait, score               prometheus.Counter // entry: seconds waiting for helpers, scoring
}

// replayState collects what recovery must do once the log is read.
type replayState struct {
	lastOwn        *protocol.Prepare
	lastOwnDecided bool
	lastOwnCommit  bool
	erased, bad    map[rowmap.Ref]int64 // units found erased or damaged (value: record offset)
	toErase        []rowmap.Ref         // deleted rows whose shares are still in the log
	tails          []tail               // aborted prepares whose shares are still in the log
}

type tail struct {
	off int64
	n   int
}

// New makes the engine of party env.Self; feed it the log with Replay,
// then call Start.
func New(env engine.Env) (*Engine, error) {
	p := env.Params
	self := p.PartyIndex(env.Self)
	if self < 0 {
		return nil, fmt.Errorf("mpcface: %q is not a party of this cluster", env.Self)
	}
	st, err := newState(p.Dim(), p.Mu(), p.ClusterID())
	if err != nil {
		return nil, err
	}
	e := &Engine{env: env, p: p, self: self, st: st, outbox: engine.NewOutbox(env),
		tr:     engine.NewTransformers(p.Dim(), p.Beta()),
		replay: &replayState{erased: map[rowmap.Ref]int64{}, bad: map[rowmap.Ref]int64{}}}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		env.Metrics.MustRegister(c)
		return c
	}
	e.m = metrics{
		enrolled: counter("idface_enrolled_rows_total", "Rows enrolled through this party."),
		deleted:  counter("idface_deleted_rows_total", "Rows deleted through this party."),
		aborts:   counter("idface_txn_aborts_total", "Transactions originated here and rolled back."),
		wait:     counter("idface_identify_wait_seconds_total", "Entry: time spent waiting for helpers' blocks."),
		score:    counter("idface_identify_score_seconds_total", "Entry: time spent on own columns and scoring."),
	}
	return e, nil
}

// Replay applies one record of the party's log (store.KindShares).
func (e *Engine) Replay(en store.Entry) error {
	r, st := e.replay, e.st
	switch en.Type {
	case recPrepare:
		prep, units, err := decodePrepare(en)
		if err != nil {
			return err
		}
		if int(prep.Origin) >= len(st.segs) {
			return fmt.Errorf("prepare of origin %d in a cluster of %d parties", prep.Origin, len(st.segs))
		}
		i := 0
		for _, op := range prep.Ops {
			if op.Kind != protocol.OpPut {
				continue
			}
			switch units[i] {
			case unitBad:
				if en.Last {
					return store.ErrTorn // a crash while the record was written
				}
				r.bad[rowmap.Ref{Seg: int(prep.Origin), Seq: int(op.Seq)}] = en.Offset
			case unitErased:
				r.erased[rowmap.Ref{Seg: int(prep.Origin), Seq: int(op.Seq)}] = en.Offset
			}
			i++
		}
		st.pending[prep.Txn] = &pendingTxn{prep: prep, tail: en.TailOffset}
		if int(prep.Origin) == e.self {
			r.lastOwn, r.lastOwnDecided = prep, false
		}
	case recDecide:
		d, err := decodeDecide(en)
		if err != nil {
			return err
		}
		t := st.pending[d.Txn]
		if t == nil {
			return nil // decided twice (a re-sent decision): already applied
		}
		delete(st.pending, d.Txn)
		if err := e.settle(t, d.Commit, true); err != nil {
			return err
		}
		if r.lastOwn != nil && d.Txn == r.lastOwn.Txn {
			r.lastOwnDecided, r.lastOwnCommit = true, d.Commit
		}
	default:
		return fmt.Errorf("mpcface: record type %d in a party's log", en.Type)
	}
	return nil
}

// settle applies a decision to a pending transaction (caller holds the
// state's write lock, or replays). On abort the prepared shares are erased
// from the log; on commit, deleted rows' shares are.
func (e *Engine) settle(t *pendingTxn, commit, replaying bool) error {
	us := unitSize(e.p.Dim())
	puts := 0
	for _, op := range t.prep.Ops {
		if op.Kind == protocol.OpPut {
			puts++
		}
	}
	if !commit {
		if puts > 0 && t.tail >= 0 {
			if replaying {
				e.replay.tails = append(e.replay.tails, tail{t.tail, puts * us})
			} else if err := e.log.Overwrite(t.tail, make([]byte, puts*us)); err != nil {
				return err
			}
		}
		return nil
	}
	deleted, err := e.st.apply(t)
	if err != nil {
		return err
	}
	for _, ref := range deleted {
		if replaying {
			if _, done := e.replay.erased[ref]; !done {
				e.replay.toErase = append(e.replay.toErase, ref)
			}
			delete(e.replay.bad, ref) // a torn erasure of a deleted row is harmless
			continue
		}
		if err := e.erase(ref); err != nil {
			return err
		}
	}
	return nil
}

// erase overwrites a deleted row's share in the log.
func (e *Engine) erase(ref rowmap.Ref) error {
	us := unitSize(e.p.Dim())
	off := e.st.segs[ref.Seg].unitAt(ref.Seq, us)
	if off < 0 {
		return nil
	}
	return e.log.Overwrite(off, make([]byte, us))
}

// Start finishes recovery with the log open for appending: shares that
// damage destroyed must belong to deleted rows, unfinished erasures are
// redone, and this party's own last transaction is decided (presumed
// abort) and its decision queued for every other party.
func (e *Engine) Start(log engine.Log) error {
	e.log = log
	r := e.replay
	e.replay = nil
	for ref, off := range r.bad {
		if e.st.segs[ref.Seg].store.IsLive(ref.Seq) {
			return &store.DamageError{Offset: off, NextValid: -1,
				Reason: fmt.Sprintf("the share of live row %d of origin %s fails its checksum", ref.Seq, e.p.Party(ref.Seg).Name)}
		}
	}
	for _, t := range e.st.pending {
		for _, op := range t.prep.Ops {
			if op.Kind == protocol.OpPut && op.Plus == nil {
				return &store.DamageError{Offset: t.tail, NextValid: -1,
					Reason: fmt.Sprintf("the share of undecided row %d of origin %s is damaged", op.Seq, e.p.Party(int(t.prep.Origin)).Name)}
			}
		}
	}
	for _, ref := range r.toErase {
		if err := e.erase(ref); err != nil {
			return err
		}
	}
	for _, t := range r.tails {
		if err := log.Overwrite(t.off, make([]byte, t.n)); err != nil {
			return err
		}
	}
	if own := r.lastOwn; own != nil {
		if !r.lastOwnDecided {
			d := &protocol.Decide{Txn: own.Txn, Origin: uint8(e.self), Commit: false}
			if _, err := log.Append(encodeDecide(d)); err != nil {
				return err
			}
			e.st.mu.Lock()
			t := e.st.pending[own.Txn]
			delete(e.st.pending, own.Txn)
			err := e.settle(t, false, false)
			e.st.mu.Unlock()
			if err != nil {
				return err
			}
			e.env.Log.Info("aborted an enrollment left undecided by a crash")
		}
		for k, m := range e.p.Parties() {
			if k != e.self {
				e.outbox.Add(m.Name, &protocol.Decide{Txn: own.Txn, Origin: uint8(e.self), Commit: r.lastOwnDecided && r.lastOwnCommit})
			}
		}
	}
	rows, live := e.st.totals()
	e.env.Log.Info("store loaded", "rows", rows, "live", live, "in_doubt", len(e.st.pending))
	return nil
}

// Routes lists the requests a party answers.
func (e *Engine) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:   {Op: "health", From: engine.Anyone, Handle: e.health},
		protocol.TEnroll:   {Op: "enroll", From: engine.Operators, Handle: e.guard(e.enroll)},
		protocol.TIdentify: {Op: "identify", From: engine.Anyone, Handle: e.guard(e.identify)},
		protocol.TDelete:   {Op: "delete", From: engine.Operators, Handle: e.guard(e.delete)},
		protocol.TPrepare:  {Op: "prepare", From: engine.Servers, Handle: e.guard(e.prepare)},
		protocol.TDecide:   {Op: "decide", From: engine.Servers, Handle: e.guard(e.onDecide)},
		protocol.TQuery:    {Op: "query", From: engine.Servers, Handle: e.guard(e.serveQuery)},
	}
}

// guard refuses requests once the log has failed.
func (e *Engine) guard(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if e.failed.Load() {
			return protocol.Errorf(protocol.CodeUnavailable, "%s cannot write its log and is stopping", e.env.Self)
		}
		return h(ctx, r)
	}
}

// fatal stops the party: continuing could acknowledge what is not durable
// or diverge from the other parties.
func (e *Engine) fatal(err error) *protocol.Error {
	e.failed.Store(true)
	e.env.Fatal(fmt.Errorf("mpcface: cannot write the log: %w", err))
	return protocol.Errorf(protocol.CodeUnavailable, "%s cannot write its log and is stopping", e.env.Self)
}

// Run retries undelivered decisions until ctx ends.
func (e *Engine) Run(ctx context.Context) {
	e.outbox.Run(ctx, &e.txnMu, e.p.Timeouts().OutboxRetry)
}

// Stats reports the row map.
func (e *Engine) Stats() engine.Stats {
	e.st.mu.RLock()
	rows, live := e.st.totals()
	pending := len(e.st.pending)
	e.st.mu.RUnlock()
	return engine.Stats{Rows: rows, Live: live, Unsettled: pending + e.outbox.Len()}
}

// health reports the row map and how many transactions are unsettled: not
// yet decided here, or decided here but not yet acknowledged by a party.
func (e *Engine) health(context.Context, engine.Request) protocol.Msg {
	undelivered := e.outbox.Len()
	e.st.mu.RLock()
	defer e.st.mu.RUnlock()
	return &protocol.HealthOK{Name: e.env.Self, Mode: string(e.p.Mode()), Digest: e.st.digest(), InDoubt: uint32(len(e.st.pending) + undelivered)}
}

// peers lists the names of every other party.
func (e *Engine) peers() []string {
	var out []string
	for k, m := range e.p.Parties() {
		if k != e.self {
			out = append(out, m.Name)
		}
	}
	return out
}

// Inspection is what a party's log holds, for fsck.
type Inspection struct {
	Segments []SegmentInfo
	Pending  int // undecided transactions
	// LostLive lists live rows whose shares fail their checksums: no one
	// can rebuild them; they must be revoked at every party and enrolled
	// again. LostDeleted counts deleted rows in the same state (harmless).
	LostLive    []LostRow
	LostDeleted int
	Erased      int // units overwritten after a deletion or an abort
}

// SegmentInfo summarises one origin's rows.
type SegmentInfo struct {
	Origin     string
	Rows, Live int
}

// LostRow names a row whose share is damaged.
type LostRow struct {
	Origin string
	Seq    int
	ID     string
}

// Inspect reports what the replayed log holds (call after Replay, instead
// of Start).
func (e *Engine) Inspect() Inspection {
	var in Inspection
	for k, s := range e.st.segs {
		in.Segments = append(in.Segments, SegmentInfo{Origin: e.p.Party(k).Name, Rows: s.store.Rows(), Live: s.store.Live()})
	}
	in.Pending = len(e.st.pending)
	in.Erased = len(e.replay.erased)
	for ref := range e.replay.bad {
		seg := e.st.segs[ref.Seg]
		if seg.store.IsLive(ref.Seq) {
			in.LostLive = append(in.LostLive, LostRow{Origin: e.p.Party(ref.Seg).Name, Seq: ref.Seq, ID: seg.ids.At(ref.Seq)})
		} else {
			in.LostDeleted++
		}
	}
	return in
}

// RowIDs returns the ids of rows [lo, hi) of origin k's segment, with
// their liveness (fsck on a healthy party names the rows another lost).
func (e *Engine) RowIDs(k, lo, hi int) (ids []string, live []bool) {
	seg := e.st.segs[k]
	for r := max(lo, 0); r < min(hi, seg.ids.Len()); r++ {
		ids = append(ids, seg.ids.At(r))
		live = append(live, seg.store.IsLive(r))
	}
	return ids, live
}
