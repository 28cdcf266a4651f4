package rowtxn

import (
	"context"
	"crypto/hmac"
	"sync"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Relays (issue 44 item 2): a party left out of a change catches up from
// either other party, so that no single peer can keep it out by
// withholding what it missed. Before, only the origin kept a change for a
// party that missed it (outage.go); an origin that never delivered it,
// and garbled its answers to the party's catch-up fetch, kept that party
// standing down for as long as it liked.
//
// In a cluster of three that answers with a party down (Spec().Outage,
// mu = 3), each party that prepares another origin's transaction:
//
//   - tells the third party (neither the origin nor itself) that it has
//     prepared it (protocol.Prepared), once the prepare is in its log; the
//     third answers with a note of its own when it has the transaction
//     already (prepared or decided: a prepare the origin kept for a party
//     that was down, delivered late);
//   - before it votes, waits for the third's note, at most noteWait, or
//     until its own note to the third failed (a third that is down);
//   - without that note, keeps the third's prepare in a held record, as
//     the origin keeps it (records.go): for a sealed enrollment, the
//     third's part that the origin sends along (SealedPrepare.Held; only
//     the third can open it, and the operator signed its hash, checked
//     here), for a deletion the prepare itself (every party's is the
//     same). Without a note and without a part to keep it votes no: an
//     origin that sends no copy cannot commit without the third;
//   - when the commit comes, queues for the third what it keeps (the
//     prepare, then the decision), or the decision alone when the third
//     said it prepared: an origin that withholds a decision from a party
//     that voted does not keep it waiting either. An abort is never
//     relayed, and an aborted change's held part is erased.
//
// The third takes a relayed prepare as the origin's (it checks the
// operator's signature over the parts' hashes, and opens its part), and a
// relayed commit of a transaction it has prepared, with the origin's
// proof of it for the third (protocol.CommitProof, which the origin sends
// with each commit and the relayer keeps with its decision). A relayer
// cannot make up a change (the operator signed it), take one back (aborts
// are the origin's) or commit one the origin aborted (no proof)
// (docs/REPLICATED-NOTES.md, "Catch-up from either peer").

// noteWait bounds how long a party waits for the third's note before it
// keeps the third's part itself: the third prepares the same change at
// the same time, so its note normally comes within a log write.
const noteWait = 500 * time.Millisecond

// noteKeep bounds the notes remembered (those of transactions this party
// never prepared, say, are dropped oldest first).
const noteKeep = 1024

// relays is a party's state of relays: the notes of the third parties,
// and what to relay when a transaction it prepared commits.
type relays struct {
	mu    sync.Mutex
	notes map[noteKey]chan struct{} // closed once the note came
	order []noteKey                 // the notes' keys, oldest first
	// onCommit is, by transaction, what to queue for the third party when
	// the transaction commits: its prepare (nil: the decision only).
	onCommit map[protocol.TxnID]relay
	// decided are the last decideKeep transactions decided here (a ring,
	// filled from the log at start): a note's answer says this party has
	// the transaction, and a pull is answered with its commit.
	decided   map[protocol.TxnID]decision
	decidedAt []protocol.TxnID
}

// decision is how a transaction of origin was decided here, with the
// origin's proof of a commit for the third party (protocol.CommitProof).
type decision struct {
	origin uint8
	commit bool
	proof  [32]byte
}

type relay struct {
	to  string
	msg protocol.Msg
}

// noteKey is a transaction by its origin and id: a note is taken for the
// origin it names only, and only from that origin's third party (a
// holder could otherwise claim, for its own transaction, another
// origin's, whose third it is).
type noteKey struct {
	origin uint8
	txn    protocol.TxnID
}

func newRelays() *relays {
	return &relays{notes: map[noteKey]chan struct{}{}, onCommit: map[protocol.TxnID]relay{}, decided: map[protocol.TxnID]decision{}}
}

// heard closes key's note channel: the third has the transaction.
func (r *relays) heard(key noteKey) {
	ch := r.note(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// remember notes how d's transaction was decided here.
func (r *relays) remember(d *protocol.Decide) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.decided[d.Txn]; ok {
		return
	}
	r.decided[d.Txn] = decision{d.Origin, d.Commit, d.Proof}
	r.decidedAt = append(r.decidedAt, d.Txn)
	if len(r.decidedAt) > decideKeep {
		delete(r.decided, r.decidedAt[0])
		r.decidedAt = r.decidedAt[1:]
	}
}

// committed is the commit of txn of origin here (within the last
// decideKeep decisions), with the origin's proof for the third party.
func (r *relays) committed(txn protocol.TxnID, origin uint8) (*protocol.Decide, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.decided[txn]
	if !ok || !d.commit || d.origin != origin {
		return nil, false
	}
	return &protocol.Decide{Txn: txn, Origin: origin, Commit: true, Proof: d.proof}, true
}

// note returns the channel closed by key's note, making it if need be.
func (r *relays) note(key noteKey) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.notes[key]
	if !ok {
		ch = make(chan struct{})
		r.notes[key] = ch
		r.order = append(r.order, key)
		if len(r.order) > noteKeep {
			delete(r.notes, r.order[0])
			r.order = r.order[1:]
		}
	}
	return ch
}

// relaying reports whether this cluster relays: three parties, answering
// with one down.
func (c *Core[S]) relaying() bool { return c.p.Spec().Outage && c.p.Mu() == 3 }

// third is the party of a transaction of origin that is neither the
// origin nor this party.
func (c *Core[S]) third(origin int) int { return 3 - origin - c.self }

// OnPrepared takes the third party's note that it prepared a transaction,
// and answers with the commit when the transaction committed here (a
// pull, below), else this party's own note when it has it too (pending
// or decided lately), else DecideOK.
func (c *Core[S]) OnPrepared(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Prepared)
	if !c.relaying() || int(m.Origin) >= c.p.Mu() || int(m.Origin) == c.self || !c.relayedFrom(int(m.Origin), r.From.Name) {
		return protocol.Errorf(protocol.CodeForbidden, "%s is not the third party of a transaction of origin %d here", r.From.Name, m.Origin)
	}
	c.relay.heard(noteKey{m.Origin, m.Txn})
	if d, ok := c.relay.committed(m.Txn, m.Origin); ok { // a pull, or a note from a party that was down
		return d
	}
	c.st.mu.RLock()
	t, has := c.st.pending[m.Txn]
	has = has && t.prep.Origin == m.Origin
	c.st.mu.RUnlock()
	c.relay.mu.Lock()
	_, decided := c.relay.decided[m.Txn]
	c.relay.mu.Unlock()
	has = has || decided
	if has {
		return &protocol.Prepared{Txn: m.Txn, Origin: m.Origin}
	}
	return &protocol.DecideOK{}
}

