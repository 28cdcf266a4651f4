package rowtxn

import (
	"fmt"

	"github.com/idface/idface/engine/rowtxn/txnlog"
	"github.com/idface/idface/protocol"
)

// Restore appends rows of origin k's segment to a party being rebuilt
// from its peers (started on an empty log): ids[i] is row base+i, live or
// deleted, with this party's share (nil for a deleted row). It logs them
// as one committed transaction, a put for every row and a delete right
// after each deleted one, so that the log replays to the peers' rows and
// digest (epoch is the segment's reshare epoch at the peers). Nothing is signed: the rows were authorised when they were
// enrolled, and a rebuilt log does not know the operators' past nonces.
func (c *Core[S]) Restore(k, base int, ids []string, live []bool, shares [][]byte, epoch uint32) error {
	c.txnMu.Lock()
	defer c.txnMu.Unlock()
	c.st.lock()
	defer c.st.unlock()
	if k < 0 || k >= len(c.st.segs) || len(live) != len(ids) || len(shares) != len(ids) {
		return fmt.Errorf("rowtxn: restore of %d rows of origin %d", len(ids), k)
	}
	if have := c.st.segs[k].shares.Rows(); have != base {
		return fmt.Errorf("rowtxn: restore of origin %d's rows from %d, it has %d", k, base, have)
	}
	if err := c.undecided(k); err != nil {
		return err
	}
	txn, err := c.env.NewTxnID()
	if err != nil {
		return err
	}
	p := &protocol.Prepare{Txn: txn, Origin: uint8(k), Dim: uint16(c.p.Dim()), Base: uint32(base)}
	if epoch > 0 { // the peers' segment had been reshared: its epoch comes along
		p.Reshare = &protocol.Reshare{Epoch: epoch}
	}
	for i, id := range ids {
		if !c.env.Owns(id) { // a peer of another shard, or a misplaced row
			return c.env.NotOwned(id)
		}
		share := shares[i]
		if share == nil {
			share = make([]byte, c.opt.ShareSize)
		}
		if len(share) != c.opt.ShareSize {
			return fmt.Errorf("rowtxn: a share of %d bytes, want %d", len(share), c.opt.ShareSize)
		}
		seq := uint32(base + i)
		p.Ops = append(p.Ops, protocol.Op{Kind: protocol.OpPut, Seq: seq, ID: id, Share: share})
		if !live[i] {
			p.Ops = append(p.Ops, protocol.Op{Kind: protocol.OpDelete, Seq: seq, ID: id})
		}
	}
	pos, err := c.log.Append(txnlog.EncodeLocal(p))
	if err != nil {
		c.stop.Fatal(err) // a running party (catching up) stops: its log may hold a torn record
		return err
	}
	c.st.pending[txn] = &pendingTxn{prep: p, tail: pos[0].TailOffset}
	if perr := c.decideLocked(&protocol.Decide{Txn: txn, Origin: uint8(k), Commit: true}); perr != nil {
		return perr
	}
	return nil
}

