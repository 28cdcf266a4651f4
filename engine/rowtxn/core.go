package rowtxn

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/rowtxn/txnlog"
	"github.com/idface/idface/engine/txnbase"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Options describe the engine's shares.
type Options[S Shares] struct {
	// ShareSize is the bytes of one row's share (in the log, and on the
	// wire unless seeded).
	ShareSize int
	// NewShares makes an empty segment store.
	NewShares func() (S, error)
	// SeedSize is the bytes of a seed that a share may travel (and be
	// logged) as, and Expand makes the share a seed stands for; zero and
	// nil when shares always travel in full.
	SeedSize int
	Expand   func(seed []byte) ([]byte, error)
	// Check and Compare, when set, make every party's vote carry
	// Check(its prepare, its index), and the origin abort the transaction
	// when Compare of the checks (by party index; p the origin's own
	// prepare of the round; down is a party that is down and has none, or
	// -1) names a disagreement: replicated mode's
	// two holders of each share compare a digest of it before anything
	// commits.
	Check   func(p *protocol.Prepare, self int) []byte
	Compare func(p *protocol.Prepare, checks [][]byte, down int) []string
	// Reshare, when set, makes a reshare's prepare this party's: it puts
	// into every OpReplace op the party's new share of the row (its
	// current one, of shares, the prepare's origin's segment, plus its
	// parts of the zero-sharing under p.Reshare.Key; zeros for a deleted
	// row). Modes without it refuse reshares.
	Reshare func(p *protocol.Prepare, self int, shares S) error
}

// Core is one party's rows and transactions.
type Core[S Shares] struct {
	env  engine.Env
	p    *config.Params
	opt  Options[S]
	self int
	log  engine.Log
	st   *state[S]

	txnMu  sync.Mutex // serialises the transactions this party originates
	outbox *engine.Outbox
	stop   *txnbase.Stop // the log could not be written: refuse everything

	replay *replayState // during recovery only
	// late remembers the last transactions decided before their prepare
	// came (an abort that overtook a slow prepare), so that the prepare,
	// when it comes, is refused instead of waiting for a decision that was
	// already sent (written under st.mu's read lock and lateMu, read under
	// its write lock).
	lateMu sync.Mutex // OnDecide writes late under the rows' read lock
	late   [lateTxns]protocol.TxnID
	lateAt int
	// held are the tails of the held records (records.go) not yet
	// confirmed by their party, by party name and transaction: this
	// origin's, and those it keeps as the third party (relay.go).
	heldMu sync.Mutex
	held   map[heldKey]tail
	relay  *relays
	// unprovenLogs paces the warnings about relays refused for want of
	// their origin's proof, which their relayer retries (relay.go).
	unprovenLogs engine.LogEvery
	// prior is this origin's decision on its last transaction, which
	// every Prepare carries (guarded by txnMu).
	prior protocol.Decide
	m     txnbase.Counters
}

type heldKey struct {
	party string
	txn   protocol.TxnID
}

// lateTxns bounds the remembered early decisions (an origin has one
// transaction at a time, so a few suffice).
const lateTxns = 64

// replayState collects what recovery must do once the log is read.
type replayState struct {
	lastOwn        *protocol.Prepare
	lastOwnDecided bool
	lastOwnCommit  bool
	erased, bad    map[rowmap.Ref]int64 // units found erased or damaged (value: record offset)
	toErase        []rowmap.Ref         // deleted rows whose shares are still in the log
	tails          []tail               // aborted prepares whose shares are still in the log
	held           []heldTail           // held records, in log order
	decided        map[protocol.TxnID]bool
	// proofs are the origins' proofs of the commits of transactions held
	// here for a party (its held records, which come before their
	// decisions in the log), to relay with them after a restart however
	// many decisions came since (the relays' memory keeps the last
	// decideKeep); zero until the decision is replayed.
	proofs map[protocol.TxnID][32]byte
}

type heldTail struct {
	*txnlog.Held
	tail
}

type tail struct {
	off int64
	n   int
}

// New makes the rows of party env.Self; feed it the log with Replay, then
// call Start.
func New[S Shares](env engine.Env, opt Options[S]) (*Core[S], error) {
	p := env.Params
	self := p.PartyIndex(env.Self)
	if self < 0 {
		return nil, fmt.Errorf("rowtxn: %q is not a party of this cluster", env.Self)
	}
	st, err := newState(p.Dim(), opt.ShareSize, p.Mu(), p.ClusterID(), opt.NewShares)
	if err != nil {
		return nil, err
	}
	if opt.SeedSize > 0 {
		st.seed, st.expand = opt.SeedSize, opt.Expand
	}
	st.auth = txnbase.NewOperators(p.OperatorKeys, p.ClusterID())
	if env.Sharded() {
		st.owns = func(id string) *protocol.Error {
			if env.Owns(id) {
				return nil
			}
			return env.NotOwned(id)
		}
	}
	c := &Core[S]{env: env, p: p, opt: opt, self: self, st: st, outbox: engine.NewOutbox(env), stop: txnbase.NewStop(env, "rowtxn"),
		replay: &replayState{erased: map[rowmap.Ref]int64{}, bad: map[rowmap.Ref]int64{}, decided: map[protocol.TxnID]bool{}, proofs: map[protocol.TxnID][32]byte{}},
		held:   map[heldKey]tail{}, relay: newRelays(), m: txnbase.NewCounters(env.Metrics)}
	c.outbox.Delivered = c.delivered
	return c, nil
}