// awaitThird runs after this party prepared m (from its origin, not a
// relay) and before it votes: it tells the third party, waits for the
// third's note, and without it keeps the third's prepare (sealed: the
// origin's copy of the third's part, held; hashes: the parts' hashes).
// It decides what to relay when m commits. A change that is never held
// (a reshare, another party's plain shares) waits for the note as long as
// the request may: the origin cannot commit it without the third anyway,
// and a third that never prepared it must not be left behind by a commit
// here. Whenever it refuses, this party aborts m at once, so that an
// origin that ignores the refusal cannot commit it here after all.
func (c *Core[S]) awaitThird(ctx context.Context, m *protocol.Prepare, held []byte, hashes [][32]byte) *protocol.Error {
	k := c.third(int(m.Origin))
	name := c.p.Party(k).Name
	keep, holdable := c.thirdsPrepare(m, held, hashes, k)
	key := noteKey{m.Origin, m.Txn}
	noted := c.relay.note(key)
	failed := make(chan struct{})
	go func() {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.p.Timeouts().OutboxSend)
		defer cancel()
		resp, err := rpc.Call(nctx, c.env.Net, name, &protocol.Prepared{Txn: m.Txn, Origin: m.Origin})
		if err != nil {
			close(failed)
			return
		}
		switch resp.(type) {
		case *protocol.Prepared, *protocol.Decide: // it has the transaction already
			c.relay.heard(key)
		} // else its own note follows once it has prepared
	}()
	wait := noteWait
	if !holdable {
		wait = c.p.Timeouts().Request
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	got := false
	select {
	case <-noted:
		got = true
	case <-failed:
	case <-timer.C:
	case <-ctx.Done():
		return c.refuseHere(m, protocol.Errorf(protocol.CodeUnavailable, "%s: the prepare came too late", c.env.Self))
	}
	c.relay.mu.Lock()
	delete(c.relay.notes, key) // (its key stays in order until it ages out)
	c.relay.mu.Unlock()
	switch {
	case got:
		c.relayOnCommit(m.Txn, relay{to: name})
		return nil
	case !holdable:
		return c.refuseHere(m, protocol.Errorf(protocol.CodeAborted, "%s: %s, which must prepare this change too, did not say that it had", c.env.Self, name))
	case keep == nil:
		return c.refuseHere(m, protocol.Errorf(protocol.CodeAborted, "%s: %s did not say that it prepared this change, and its origin sent no copy of %s's part to keep for it: a change is committed only where either other holder can give it to a holder that misses it", c.env.Self, name, name))
	}
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if perr := c.hold(k, keep, m.Txn); perr != nil {
		return perr
	}
	c.relayOnCommit(m.Txn, relay{to: name, msg: keep})
	return nil
}