// Rewrite replaces the units of rows [base, base+len(units)) of origin
// k's segment (ids[i] at row base+i) by units, keeping the segment's
// epoch, which must still be epoch: a mode that keeps more than the share
// in a row's unit (replicated mode's records) updates it so. A row
// deleted meanwhile gets zeros. It logs one committed transaction,
// unsigned, whose replay replaces the units as a reshare does (the old
// units are erased from the log).
func (c *Core[S]) Rewrite(k, base int, ids []string, units [][]byte, epoch uint32) error {
	c.txnMu.Lock()
	defer c.txnMu.Unlock()
	c.st.lock()
	defer c.st.unlock()
	if k < 0 || k >= len(c.st.segs) || len(units) != len(ids) || len(ids) == 0 {
		return fmt.Errorf("rowtxn: rewrite of %d rows of origin %d", len(ids), k)
	}
	seg := c.st.segs[k]
	if seg.epoch != epoch {
		return fmt.Errorf("rowtxn: origin %s's rows were reshared meanwhile (epoch %d, not %d); try again", c.p.Party(k).Name, seg.epoch, epoch)
	}
	if err := c.undecided(k); err != nil {
		return err
	}
	txn, err := c.env.NewTxnID()
	if err != nil {
		return err
	}
	p := &protocol.Prepare{Txn: txn, Origin: uint8(k), Dim: uint16(c.p.Dim()), Base: uint32(seg.shares.Rows()), Reshare: &protocol.Reshare{Epoch: epoch}}
	for i, id := range ids {
		seq := base + i
		if seq >= seg.shares.Rows() || c.st.rows.ID(k, seq) != id {
			return fmt.Errorf("rowtxn: rewrite of row %d of origin %d (%q), which this party does not hold", seq, k, id)
		}
		u := units[i]
		if !seg.shares.IsLive(seq) {
			u = make([]byte, c.opt.ShareSize)
		}
		if len(u) != c.opt.ShareSize {
			return fmt.Errorf("rowtxn: a unit of %d bytes, want %d", len(u), c.opt.ShareSize)
		}
		p.Ops = append(p.Ops, protocol.Op{Kind: protocol.OpReplace, Seq: uint32(seq), ID: id, Share: u})
	}
	pos, err := c.log.Append(txnlog.EncodeLocal(p))
	if err != nil {
		c.stop.Fatal(err)
		return err
	}
	c.st.pending[txn] = &pendingTxn{prep: p, tail: pos[0].TailOffset}
	if perr := c.decideLocked(&protocol.Decide{Txn: txn, Origin: uint8(k), Commit: true}); perr != nil {
		return perr
	}
	return nil
}

// Revoke deletes rows of origin k's segment that a party missed the
// deletion of (replicated mode: a holder restored from a copy older than
// its peers' rows catches up from them): seqs[i] is a row here with id
// ids[i], deleted at the peers. Rows already deleted here are skipped. As
// Restore, it logs one committed transaction, unsigned, whose replay
// deletes the rows, and erases their shares from memory and the log.
func (c *Core[S]) Revoke(k int, seqs []int, ids []string) error {
	c.txnMu.Lock()
	defer c.txnMu.Unlock()
	c.st.lock()
	defer c.st.unlock()
	if k < 0 || k >= len(c.st.segs) || len(seqs) != len(ids) {
		return fmt.Errorf("rowtxn: revoke of %d rows of origin %d", len(ids), k)
	}
	if err := c.undecided(k); err != nil {
		return err
	}
	seg := c.st.segs[k]
	p := &protocol.Prepare{Origin: uint8(k), Dim: uint16(c.p.Dim()), Base: uint32(seg.shares.Rows())}
	for i, seq := range seqs {
		if seq < 0 || seq >= seg.shares.Rows() || c.st.rows.ID(k, seq) != ids[i] {
			return fmt.Errorf("rowtxn: revoke of row %d of origin %d (%q), which this party does not hold", seq, k, ids[i])
		}
		if seg.shares.IsLive(seq) {
			p.Ops = append(p.Ops, protocol.Op{Kind: protocol.OpDelete, Seq: uint32(seq), ID: ids[i]})
		}
	}
	if len(p.Ops) == 0 {
		return nil
	}
	var err error
	if p.Txn, err = c.env.NewTxnID(); err != nil {
		return err
	}
	pos, err := c.log.Append(txnlog.EncodeLocal(p))
	if err != nil {
		c.stop.Fatal(err) // a running party (catching up) stops: its log may hold a torn record
		return err
	}
	c.st.pending[p.Txn] = &pendingTxn{prep: p, tail: pos[0].TailOffset}
	if perr := c.decideLocked(&protocol.Decide{Txn: p.Txn, Origin: uint8(k), Commit: true}); perr != nil {
		return perr
	}
	return nil
}

// undecided refuses to change origin k's segment here while one of its
// transactions is undecided here: its decision would apply on top of
// rows it was not prepared for (caller holds the state's lock).
func (c *Core[S]) undecided(k int) error {
	for _, t := range c.st.pending {
		if int(t.prep.Origin) == k {
			return fmt.Errorf("a transaction of origin %s is undecided here; try again once it is decided", c.p.Party(k).Name)
		}
	}
	return nil
}