// Self is this party's index.
func (c *Core[S]) Self() int { return c.self }

// Replay applies one record of the party's log.
func (c *Core[S]) Replay(en store.Entry) error {
	r, st := c.replay, c.st
	switch en.Type {
	case txnlog.RecPrepare, txnlog.RecPrepareV1, txnlog.RecEpoch, txnlog.RecLocal:
		prep, units, err := txnlog.DecodePrepare(en, c.opt.ShareSize, c.opt.SeedSize)
		if err != nil {
			return err
		}
		st.auth.Use(prep.Auth.Nonce) // (a V1 record's zero nonce is never a signed one's)
		if int(prep.Origin) >= len(st.segs) {
			return fmt.Errorf("prepare of origin %d in a cluster of %d parties", prep.Origin, len(st.segs))
		}
		i := 0
		for _, op := range prep.Ops {
			if !txnlog.HasUnit(op.Kind) {
				continue
			}
			// An aborted prepare's rows are numbered again by the next one,
			// and a reshare writes them again: only the latest unit counts.
			ref := rowmap.Ref{Seg: int(prep.Origin), Seq: int(op.Seq)}
			delete(r.bad, ref)
			delete(r.erased, ref)
			switch units[i] {
			case txnlog.UnitBad:
				if en.Last {
					return store.ErrTorn // a crash while the record was written
				}
				r.bad[ref] = en.Offset
			case txnlog.UnitErased:
				r.erased[ref] = en.Offset
			}
			i++
		}
		st.pending[prep.Txn] = &pendingTxn{prep: prep, tail: en.TailOffset}
		if int(prep.Origin) == c.self && en.Type != txnlog.RecLocal {
			r.lastOwn, r.lastOwnDecided = prep, false
		}
	case txnlog.RecDecide:
		d, err := txnlog.DecodeDecide(en)
		if err != nil {
			return err
		}
		t := st.pending[d.Txn]
		if t == nil {
			return nil // decided twice (a re-sent decision): already applied
		}
		delete(st.pending, d.Txn)
		if err := c.settle(t, d.Commit, true); err != nil {
			return err
		}
		if r.lastOwn != nil && d.Txn == r.lastOwn.Txn {
			r.lastOwnDecided, r.lastOwnCommit = true, d.Commit
		}
		r.decided[d.Txn] = d.Commit
		if _, held := r.proofs[d.Txn]; held && d.Proof != [32]byte{} {
			r.proofs[d.Txn] = d.Proof
		}
		c.relay.remember(d) // for the peers' notes and pulls (relay.go)
	case txnlog.RecHeld:
		h, err := txnlog.DecodeHeld(en, len(st.segs))
		if err != nil {
			return err
		}
		r.held = append(r.held, heldTail{h, tail{en.TailOffset, len(en.Tail)}})
		if _, ok := r.proofs[h.Txn]; !ok {
			r.proofs[h.Txn] = [32]byte{} // its decision, which comes later in the log, keeps its proof here
		}
	default:
		return fmt.Errorf("rowtxn: record type %d in a party's log", en.Type)
	}
	return nil
}

// settle applies a decision to a pending transaction (caller holds the
// state's write lock, or replays). On abort the prepared shares are erased
// from the log; on commit, deleted rows' shares are.
func (c *Core[S]) settle(t *pendingTxn, commit, replaying bool) error {
	us := c.st.unit(t.prep)
	puts := 0
	for _, op := range t.prep.Ops {
		if txnlog.HasUnit(op.Kind) {
			puts++
		}
	}
	if !commit {
		if puts > 0 && t.tail >= 0 {
			if replaying {
				c.replay.tails = append(c.replay.tails, tail{t.tail, puts * us})
			} else if err := c.log.Overwrite(t.tail, make([]byte, puts*us)); err != nil {
				return err
			}
		}
		return nil
	}
	deleted, stale, err := c.st.apply(t)
	if err != nil {
		return err
	}
	for _, sp := range stale { // a reshare's superseded shares
		if replaying {
			c.replay.tails = append(c.replay.tails, sp)
		} else if err := c.log.Overwrite(sp.off, make([]byte, sp.n)); err != nil {
			return err
		}
	}
	for _, ref := range deleted {
		if replaying {
			if _, done := c.replay.erased[ref]; !done {
				c.replay.toErase = append(c.replay.toErase, ref)
			}
			delete(c.replay.bad, ref) // a torn erasure of a deleted row is harmless
			continue
		}
		if err := c.erase(ref); err != nil {
			return err
		}
	}
	return nil
}

