package replicated

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Reshare (idface reshare, docs/REPLICATED-NOTES.md): an operator asks
// each holder in turn to reshare its own segment (rowtxn.ReshareOwn). For
// every row of a reshare transaction, holder i adds r_i to s_i and
// r_(i+1) to s_(i+1), where r_0 + r_1 + r_2 = 0 is the zero-sharing of
// the row under the transaction's key (replicated.ZeroShare): both holders
// of s_j add the same r_j, so every row's value stays and every pair is
// fresh. The key is drawn by the origin, sent to the two other holders
// over their pinned TLS and never written: the log keeps the new shares
// and the old ones are erased from it. A thief of one holder's old disk
// and another's new one holds shares of two epochs, which do not combine.

// reshare answers an operator's request: reshare this holder's segment,
// then have every holder attest its records of the new shares
// (records.go) before answering, so that a holder lost right after the
// reshare can still be rebuilt. A holder that cannot attest yet (one of
// the others missed the reshare's decision) keeps trying every second by
// itself: the reshare is done, and says so; the log and the metric
// idface_repl_records_unattested show what is left.
func (h *Holder[E]) reshare(ctx context.Context, _ engine.Request) protocol.Msg {
	epoch, rows, perr := h.ReshareOwn(ctx)
	if perr != nil {
		return perr
	}
	seg := h.Self()
	var failed []string
	if err := h.attestSegment(ctx, seg); err != nil {
		h.refusedRows(err)
		failed = append(failed, fmt.Sprintf("%s: %v", h.env.Self, err))
	}
	for i, err := range engine.Broadcast(ctx, h.env.Net, h.Peers(), func(int) protocol.Msg { return &protocol.ReplAttest{Seg: uint8(seg)} }, engine.Expect(protocol.TReshareOK)) {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", h.Peers()[i], err))
		}
	}
	if len(failed) > 0 {
		h.env.Log.Warn("reshared, but not every holder has attested its records of the new shares yet; they keep trying every second, and until then a holder that loses its data cannot be rebuilt", "epoch", epoch, "rows", rows, "failed", strings.Join(failed, "; "))
	}
	return &protocol.ReshareOK{Epoch: epoch, Rows: uint32(rows)}
}

// attestNow answers a reshare's origin: attest the records of its
// segment's reshared rows now.
func (h *Holder[E]) attestNow(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.ReplAttest)
	if int(m.Seg) >= replicated.Holders || h.p.Party(int(m.Seg)).Name != r.From.Name {
		return protocol.Errorf(protocol.CodeForbidden, "only origin %d's holder asks for its rows' records", m.Seg)
	}
	if err := h.attestSegment(ctx, int(m.Seg)); err != nil {
		h.refusedRows(err)
		return protocol.Errorf(protocol.CodeUnavailable, "%s: %v", h.env.Self, err)
	}
	h.RLock()
	defer h.RUnlock()
	return &protocol.ReshareOK{Epoch: h.EpochLocked(int(m.Seg)), Rows: uint32(h.Shares(int(m.Seg)).Rows())}
}

// reshareRows puts holder self's new pair of every row of a reshare's
// prepare into its ops, from sh, its pairs of the prepare's origin's
// segment: (s_i + r_i, s_(i+1) + r_(i+1)), the same salts, and no record
// of the third share (its holders attest the new one once the reshare
// commits: records.go); zeros for a deleted row (caller holds the rows'
// lock).
func reshareRows[E additive.Elem](pp *Params, sh pair[E], p *protocol.Prepare, self int) error {
	if p.Reshare == nil || int(p.Origin) >= replicated.Holders {
		return fmt.Errorf("replicated: not a reshare")
	}
	d := pp.Dim()
	held := replicated.Held(self)
	key := replicated.ReshareKey(p.Reshare.Key)
	seg := int(p.Origin)
	own, next := make([]E, d), make([]E, d)
	r0, r1 := make([]E, d), make([]E, d)
	size := unitSize(pp.Params)
	for i := range p.Ops {
		op := &p.Ops[i]
		seq := int(op.Seq)
		if op.Kind != protocol.OpReplace || seq >= sh.Rows() {
			return fmt.Errorf("replicated: a reshare of row %d of origin %d (%d rows)", seq, seg, sh.Rows())
		}
		if !sh.IsLive(seq) {
			op.Share = make([]byte, size)
			continue
		}
		if _, err := sh.own.Row(seq, own); err != nil {
			return err
		}
		if _, err := sh.next.Row(seq, next); err != nil {
			return err
		}
		row := uint64(seg)<<32 | uint64(seq)
		if err := replicated.ZeroShare(r0, held[0], &key, p.Reshare.Epoch, row); err != nil {
			return err
		}
		if err := replicated.ZeroShare(r1, held[1], &key, p.Reshare.Epoch, row); err != nil {
			return err
		}
		for j := range own {
			own[j] += r0[j]
			next[j] += r1[j]
		}
		tr := sh.tr.get(seq)
		tr.Record = [replicated.RecordSize]byte{}
		op.Share = tr.Append(slices.Concat(additive.ElemBytes(own), additive.ElemBytes(next)))
	}
	return nil
}
