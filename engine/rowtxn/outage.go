package rowtxn

import (
	"errors"
	"strings"

	"github.com/idface/idface/engine/rowtxn/txnlog"
	"github.com/idface/idface/protocol"
)

// Changes with a party down. In a mode that answers with a party down
// (config.ModeSpec.Outage: replicated mode), an origin whose one peer
// cannot be reached commits a sealed enrollment, or a deletion, with the
// others' votes, and keeps what the missing party must get: its prepare
// (for an enrollment, the part sealed to it, which only it can open) in a
// held record of its log, then the prepare and the decision in its outbox,
// in order after whatever that party already misses. When the party is
// back, the outbox delivers them in order, the party prepares and applies
// each as it would have, and once it confirms a decision the held
// record's part is erased. A held record whose part is intact at start is
// queued again. A change that would hold another party's plain shares (a
// non-sealed enrollment) is never committed without that party.

// mayHold reports whether a transaction may commit without one party:
// the mode answers with a party down and the change holds no plain share
// of another party.
func (c *Core[S]) mayHold(ops [][]protocol.Op, sealed *sealedParts) bool {
	if !c.p.Spec().Outage || c.p.Mu() < 3 {
		return false
	}
	for _, op := range ops[c.self] {
		switch {
		case op.Kind == protocol.OpReplace: // a reshare: its key would be logged
			return false
		case op.Kind == protocol.OpPut && sealed == nil: // another party's plain share
			return false
		}
	}
	return true
}

// unreached picks, from a prepare broadcast's errors (indexed like peers),
// the one peer that could not be reached, or answered that it stands
// down, when every other voted: the party to hold the change for, or ""
// when the errors are anything else.
func unreached(peers []string, errs []error) string {
	down := ""
	for i, err := range errs {
		var pe *protocol.Error
		switch {
		case err == nil:
		case down != "":
			return "" // a second peer missing
		case errors.As(err, &pe) && !StandsDown(err, peers[i]):
			return "" // a refusal
		default:
			down = peers[i]
		}
	}
	return down
}

// A party that stands down (replicated mode: a holder whose rows are older
// than its peers', until it has caught up) answers what it will not serve
// with StandDown's error. The other servers count it down as if it could
// not be reached: they have that answer from the party itself, never on
// another server's word (StandsDown checks who said it).

// standDownMark follows the party's name in every StandDown message, and
// untilRebuiltMark in every StandDownUntilRebuilt one.
const (
	standDownMark    = " stands down: "
	untilRebuiltMark = " stands down until rebuilt: "
)

// StandDown is party self's answer while it stands down, saying why and
// what to do: it is catching up (replicated mode: the others do not
// answer without it meanwhile, since one of them may be what keeps it
// out).
func StandDown(self, why string) *protocol.Error {
	return protocol.Errorf(protocol.CodeUnavailable, "%s%s%s", self, standDownMark, why)
}

// StandDownUntilRebuilt is party self's answer while it stands down until
// an operator rebuilds it (its shares are of an older epoch than both
// other parties'): the others count it down.
func StandDownUntilRebuilt(self, why string) *protocol.Error {
	return protocol.Errorf(protocol.CodeUnavailable, "%s%s%s", self, untilRebuiltMark, why)
}

// StandsDown reports whether err is party name's own answer that it
// stands down, for either reason.
func StandsDown(err error, name string) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.CodeUnavailable &&
		(strings.HasPrefix(pe.Msg, name+standDownMark) || strings.HasPrefix(pe.Msg, name+untilRebuiltMark))
}

// StandsDownUntilRebuilt reports whether err is party name's own answer
// that it stands down until it is rebuilt.
func StandsDownUntilRebuilt(err error, name string) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.CodeUnavailable && strings.HasPrefix(pe.Msg, name+untilRebuiltMark)
}

// hold logs the held record of party k's prepare m (before the decision,
// so that a crash in between finds it) and remembers its part (the caller
// holds heldMu).
func (c *Core[S]) hold(k int, m protocol.Msg, txn protocol.TxnID) *protocol.Error {
	rec := txnlog.EncodeHeld(k, m)
	pos, err := c.log.Append(rec)
	if err != nil {
		return c.stop.Fatal(err)
	}
	c.held[heldKey{c.p.Party(k).Name, txn}] = tail{pos[0].TailOffset, len(rec.Tail)}
	return nil
}