// erase overwrites a deleted row's share (or seed) in the log.
func (c *Core[S]) erase(ref rowmap.Ref) error {
	off, us := c.st.segs[ref.Seg].unitAt(ref.Seq)
	if off < 0 {
		return nil
	}
	return c.log.Overwrite(off, make([]byte, us))
}

// Start finishes recovery with the log open for appending: shares that
// damage destroyed must belong to deleted rows, unfinished erasures are
// redone, and this party's own last transaction is decided (presumed
// abort) and its decision queued for every other party.
func (c *Core[S]) Start(log engine.Log) error {
	c.log = log
	r := c.replay
	c.replay = nil
	for ref, off := range r.bad {
		if c.st.segs[ref.Seg].shares.IsLive(ref.Seq) {
			return &store.DamageError{Offset: off, NextValid: -1,
				Reason: fmt.Sprintf("the share of live row %d of origin %s fails its checksum", ref.Seq, c.p.Party(ref.Seg).Name)}
		}
	}
	for _, t := range c.st.pending {
		for _, op := range t.prep.Ops {
			if op.Kind == protocol.OpPut && op.Share == nil {
				return &store.DamageError{Offset: t.tail, NextValid: -1,
					Reason: fmt.Sprintf("the share of undecided row %d of origin %s is damaged", op.Seq, c.p.Party(int(t.prep.Origin)).Name)}
			}
		}
	}
	for _, ref := range r.toErase {
		if err := c.erase(ref); err != nil {
			return err
		}
	}
	for _, t := range r.tails {
		if err := log.Overwrite(t.off, make([]byte, t.n)); err != nil {
			return err
		}
	}
	if err := c.requeueHeld(r); err != nil {
		return err
	}
	if own := r.lastOwn; own != nil {
		if !r.lastOwnDecided {
			d := &protocol.Decide{Txn: own.Txn, Origin: uint8(c.self), Commit: false}
			if err := txnbase.AbortAtRestart(c.env, log, txnlog.EncodeDecide(d), func() error {
				c.st.lock()
				defer c.st.unlock()
				t := c.st.pending[own.Txn]
				delete(c.st.pending, own.Txn)
				return c.settle(t, false, false)
			}); err != nil {
				return err
			}
		}
		c.prior = protocol.Decide{Txn: own.Txn, Origin: uint8(c.self), Commit: r.lastOwnDecided && r.lastOwnCommit}
		for _, name := range c.Peers() {
			d := c.prior // the outbox keeps its own, with its proof for the third
			c.outbox.Add(name, c.decideFor(&d, own, c.p.PartyIndex(name)))
		}
	}
	c.st.lock()
	c.st.unlock() // the replayed row map, for health requests
	rows, live := c.st.totals()
	c.env.Log.Info("store loaded", "rows", rows, "live", live, "in_doubt", len(c.st.pending))
	return nil
}

// Guard refuses requests once the log has failed.
func (c *Core[S]) Guard(h engine.Handler) engine.Handler { return c.stop.Guard(h) }

// Run retries undelivered decisions, and asks the third party for those
// withheld here (relay.go), until ctx ends.
func (c *Core[S]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.pullDecisions(ctx) }) // joined: the server closes the log once Run returns
	c.outbox.Run(ctx, &c.txnMu, c.p.Timeouts().OutboxRetry)
	wg.Wait()
}

// Stats reports the row map as of the last change (without the lock: a
// long query does not delay it).
func (c *Core[S]) Stats() engine.Stats {
	s := c.st.seen.Load()
	rows, live := 0, 0
	for _, sd := range s.digest {
		rows, live = rows+int(sd.Rows), live+int(sd.Live)
	}
	return engine.Stats{Rows: rows, Live: live, Unsettled: s.pending + c.outbox.Len()}
}

// Unsettled counts what a party would lose if its rows moved elsewhere
// offline (a rebalance): transactions undecided here, and changes held for
// a party that has not confirmed them. The last decision a party sends
// again at every start is not counted: every peer has it or settles by it.
func (c *Core[S]) Unsettled() int {
	c.st.mu.RLock()
	n := len(c.st.pending)
	c.st.mu.RUnlock()
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	return n + len(c.held)
}

// Health reports how many transactions are unsettled (not yet decided
// here, or decided but not yet acknowledged by a party) and, to another
// server only, the row map sealed for the two (engine.Env.Health); an
// operator may ask for the comparison with every peer. It takes no lock
// (state.seen): whoever holds the rows' lock cannot make it late.
func (c *Core[S]) Health(ctx context.Context, r engine.Request) protocol.Msg {
	return c.env.Health(ctx, r, engine.HealthOf{Mode: string(c.p.Mode()), Unsettled: c.Stats().Unsettled,
		Digest: func() protocol.Digest { return c.st.seen.Load().digest }, Peers: c.Peers(), Segment: func(i int) string { return c.p.Party(i).Name }})
}

// SealFor is a row map as sent to peer (engine.Env.SealDigest).
func (c *Core[S]) SealFor(peer string, g protocol.Digest) (protocol.Digest, *protocol.Error) {
	sealed, err := c.env.SealDigest(peer, g)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	return sealed, nil
}

