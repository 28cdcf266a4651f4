package replicated

import "github.com/idface/idface/sharing/additive"

// Pending is the number of queries the decider holds parts of.
func (d *Decider) Pending() int { return d.queries.Len() }

// PairLabel is the refusal counter's label of the pair of holders a, b.
var PairLabel = pairLabel

// StoredPair is a holder's two shares of row seq of origin seg, as bytes.
func StoredPair(e any, seg, seq int) []byte {
	switch h := e.(type) {
	case *Holder[uint8]:
		return h.storedPair(seg, seq)
	case *Holder[uint16]:
		return h.storedPair(seg, seq)
	}
	return nil
}

func (h *Holder[E]) storedPair(seg, seq int) []byte {
	h.RLock()
	defer h.RUnlock()
	sh := h.Shares(seg)
	own, next := make([]E, h.p.Dim()), make([]E, h.p.Dim())
	sh.own.Row(seq, own)
	sh.next.Row(seq, next)
	return append(append([]byte(nil), additive.ElemBytes(own)...), additive.ElemBytes(next)...)
}