// refuseHere aborts m here (logged, and remembered as decided early, so
// that the origin cannot commit it here later nor prepare it again) and
// returns the refusal.
func (c *Core[S]) refuseHere(m *protocol.Prepare, refusal *protocol.Error) *protocol.Error {
	c.st.lock()
	defer c.st.unlock()
	if t := c.st.pending[m.Txn]; t != nil && t.prep.Origin == m.Origin {
		if err := c.decideLocked(&protocol.Decide{Txn: m.Txn, Origin: m.Origin, Commit: false}); err != nil {
			return err
		}
	}
	c.markLate(m.Txn)
	return refusal
}

// thirdsPrepare is party k's prepare of m that this party keeps for it
// (nil when it has none to keep), and whether m may be held at all.
func (c *Core[S]) thirdsPrepare(m *protocol.Prepare, held []byte, hashes [][32]byte, k int) (protocol.Msg, bool) {
	if m.Reshare != nil {
		return nil, false
	}
	bare := *m
	bare.Ops = make([]protocol.Op, len(m.Ops))
	for i, op := range m.Ops {
		switch {
		case op.Kind == protocol.OpDelete:
		case op.Kind == protocol.OpPut && hashes != nil:
			op.Share, op.Seeded = nil, false // this party's opened share stays here
		default:
			return nil, false
		}
		bare.Ops[i] = op
	}
	if hashes == nil {
		return &bare, true
	}
	if held == nil || k >= len(hashes) || protocol.PartHash(held) != hashes[k] {
		return nil, true
	}
	return &protocol.SealedPrepare{Prepare: bare, Part: held, Hashes: hashes}, true
}

func (c *Core[S]) relayOnCommit(txn protocol.TxnID, r relay) {
	c.relay.mu.Lock()
	defer c.relay.mu.Unlock()
	c.relay.onCommit[txn] = r
}

// relayDecided queues, once txn of origin is decided here, what this party
// relays to the third: the prepare it kept and the commit, or the commit
// alone; an abort erases a kept part. Called with the rows' write lock
// held (decideLocked), so it takes no lock that waits for the rows.
func (c *Core[S]) relayDecided(d *protocol.Decide) {
	if !c.relaying() {
		return
	}
	c.relay.remember(d)
	if int(d.Origin) == c.self {
		return
	}
	c.relay.mu.Lock()
	r, ok := c.relay.onCommit[d.Txn]
	delete(c.relay.onCommit, d.Txn)
	c.relay.mu.Unlock()
	if !ok {
		return
	}
	if !d.Commit {
		if r.msg != nil {
			c.forget(r.to, d.Txn)
		}
		return
	}
	if r.msg != nil {
		c.outbox.Relay(r.to, r.msg)
	}
	c.outbox.Relay(r.to, &protocol.Decide{Txn: d.Txn, Origin: d.Origin, Commit: true, Proof: d.Proof})
}

// decideFor is the origin's decision d on prepare prep as sent to party
// to: a commit carries the origin's proof of it for the third party, to
// whom to may relay it. Without the key it shares with the third, the
// origin sends no proof, and the third takes the commit from it alone.
func (c *Core[S]) decideFor(d *protocol.Decide, prep *protocol.Prepare, to int) *protocol.Decide {
	if !c.relaying() || !d.Commit || prep == nil || to == c.self || to < 0 || to >= c.p.Mu() {
		return d
	}
	out := *d
	if out.Proof = c.relayProof(protocol.CommitProof, prep, c.third(to)); out.Proof == ([32]byte{}) {
		return d // no key shared with the third
	}
	return &out
}

// relayProof is this party's proof (protocol.CommitProof or
// PrepareProof), as the origin of prep, for party to (zero without the
// key they share).
func (c *Core[S]) relayProof(proof proofFunc, prep *protocol.Prepare, to int) [32]byte {
	p, _ := c.proofFor(proof, prep, to, to)
	return p
}