// Peers lists the names of every other party, in party order.
func (c *Core[S]) Peers() []string { return txnbase.Peers(c.p, c.self) }

// RLock and RUnlock hold the row map still (while a query reads shares).
func (c *Core[S]) RLock()   { c.st.mu.RLock() }
func (c *Core[S]) RUnlock() { c.st.mu.RUnlock() }

// Digest is the committed row map (caller holds the read lock).
func (c *Core[S]) Digest() protocol.Digest { return c.st.digest() }

// Shares is origin k's segment store (caller holds the read lock).
func (c *Core[S]) Shares(k int) S { return c.st.segs[k].shares }

// ID is the id of row seq of origin k's segment (caller holds the read
// lock).
func (c *Core[S]) ID(k, seq int) string { return c.st.rows.ID(k, seq) }

// AwaitDigest waits until this party's row map equals the one the entry
// sent (sealed for the two of them), for at most the digest wait; a
// lasting difference is refused, never answered.
func (c *Core[S]) AwaitDigest(ctx context.Context, entry string, want protocol.Digest) *protocol.Error {
	t := time.NewTimer(c.p.Timeouts().DigestWait)
	defer t.Stop()
	for {
		c.st.mu.RLock()
		g, changed := c.st.digest(), c.st.changed
		c.st.mu.RUnlock()
		have, err := c.SealFor(entry, g)
		if err != nil {
			return err
		}
		if have.Equal(want) {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			// The counts go to the log; the refusal reaches the entry's
			// client, which learns only whose rows differ.
			c.env.Log.Warn("rows differ from the entry's; refusing a query", "entry", entry, "diff", have.Diff(want))
			var origins []string
			for _, i := range have.Differing(want) {
				if i < c.p.Mu() {
					origins = append(origins, c.p.Party(i).Name)
				}
			}
			return protocol.Errorf(protocol.CodeInconsistent, "%s's rows differ from the entry's (in the segment of origin %s); refusing to answer. If a party was restarted, it catches up within seconds; otherwise check 'idface cluster status'", c.env.Self, strings.Join(origins, ", "))
		case <-ctx.Done():
			return protocol.Errorf(protocol.CodeUnavailable, "%s: %v", c.env.Self, ctx.Err())
		}
	}
}

// Enroll handles a batch at its entry party: validate the ids, make every
// party's shares (share returns ops[k] for party k, shares in full for
// this party), then one two-phase transaction: the batch is enrolled at
// every party or at none.
func (c *Core[S]) Enroll(ctx context.Context, m *protocol.Enroll, share func([]protocol.Item) ([][]protocol.Op, error)) protocol.Msg {
	items := m.Items
	if err := engine.CheckItems(items); err != nil {
		return err
	}
	if err := c.st.auth.Signed(m.Auth, protocol.OpPut, m.IDs(), nil); err != nil { // the nonce at every party's prepare
		return err
	}
	c.st.mu.RLock()
	for i, it := range items {
		if _, dup := c.st.rows.Lookup(it.ID); dup {
			c.st.mu.RUnlock()
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled (item %d)", it.ID, i)
		}
	}
	c.st.mu.RUnlock()
	ops, err := share(items)
	if err != nil {
		return engine.AsError(err, protocol.CodeBadRequest)
	}
	if err := c.runTxn(ctx, m.Auth, ops, nil, nil); err != nil {
		return err
	}
	c.m.Enrolled.Add(float64(len(items)))
	return &protocol.EnrollOK{Count: uint32(len(items))}
}

// Delete revokes an id. Rows belong to their origin's segment and only the
// origin changes its segment, so a request for another origin's row is
// forwarded there.
func (c *Core[S]) Delete(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Delete)
	if err := c.st.auth.Signed(m.Auth, protocol.OpDelete, []string{m.ID}, nil); err != nil {
		return err
	}
	c.st.mu.RLock()
	ref, ok := c.st.rows.Lookup(m.ID)
	c.st.mu.RUnlock()
	if !ok {
		if !c.env.Owns(m.ID) {
			return c.env.NotOwned(m.ID)
		}
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	if ref.Seg != c.self {
		// Forwarded once already, unless by this member's own coordinator.
		if r.From.Role == network.RoleParty && r.From.Name != c.env.Self {
			return protocol.Errorf(protocol.CodeInconsistent, "id %q belongs to %s, not %s", m.ID, c.p.Party(ref.Seg).Name, c.env.Self)
		}
		resp, err := rpc.Call(ctx, c.env.Net, c.p.Party(ref.Seg).Name, m)
		if err != nil {
			return engine.AsError(err, protocol.CodeUnavailable)
		}
		return resp
	}
	ops := make([][]protocol.Op, c.p.Mu())
	for k := range ops {
		ops[k] = []protocol.Op{{Kind: protocol.OpDelete, Seq: uint32(ref.Seq), ID: m.ID}}
	}
	if err := c.runTxn(ctx, m.Auth, ops, nil, nil); err != nil {
		return err
	}
	c.m.Deleted.Inc()
	return &protocol.DeleteOK{}
}

