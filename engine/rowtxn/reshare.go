package rowtxn

import (
	"context"
	"crypto/rand"

	"github.com/idface/idface/protocol"
)

// Reshare. A party reshares its own segment: one transaction per batch of
// reshareBatch rows, each prepared at every party with a fresh key
// (Prepare.Reshare), each party replacing every row's share by its new
// one (Options.Reshare), logging the new shares and, once the
// transaction commits, erasing the old ones from its log. The share-hash
// vote (Options.Check) compares the new shares' copies as it does an
// enrollment's. A transaction is atomic at every party; the segment's
// epoch counts them and goes into the row-map digest, so that two
// parties combine shares of one epoch only (helpers wait for, or refuse,
// an entry whose digest differs). Never held for a party that is down:
// the key would be written into the origin's log.

// reshareBatch is the rows of one reshare transaction.
const reshareBatch = 1024

// validate checks a prepare: a reshare's own way, anything else the
// usual way.
func (c *Core[S]) validate(m *protocol.Prepare, sealed [][32]byte) *protocol.Error {
	if m.Reshare == nil {
		return c.st.validate(m, sealed)
	}
	if c.opt.Reshare == nil {
		return protocol.Errorf(protocol.CodeBadRequest, "mode %s does not reshare", c.p.Mode())
	}
	if int(m.Origin) >= len(c.st.segs) {
		return protocol.Errorf(protocol.CodeBadRequest, "%s: a reshare of origin %d, of %d", c.env.Self, m.Origin, len(c.st.segs))
	}
	if err := c.opt.Reshare(m, c.self, c.st.segs[m.Origin].shares); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%s: %v", c.env.Self, err)
	}
	return c.st.validateReshare(m)
}

// ReshareOwn reshares this party's segment at every party and returns the
// segment's epoch and rows. It stops at the first transaction that does
// not commit; the ones before stay (each is whole at every party).
func (c *Core[S]) ReshareOwn(ctx context.Context) (epoch uint32, rows int, perr *protocol.Error) {
	if c.opt.Reshare == nil {
		return 0, 0, protocol.Errorf(protocol.CodeBadRequest, "mode %s does not reshare", c.p.Mode())
	}
	c.st.mu.RLock()
	rows = c.st.segs[c.self].shares.Rows()
	c.st.mu.RUnlock()
	for lo := 0; lo < rows; lo += reshareBatch {
		if ctx.Err() != nil {
			return c.Epoch(c.self), rows, protocol.Errorf(protocol.CodeUnavailable, "the reshare was cut short after %d of %d rows: run it again", lo, rows)
		}
		var key [32]byte
		if _, err := rand.Read(key[:]); err != nil {
			return 0, 0, protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		hi := min(lo+reshareBatch, rows)
		c.st.mu.RLock()
		seg := c.st.segs[c.self]
		next := seg.epoch + 1
		ops := make([][]protocol.Op, c.p.Mu())
		for k := range ops {
			ops[k] = make([]protocol.Op, 0, hi-lo)
			for seq := lo; seq < hi; seq++ {
				ops[k] = append(ops[k], protocol.Op{Kind: protocol.OpReplace, Seq: uint32(seq), ID: c.st.rows.ID(c.self, seq)})
			}
		}
		c.st.mu.RUnlock()
		if perr := c.runTxn(ctx, protocol.Auth{}, ops, nil, &protocol.Reshare{Epoch: next, Key: key}); perr != nil {
			return c.Epoch(c.self), rows, perr
		}
	}
	return c.Epoch(c.self), rows, nil
}

// Epoch is origin k's segment's reshare epoch.
func (c *Core[S]) Epoch(k int) uint32 {
	c.st.mu.RLock()
	defer c.st.mu.RUnlock()
	return c.st.segs[k].epoch
}

// EpochLocked is Epoch for a caller that holds the read lock (RLock).
func (c *Core[S]) EpochLocked(k int) uint32 { return c.st.segs[k].epoch }