// proofFunc is protocol.CommitProof or PrepareProof.
type proofFunc func(key [32]byte, cluster [16]byte, digest [32]byte, origin, to uint8) [32]byte

// proofFor is the proof of prep for party to, under the key this party
// shares with peer (the recipient when this party is the origin, the
// origin when it checks one); false without that key.
func (c *Core[S]) proofFor(proof proofFunc, prep *protocol.Prepare, peer, to int) ([32]byte, bool) {
	key, ok := c.env.PairKeys[c.p.Party(peer).Name]
	if !ok {
		return [32]byte{}, false
	}
	return proof(key, c.p.ClusterID(), protocol.PrepareDigest(prep, max(c.env.Shard, 0)), prep.Origin, uint8(to)), true
}

// proven reports whether got is the origin's proof (protocol.CommitProof
// or PrepareProof) for this party of prep, a prepare of another origin.
func (c *Core[S]) proven(proof proofFunc, prep *protocol.Prepare, got [32]byte) bool {
	want, ok := c.proofFor(proof, prep, int(prep.Origin), c.self)
	return ok && hmac.Equal(want[:], got[:])
}

// relayedFrom reports whether a message about a transaction of origin
// that came from party from is a relay this party takes: from is the
// third party of that transaction here.
func (c *Core[S]) relayedFrom(origin int, from string) bool {
	return c.relaying() && origin < c.p.Mu() && origin != c.self && c.p.Party(c.third(origin)).Name == from
}

// prepareRelayed is a prepare relayed by the third party, taken only with
// its origin's proof for this party over the prepare as every party holds
// it (Prepare.Relay, protocol.PrepareProof: a relayer cannot give a change
// another transaction's id): one this party
// already has is voted on again; any other is validated (the operator's
// signature, the parts' hashes, the rows' numbering) and logged as the
// origin's would be. The origin's word on its previous transaction
// (Prior) is not taken from a relay.
func (c *Core[S]) prepareRelayed(ctx context.Context, m *protocol.Prepare, sealed [][32]byte) protocol.Msg {
	c.st.lock()
	defer c.st.unlock()
	if ctx.Err() != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%s: the prepare came too late", c.env.Self)
	}
	// One this party has: a vote again changes nothing (a held record of
	// an older build, which has no proof, is so still delivered).
	if v, ok := c.alreadyPrepared(m); ok {
		return v
	}
	third := c.p.Party(c.third(int(m.Origin))).Name
	switch {
	case m.Reshare != nil: // never held for a party, so never relayed (thirdsPrepare)
		return protocol.Errorf(protocol.CodeForbidden, "%s: a reshare relayed by %s: a reshare is taken from its origin only", c.env.Self, third)
	case !c.proven(protocol.PrepareProof, m, m.Relay):
		c.unproven("prepare", int(m.Origin), third)
		return protocol.Errorf(protocol.CodeForbidden, "%s: the prepare relayed by %s does not carry its origin's proof (a relayer cannot relabel a change; an older build sends none): wait for the origin", c.env.Self, third)
	case c.decidedEarly(m.Txn):
		return protocol.Errorf(protocol.CodeAborted, "%s: the transaction was decided before its prepare came", c.env.Self)
	}
	resp := c.takePrepare(m, sealed)
	if _, ok := resp.(*protocol.Vote); ok {
		c.env.Log.Info("took a change relayed by the third party", "origin", c.p.Party(int(m.Origin)).Name)
	}
	return resp
}

// decideRelayed is a commit relayed by the third party: applied when the
// transaction is pending here and the commit carries its origin's proof
// for this party (a third cannot relay a commit of a change its origin
// aborted), else nothing (a relay is never taken for an early decision:
// the third relays only what it saw committed).
func (c *Core[S]) decideRelayed(m *protocol.Decide) protocol.Msg {
	c.st.mu.RLock()
	t, ok := c.st.pending[m.Txn]
	c.st.mu.RUnlock()
	if !ok {
		return &protocol.DecideOK{}
	}
	if t.prep.Origin != m.Origin {
		return protocol.Errorf(protocol.CodeForbidden, "only the origin decides its transaction")
	}
	if !c.proven(protocol.CommitProof, t.prep, m.Proof) {
		third := c.p.Party(c.third(int(m.Origin))).Name
		c.unproven("commit", int(m.Origin), third)
		return protocol.Errorf(protocol.CodeForbidden, "%s: the commit relayed by %s does not carry its origin's proof (a relayer cannot commit a change its origin did not; an older build sends none): wait for the origin", c.env.Self, third)
	}
	if err := c.decide(m); err != nil {
		return err
	}
	return &protocol.DecideOK{}
}