// runTxn runs one two-phase transaction originated here: log and hold the
// Prepare locally, collect every party's vote, log the decision (the
// commit point), apply it, then tell everyone. It returns nil only if
// every party voted yes, i.e. made the ops durable. A sealed enrollment
// (sealed not nil) sends each other party its sealed part instead of its
// shares, which only that party can open.
func (c *Core[S]) runTxn(ctx context.Context, auth protocol.Auth, ops [][]protocol.Op, sealed *sealedParts, reshare *protocol.Reshare) *protocol.Error {
	c.txnMu.Lock()
	defer c.txnMu.Unlock()
	t := &txnRound{sealed: sealed, hold: c.mayHold(ops, sealed), origin: c.self}
	if c.relaying() {
		t.third = c.third
		t.proof = func(k int) [32]byte { return c.relayProof(protocol.PrepareProof, t.preps[k], t.third(k)) }
	}
	if perr := c.flushEarlier(ctx, t); perr != nil {
		return perr
	}
	if perr := c.prepareOwn(t, auth, ops, reshare); perr != nil {
		return perr
	}
	c.collectVotes(ctx, t)
	c.compareChecks(t)
	return c.conclude(ctx, t)
}

// txnRound is one transaction of runTxn: its prepares, the parties asked
// to vote and the one left out, and what the votes said.
type txnRound struct {
	txn    protocol.TxnID
	preps  []*protocol.Prepare // by party
	sealed *sealedParts
	hold   bool     // the change may be held for a party that cannot be reached
	down   string   // the party left out, its part held for it ("": none)
	downAt int      // its index (-1: none), once the votes are in
	peers  []string // the parties asked to vote
	idx    []int    // party index of each peer
	checks [][]byte // the parties' checks of their shares, by party
	origin int
	third  func(k int) int      // the party neither the origin nor k (nil: no relays)
	proof  func(k int) [32]byte // the origin's proof of party k's prepare for the third (Prepare.Relay)
	first  *protocol.Error
	failed []string // every failure, for the rollback's message
}

// message is party k's prepare: its sealed part, for a sealed enrollment,
// with the third party's when the parties relay (relay.go).
func (t *txnRound) message(k int) protocol.Msg {
	if t.proof != nil && k != t.origin {
		t.preps[k].Relay = t.proof(k)
	}
	if t.sealed != nil {
		m := &protocol.SealedPrepare{Prepare: *t.preps[k], Part: t.sealed.parts[k], Hashes: t.sealed.hashes}
		if t.third != nil && k != t.origin {
			m.Held = t.sealed.parts[t.third(k)]
		}
		return m
	}
	return t.preps[k]
}

// flushEarlier gives a party that missed an earlier change that change
// first; one that cannot be reached is left out (t.down) when the change
// may be held for it.
func (c *Core[S]) flushEarlier(ctx context.Context, t *txnRound) *protocol.Error {
	missing := c.outbox.FlushMissing(ctx, !t.hold)
	if len(missing) == 0 {
		return nil
	}
	for name := range missing {
		t.down = name
	}
	if len(missing) > 1 || !t.hold {
		var l []string
		for name, why := range missing {
			l = append(l, fmt.Sprintf("%s (%s)", name, why))
		}
		sort.Strings(l)
		return protocol.Errorf(protocol.CodeUnavailable, "servers have not confirmed an earlier change: %s", strings.Join(l, ", "))
	}
	return nil
}

// prepareOwn makes every party's prepare (the new rows numbered from this
// segment's end), then validates, logs and holds this party's own.
func (c *Core[S]) prepareOwn(t *txnRound, auth protocol.Auth, ops [][]protocol.Op, reshare *protocol.Reshare) *protocol.Error {
	var err error
	if t.txn, err = c.env.NewTxnID(); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	c.st.lock()
	defer c.st.unlock()
	base := c.st.segs[c.self].shares.Rows()
	t.preps = make([]*protocol.Prepare, len(ops))
	for k := range ops {
		seq := base
		for i := range ops[k] {
			if ops[k][i].Kind == protocol.OpPut {
				ops[k][i].Seq = uint32(seq)
				seq++
			}
		}
		t.preps[k] = &protocol.Prepare{Txn: t.txn, Origin: uint8(c.self), Dim: uint16(c.p.Dim()), Base: uint32(base), Auth: auth, Ops: ops[k], Prior: c.prior, Reshare: reshare}
	}
	var hashes [][32]byte
	if t.sealed != nil {
		hashes = t.sealed.hashes
	}
	own := t.preps[c.self]
	if perr := c.validate(own, hashes); perr != nil {
		return perr
	}
	pos, perr := c.logPrepare(own)
	if perr != nil {
		return perr
	}
	c.st.pending[t.txn] = &pendingTxn{prep: own, tail: pos[0].TailOffset}
	c.st.auth.Use(auth.Nonce)
	return nil
}

