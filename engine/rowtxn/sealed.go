package rowtxn

import (
	"context"
	"errors"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/protocol"
)

// Sealed enrollment: the operator's client made every party's shares and
// sealed each party's to that party (protocol.SealedEnroll). The entry
// opens only its own part and relays the others inside SealedPrepare;
// each party opens its part, and the transaction goes on as any other, the
// log holding the opened shares (or seeds) as before. A part that does not
// open is refused by its party, so the transaction aborts everywhere.

// sealedParts are a sealed enrollment's parts (party order) and their
// hashes, which the operator signed.
type sealedParts struct {
	parts  [][]byte
	hashes [][32]byte
}

// SealedEnroll handles a sealed batch at its entry party.
func (c *Core[S]) SealedEnroll(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.SealedEnroll)
	items := make([]protocol.Item, len(m.IDs))
	for i, id := range m.IDs {
		items[i].ID = id
	}
	if err := engine.CheckItems(items); err != nil {
		return err
	}
	if n := c.p.MaxEnrollBatch(); len(m.IDs) > n {
		return protocol.Errorf(protocol.CodeBadRequest, "a batch of %d rows; this cluster takes %d at most", len(m.IDs), n)
	}
	if len(m.Parts) != c.p.Mu() {
		return protocol.Errorf(protocol.CodeBadRequest, "%d sealed parts for %d share holders", len(m.Parts), c.p.Mu())
	}
	sp := &sealedParts{parts: m.Parts, hashes: make([][32]byte, len(m.Parts))}
	for k, part := range m.Parts {
		sp.hashes[k] = protocol.PartHash(part)
	}
	// The signature first: a part is opened only for a request an
	// operator made.
	if err := c.st.auth.Signed(m.Auth, protocol.OpPut, m.IDs, sp.hashes); err != nil {
		return err
	}
	c.st.mu.RLock()
	for i, id := range m.IDs {
		if _, dup := c.st.rows.Lookup(id); dup {
			c.st.mu.RUnlock()
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled (item %d)", id, i)
		}
	}
	c.st.mu.RUnlock()
	ops := make([][]protocol.Op, c.p.Mu())
	for k := range ops {
		ops[k] = make([]protocol.Op, len(m.IDs))
		for i, id := range m.IDs {
			ops[k][i] = protocol.Op{Kind: protocol.OpPut, ID: id}
		}
	}
	if err := c.openPart(ops[c.self], m.Auth.Nonce, m.IDs, m.Parts[c.self]); err != nil {
		return err
	}
	if err := c.runTxn(ctx, m.Auth, ops, sp, nil); err != nil {
		return err
	}
	c.m.Enrolled.Add(float64(len(m.IDs)))
	return &protocol.EnrollOK{Count: uint32(len(m.IDs))}
}

// SealedPrepare is phase one of a sealed enrollment at a non-origin party:
// check that the part is the one whose hash the operator signed, open it,
// then prepare as usual (which checks the signature over the hashes).
func (c *Core[S]) SealedPrepare(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.SealedPrepare)
	if len(m.Hashes) != c.p.Mu() || m.Hashes[c.self] != protocol.PartHash(m.Part) {
		return protocol.Errorf(protocol.CodeBadRequest, "%s: the sealed part is not the one whose hash came with it", c.env.Self)
	}
	if len(m.Prepare.Ops) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty transaction")
	}
	ids := make([]string, len(m.Prepare.Ops))
	for i, op := range m.Prepare.Ops {
		ids[i] = op.ID
	}
	if err := c.openPart(m.Prepare.Ops, m.Prepare.Auth.Nonce, ids, m.Part); err != nil {
		return err
	}
	return c.thenThird(ctx, r.From.Name, &m.Prepare, m.Held, m.Hashes, c.prepare(ctx, r.From.Name, &m.Prepare, m.Hashes))
}

// openPart opens this party's part of a sealed enrollment of ids and puts
// its shares into ops (one put per id): a flag byte (seeds or full
// shares), then one unit per id.
func (c *Core[S]) openPart(ops []protocol.Op, nonce [16]byte, ids []string, part []byte) *protocol.Error {
	if c.env.SealKey == nil {
		return protocol.Errorf(protocol.CodeInternal, "%s has no seal key loaded and cannot open its part of a sealed enrollment: it was started without its home's seal.key", c.env.Self)
	}
	b := seal.Binding{Cluster: c.p.ClusterID(), Holder: c.env.Self, Mode: string(c.p.Mode()), Context: protocol.SealContext(nonce, ids)}
	pt, err := seal.Open(c.env.SealKey, b, part, 1+len(ids)*max(c.opt.ShareSize, c.opt.SeedSize))
	if errors.Is(err, seal.ErrOpen) {
		return protocol.Errorf(protocol.CodeBadRequest, "%s: its sealed part does not open (damaged, or sealed for another holder, cluster or request): enroll the batch again", c.env.Self)
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%s: %v", c.env.Self, err)
	}
	unit, seeded := c.opt.ShareSize, pt[0] == 1
	if seeded {
		unit = c.opt.SeedSize
	}
	if flag := pt[0]; flag > 1 || unit == 0 || len(pt) != 1+len(ids)*unit {
		clear(pt)
		return protocol.Errorf(protocol.CodeBadRequest, "%s: its sealed part holds %d bytes, not %d units of %d (flag %d)", c.env.Self, len(pt), len(ids), unit, flag)
	}
	// A fresh buffer: the shares are viewed as k-bit elements in place
	// (additive.ViewElems), which wants them aligned, and pt's units start
	// after the flag byte.
	units := make([]byte, len(ids)*unit)
	copy(units, pt[1:])
	clear(pt)
	for i := range ops {
		ops[i].Share, ops[i].Seeded = units[i*unit:(i+1)*unit:(i+1)*unit], seeded
	}
	return nil
}