// delivered erases a held part once its party has confirmed the decision
// (the outbox's Delivered; flushes run under txnMu).
func (c *Core[S]) delivered(to string, m protocol.Msg) {
	d, ok := m.(*protocol.Decide)
	if !ok {
		return
	}
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if c.eraseHeld(heldKey{to, d.Txn}) {
		c.env.Log.Info("a party that was down has the change it missed", "party", to)
	}
}

// eraseHeld erases the part of a held record and forgets it, reporting
// whether there was one (the caller holds heldMu).
func (c *Core[S]) eraseHeld(key heldKey) bool {
	t, ok := c.held[key]
	if !ok {
		return false
	}
	if err := c.log.Overwrite(t.off, make([]byte, t.n)); err != nil {
		c.stop.Fatal(err)
		return false
	}
	delete(c.held, key)
	return true
}

// requeueHeld queues again, at start, the held prepares whose parts are
// intact: those of committed transactions with their decision, in log
// order; those of transactions that did not commit are erased. A part this
// party keeps as the third party (relay.go) of a transaction still in
// doubt here waits for its decision.
func (c *Core[S]) requeueHeld(r *replayState) error {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	for _, h := range r.held {
		if h.Msg == nil {
			continue // confirmed
		}
		origin := heldOrigin(h.Msg)
		name := c.p.Party(h.Party).Name
		if _, inDoubt := c.st.pending[h.Txn]; inDoubt && origin != c.self {
			c.held[heldKey{name, h.Txn}] = h.tail
			c.relayOnCommit(h.Txn, relay{to: name, msg: h.Msg})
			continue
		}
		if !r.decided[h.Txn] {
			if err := c.log.Overwrite(h.off, make([]byte, h.n)); err != nil {
				return err
			}
			continue
		}
		d := &protocol.Decide{Txn: h.Txn, Origin: uint8(origin), Commit: true}
		if origin == c.self {
			d = c.decideFor(d, heldPrepare(h.Msg), h.Party)
		} else {
			d.Proof = r.proofs[h.Txn] // a relay: with the origin's proof for the party, kept with the decision
		}
		c.outbox.Add(name, h.Msg)
		c.outbox.Add(name, d)
		c.held[heldKey{name, h.Txn}] = h.tail
	}
	return nil
}

// alreadyPrepared answers a prepare whose change this party already has:
// a held prepare delivered again (the origin restarted before it learnt
// that this party confirmed the decision), or one whose rows a rebuild
// fetched from the peers. Pending here: vote again. Applied here (its new
// rows are at their addresses with their ids, its deleted ids are gone or
// its nonce was used here): vote; nothing changes. Anything else goes
// through validation. (A rebuilt party does not know past nonces: a held
// deletion delivered twice around a crash of its origin, of an id
// enrolled again meanwhile, would delete it there; a window this narrow is
// left open.)
func (c *Core[S]) alreadyPrepared(m *protocol.Prepare) (*protocol.Vote, bool) {
	if t, ok := c.st.pending[m.Txn]; ok && t.prep.Origin == m.Origin {
		return c.vote(m), true
	}
	if int(m.Origin) >= len(c.st.segs) || len(m.Ops) == 0 {
		return nil, false
	}
	seg := c.st.segs[m.Origin]
	nonceUsed := c.st.auth.Used(m.Auth.Nonce)
	for _, op := range m.Ops {
		switch op.Kind {
		case protocol.OpPut:
			if int(op.Seq) >= seg.shares.Rows() || c.st.rows.ID(int(m.Origin), int(op.Seq)) != op.ID {
				return nil, false
			}
		case protocol.OpDelete:
			// Live again after this very deletion applied here (its nonce
			// is used): enrolled anew since, and it stays.
			if _, live := c.st.rows.Lookup(op.ID); live && !nonceUsed {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return c.vote(m), true
}

// vote is this party's yes to m, with the mode's check.
func (c *Core[S]) vote(m *protocol.Prepare) *protocol.Vote {
	v := &protocol.Vote{Txn: m.Txn}
	if c.opt.Check != nil {
		v.Check = c.opt.Check(m, c.self)
	}
	return v
}

// heldPrepare is the prepare of a held message.
func heldPrepare(m protocol.Msg) *protocol.Prepare {
	if sp, ok := m.(*protocol.SealedPrepare); ok {
		return &sp.Prepare
	}
	p, _ := m.(*protocol.Prepare)
	return p
}

// heldOrigin is the origin of a held prepare.
func heldOrigin(m protocol.Msg) int {
	if sp, ok := m.(*protocol.SealedPrepare); ok {
		return int(sp.Prepare.Origin)
	}
	return int(m.(*protocol.Prepare).Origin)
}