// collectVotes sends every other party but t.down its prepare and gathers
// the votes. When all voted yes but one that cannot be reached, and the
// change may be held, that one is left out too.
func (c *Core[S]) collectVotes(ctx context.Context, t *txnRound) {
	for k := range c.p.Mu() {
		if name := c.p.Party(k).Name; k != c.self && name != t.down {
			t.peers, t.idx = append(t.peers, name), append(t.idx, k)
		}
	}
	t.checks = make([][]byte, c.p.Mu())
	prepare := func(i int) protocol.Msg { return t.message(t.idx[i]) }
	errs := engine.BroadcastEach(ctx, c.env.Net, t.peers, prepare, func(i int, m protocol.Msg) error {
		v, ok := m.(*protocol.Vote)
		if !ok || v.Txn != t.txn {
			return fmt.Errorf("answered the prepare with %v", m.Type())
		}
		t.checks[t.idx[i]] = v.Check
		return nil
	})
	if lost := unreached(t.peers, errs); t.down == "" && lost != "" && t.hold {
		t.down = lost // every other party voted yes: hold the change for it
		i := slices.Index(t.peers, lost)
		t.peers, t.idx = slices.Delete(t.peers, i, i+1), slices.Delete(t.idx, i, i+1)
		errs = make([]error, len(t.peers))
	}
	for i, err := range errs {
		if err != nil {
			if t.first == nil {
				t.first = engine.AsError(err, protocol.CodeUnavailable)
			}
			t.failed = append(t.failed, fmt.Sprintf("%s: %v", t.peers[i], err))
		}
	}
	t.downAt = c.p.PartyIndex(t.down)
}

// compareChecks aborts a round every party voted yes to when the mode
// compares the parties' checks of their shares and they differ.
func (c *Core[S]) compareChecks(t *txnRound) {
	if t.first != nil || c.opt.Compare == nil {
		return
	}
	t.checks[c.self] = c.opt.Check(t.preps[c.self], c.self)
	if pairs := c.opt.Compare(t.preps[c.self], t.checks, t.downAt); len(pairs) > 0 {
		c.env.Log.Warn("the parties' copies of the batch's shares differ; aborted", "pairs", strings.Join(pairs, ","))
		t.first = protocol.Errorf(protocol.CodeInconsistent, "the share holders' copies of the batch's shares differ (%s): the operator's client made inconsistent shares, or one of them is faulty", strings.Join(pairs, ", "))
		t.failed = append(t.failed, t.first.Msg)
	}
}

// conclude decides the round: it holds a committed change for the party
// left out, logs and applies the decision, tells the voters (the outbox
// keeps it for those that do not confirm) and queues the held change.
func (c *Core[S]) conclude(ctx context.Context, t *txnRound) *protocol.Error {
	d := &protocol.Decide{Txn: t.txn, Origin: uint8(c.self), Commit: t.first == nil}
	c.prior = *d
	if d.Commit && t.downAt >= 0 {
		c.heldMu.Lock()
		perr := c.hold(t.downAt, t.message(t.downAt), t.txn)
		c.heldMu.Unlock()
		if perr != nil {
			return perr
		}
	}
	if perr := c.decide(d); perr != nil {
		return perr
	}
	to := func(i int) *protocol.Decide { return c.decideFor(d, t.preps[c.self], c.p.PartyIndex(t.peers[i])) }
	for i, err := range engine.Broadcast(ctx, c.env.Net, t.peers, func(i int) protocol.Msg { return to(i) }, engine.Expect(protocol.TDecideOK)) {
		if err != nil {
			c.outbox.Add(t.peers[i], to(i))
		}
	}
	if d.Commit && t.downAt >= 0 {
		c.outbox.Add(t.down, t.message(t.downAt))
		c.outbox.Add(t.down, c.decideFor(d, t.preps[c.self], t.downAt))
		c.env.Log.Warn("committed without a party that cannot be reached; its part is kept until it is back", "party", t.down)
	}
	if t.first != nil {
		return c.m.Rollback(t.first.Code, t.failed)
	}
	return nil
}

// decide logs a decision on a pending transaction (the commit point at the
// origin, idempotent at the others) and applies it.
func (c *Core[S]) decide(d *protocol.Decide) *protocol.Error {
	c.st.lock()
	defer c.st.unlock()
	return c.decideLocked(d)
}

func (c *Core[S]) decideLocked(d *protocol.Decide) *protocol.Error {
	t := c.st.pending[d.Txn]
	if t == nil {
		return nil
	}
	if _, err := c.log.Append(txnlog.EncodeDecide(d)); err != nil {
		return c.stop.Fatal(err)
	}
	delete(c.st.pending, d.Txn)
	if err := c.settle(t, d.Commit, false); err != nil {
		return c.stop.Fatal(err)
	}
	c.relayDecided(d)
	return nil
}