// unproven logs a relayed prepare or commit refused for want of its
// origin's proof: the relayer retries it until the origin delivers, so
// at most one line every 10 s per relayer and origin, with the count.
func (c *Core[S]) unproven(what string, origin int, relayer string) {
	o := c.p.Party(origin).Name
	if n, ok := c.unprovenLogs.Due(what + " " + o + " " + relayer); ok {
		c.env.Log.Warn("a relayed "+what+" without its origin's proof; not taken (the relayer retries it: wait for the origin, or upgrade the relayer if it is of an older build)", "origin", o, "relayer", relayer, "refused", n)
	}
}

// forget erases the part this party kept for party to of an aborted
// transaction.
func (c *Core[S]) forget(to string, txn protocol.TxnID) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	c.eraseHeld(heldKey{to, txn})
}

// Pulls: a relayed decision lives in the third party's outbox, in memory,
// so a third that restarted before delivering it, with an origin that
// withholds it, left the transaction in doubt here until a catch-up that
// needs both peers (and refuses to run while a transaction of that origin
// is undecided). A party therefore asks the third itself about every
// transaction of another origin still undecided here after pullAfter:
// it sends its note again (protocol.Prepared), and a third that committed
// the transaction (it knows from its log, also after a restart) answers
// with the commit, taken as a relayed one (decideRelayed). Like a relay,
// a pull never takes an abort and never takes another origin's word.

// pullAfter is how long a transaction of another origin stays undecided
// here before this party asks the third: well beyond a decision's normal
// delivery and its outbox's first retries.
const pullAfter = 3 * time.Second

// decideKeep bounds the decisions a party remembers for the third
// parties' notes and pulls.
const decideKeep = 4096

// pullDecisions asks the third party, every pullAfter/3, for the decision
// on each transaction of another origin that has been undecided here for
// pullAfter, until ctx ends.
func (c *Core[S]) pullDecisions(ctx context.Context) {
	if !c.relaying() {
		return
	}
	tick := time.NewTicker(pullAfter / 3)
	defer tick.Stop()
	first := map[protocol.TxnID]time.Time{} // when each undecided transaction was first seen
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, p := range c.undecidedOthers(first, now) {
				c.pull(ctx, p)
			}
		}
	}
}

// undecidedOthers updates first with the transactions of other origins
// undecided here now and returns those undecided since pullAfter.
func (c *Core[S]) undecidedOthers(first map[protocol.TxnID]time.Time, now time.Time) []protocol.Prepared {
	c.st.mu.RLock()
	defer c.st.mu.RUnlock()
	for txn := range first {
		if _, ok := c.st.pending[txn]; !ok {
			delete(first, txn)
		}
	}
	var due []protocol.Prepared
	for txn, t := range c.st.pending {
		if int(t.prep.Origin) == c.self || int(t.prep.Origin) >= c.p.Mu() {
			continue
		}
		since, ok := first[txn]
		if !ok {
			first[txn] = now
			continue
		}
		if now.Sub(since) >= pullAfter {
			due = append(due, protocol.Prepared{Txn: txn, Origin: t.prep.Origin})
		}
	}
	return due
}

// pull asks the third party of p's transaction whether it committed it,
// and takes its commit as relayed.
func (c *Core[S]) pull(ctx context.Context, p protocol.Prepared) {
	name := c.p.Party(c.third(int(p.Origin))).Name
	cctx, cancel := context.WithTimeout(ctx, c.p.Timeouts().OutboxSend)
	defer cancel()
	resp, err := rpc.Call(cctx, c.env.Net, name, &p)
	if err != nil {
		return
	}
	d, ok := resp.(*protocol.Decide)
	if !ok || !d.Commit || d.Txn != p.Txn || d.Origin != p.Origin || ctx.Err() != nil {
		return
	}
	pending := func() bool {
		c.st.mu.RLock()
		defer c.st.mu.RUnlock()
		_, ok := c.st.pending[p.Txn]
		return ok
	}
	if !pending() { // decided meanwhile, by the origin or a relay
		return
	}
	if _, isErr := c.decideRelayed(d).(*protocol.Error); !isErr && !pending() {
		c.env.Log.Info("took from the third party a decision its origin had not delivered", "origin", c.p.Party(int(p.Origin)).Name, "third", name)
	}
}