// logPrepare logs a prepare durably. One too large for a log record is
// refused, never written: a failed write stops the party, and a batch
// is too large by the request, not by the disk (the mode's
// MaxEnrollBatch keeps a cluster's own clients below it: MaxBatch).
func (c *Core[S]) logPrepare(p *protocol.Prepare) ([]store.Pos, *protocol.Error) {
	rec := txnlog.EncodePrepare(p)
	if n := len(rec.Sealed) + len(rec.Tail); n > store.MaxRecord {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%s: a batch of %d changes takes %d bytes in the log, more than one record holds (%d): send at most %d templates per request", c.env.Self, len(p.Ops), n, store.MaxRecord, c.p.MaxEnrollBatch())
	}
	pos, err := c.log.Append(rec)
	if err != nil {
		return nil, c.stop.Fatal(err)
	}
	return pos, nil
}

// Prepare is phase one at a non-origin party: validate, log durably, vote.
// Only the origin party itself may prepare a change of its segment.
//
// An origin prepares a transaction only after every party has its
// decision on the one before (runTxn flushes the outbox first), so a
// transaction of the same origin still pending here was decided without
// this party's vote, i.e. aborted, and its prepare came after the abort:
// it is aborted here too.
func (c *Core[S]) Prepare(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Prepare)
	return c.thenThird(ctx, r.From.Name, m, nil, nil, c.prepare(ctx, r.From.Name, m, nil))
}

// thenThird is resp, this party's answer to prepare m from party from,
// once the third party has been heard from or its prepare kept
// (awaitThird), when resp is a vote on a prepare from m's origin.
func (c *Core[S]) thenThird(ctx context.Context, from string, m *protocol.Prepare, held []byte, hashes [][32]byte, resp protocol.Msg) protocol.Msg {
	if _, voted := resp.(*protocol.Vote); !voted || !c.relaying() || c.p.Party(int(m.Origin)).Name != from {
		return resp
	}
	c.relay.mu.Lock()
	_, again := c.relay.onCommit[m.Txn] // a prepare sent again: the third was heard from already
	c.relay.mu.Unlock()
	c.st.mu.RLock()
	_, pending := c.st.pending[m.Txn]
	c.st.mu.RUnlock()
	if again || !pending {
		return resp
	}
	if perr := c.awaitThird(ctx, m, held, hashes); perr != nil {
		return perr
	}
	return resp
}

// prepare is Prepare of m from the named party; sealed holds the hashes
// of a sealed enrollment's parts, which the operator signed.
func (c *Core[S]) prepare(ctx context.Context, from string, m *protocol.Prepare, sealed [][32]byte) protocol.Msg {
	if int(m.Origin) >= c.p.Mu() {
		return protocol.Errorf(protocol.CodeForbidden, "%s may not prepare a transaction of origin %d", from, m.Origin)
	}
	if c.p.Party(int(m.Origin)).Name != from {
		if !c.relayedFrom(int(m.Origin), from) {
			return protocol.Errorf(protocol.CodeForbidden, "%s may not prepare a transaction of origin %d", from, m.Origin)
		}
		return c.prepareRelayed(ctx, m, sealed)
	}
	if int(m.Origin) == c.self {
		return protocol.Errorf(protocol.CodeBadRequest, "a prepare for my own segment must come from me")
	}
	c.st.lock()
	defer c.st.unlock()
	if ctx.Err() != nil { // the origin has given up on this vote
		return protocol.Errorf(protocol.CodeUnavailable, "%s: the prepare came too late", c.env.Self)
	}
	// The origin's previous transaction, still undecided here: settle it
	// as the origin decided it (before anything else: this prepare may
	// have come first relayed by the third party, which does not carry
	// the origin's word on the one before).
	if pr := m.Prior; pr.Txn != (protocol.TxnID{}) && pr.Txn != m.Txn {
		if t := c.st.pending[pr.Txn]; t != nil && t.prep.Origin == m.Origin {
			if err := c.decideLocked(&protocol.Decide{Txn: pr.Txn, Origin: m.Origin, Commit: pr.Commit}); err != nil {
				return err
			}
		}
	}
	if v, ok := c.alreadyPrepared(m); ok {
		return v
	}
	if c.decidedEarly(m.Txn) {
		return protocol.Errorf(protocol.CodeAborted, "%s: the transaction was decided before its prepare came", c.env.Self)
	}
	for txn, t := range c.st.pending {
		if t.prep.Origin == m.Origin && txn != m.Txn {
			if err := c.decideLocked(&protocol.Decide{Txn: txn, Origin: m.Origin, Commit: false}); err != nil {
				return err
			}
			c.env.Log.Warn("aborted a transaction whose decision came before its prepare", "origin", c.p.Party(int(m.Origin)).Name)
		}
	}
	return c.takePrepare(m, sealed)
}

// takePrepare validates m, logs it and holds it pending, and votes (the
// caller holds the rows' write lock).
func (c *Core[S]) takePrepare(m *protocol.Prepare, sealed [][32]byte) protocol.Msg {
	if err := c.validate(m, sealed); err != nil {
		return err
	}
	pos, perr := c.logPrepare(m)
	if perr != nil {
		return perr
	}
	c.st.pending[m.Txn] = &pendingTxn{prep: m, tail: pos[0].TailOffset}
	c.st.auth.Use(m.Auth.Nonce)
	return c.vote(m)
}

// OnDecide is phase two at a non-origin party; idempotent. Only the
// transaction's origin may decide it (the third party relays its commits:
// relay.go).
func (c *Core[S]) OnDecide(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Decide)
	if int(m.Origin) >= c.p.Mu() {
		return protocol.Errorf(protocol.CodeForbidden, "%s may not decide a transaction of origin %d", r.From.Name, m.Origin)
	}
	if c.p.Party(int(m.Origin)).Name != r.From.Name {
		if !m.Commit || !c.relayedFrom(int(m.Origin), r.From.Name) {
			return protocol.Errorf(protocol.CodeForbidden, "%s may not decide a transaction of origin %d", r.From.Name, m.Origin)
		}
		return c.decideRelayed(m)
	}
	// A decision for a transaction not pending here (re-sent, or made up
	// by a deviating peer) is found out under the read lock, so only a
	// real one queues for the write lock behind the queries reading the
	// rows. It is remembered as late under that read lock: a prepare
	// (write lock) sees it, or came first and made it pending.
	c.st.mu.RLock()
	t, ok := c.st.pending[m.Txn]
	if !ok {
		c.markLate(m.Txn)
	}
	c.st.mu.RUnlock()
	if !ok {
		if m.Commit { // a re-sent decision; a digest check catches a prepare lost from the log
			c.env.Log.Debug("a commit of a transaction not pending here", "origin", r.From.Name)
		}
		return &protocol.DecideOK{}
	}
	if t.prep.Origin != m.Origin {
		return protocol.Errorf(protocol.CodeForbidden, "only the origin decides its transaction")
	}
	if err := c.decide(m); err != nil { // nothing if decided meanwhile
		return err
	}
	return &protocol.DecideOK{}
}

// markLate remembers txn as decided before its prepare came (under the
// rows' lock, read or write: prepare reads late under the write lock).
func (c *Core[S]) markLate(txn protocol.TxnID) {
	c.lateMu.Lock()
	defer c.lateMu.Unlock()
	c.late[c.lateAt%lateTxns] = txn
	c.lateAt++
}

// decidedEarly reports whether txn was decided before its prepare came
// (the caller holds the rows' write lock, under which late is read).
func (c *Core[S]) decidedEarly(txn protocol.TxnID) bool {
	return slices.Contains(c.late[:], txn)
}

// Routes are the routes every share holder answers alike (with an
// operator's list of the ids and check of one: txnbase.IDRoutes); engines add
// their enrollment and identification.
func (c *Core[S]) Routes() map[protocol.Type]engine.Route {
	r := txnbase.IDRoutes(func(f func(*txnbase.RowMap)) {
		c.st.mu.RLock()
		defer c.st.mu.RUnlock()
		f(c.st.rows)
	})
	r[protocol.THealth] = engine.Route{Op: "health", From: engine.Anyone, Handle: c.Health, Max: protocol.Small, Query: true}
	r[protocol.TDelete] = engine.Route{Op: "delete", From: engine.Operators, Handle: c.Guard(c.Delete), Max: protocol.Small}
	r[protocol.TPrepare] = engine.Route{Op: "prepare", From: engine.Parties, Handle: c.Guard(c.Prepare), Max: engine.PrepareBound(c.p, max(c.opt.ShareSize, c.opt.SeedSize))}
	r[protocol.TDecide] = engine.Route{Op: "decide", From: engine.Parties, Handle: c.Guard(c.OnDecide), Max: protocol.Small}
	if c.relaying() {
		r[protocol.TPrepared] = engine.Route{Op: "prepared", From: engine.Parties, Handle: c.Guard(c.OnPrepared), Max: protocol.Small}
	}
	return r
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
func (c *Core[S]) Inspect() Inspection {
	var in Inspection
	for k, s := range c.st.segs {
		in.Segments = append(in.Segments, SegmentInfo{Origin: c.p.Party(k).Name, Rows: s.shares.Rows(), Live: s.shares.Live()})
	}
	in.Pending = len(c.st.pending)
	in.Erased = len(c.replay.erased)
	for ref := range c.replay.bad {
		seg := c.st.segs[ref.Seg]
		if seg.shares.IsLive(ref.Seq) {
			in.LostLive = append(in.LostLive, LostRow{Origin: c.p.Party(ref.Seg).Name, Seq: ref.Seq, ID: c.st.rows.ID(ref.Seg, ref.Seq)})
		} else {
			in.LostDeleted++
		}
	}
	return in
}

// RowIDs returns the ids of rows [lo, hi) of origin k's segment, with
// their liveness (fsck on a healthy party names the rows another lost).
func (c *Core[S]) RowIDs(k, lo, hi int) (ids []string, live []bool) {
	seg := c.st.segs[k]
	for r := max(lo, 0); r < min(hi, c.st.rows.Len(k)); r++ {
		ids = append(ids, c.st.rows.ID(k, r))
		live = append(live, seg.shares.IsLive(r))
	}
	return ids, live
}
