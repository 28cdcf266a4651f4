package replicated

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/idface/idface/engine/blind"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/additive"
)

// Pending is the number of queries the decider holds parts of.
func (d *Decider) Pending() int { return d.queries.Len() }

// PairLabel is the refusal counter's label of the pair of holders a, b.
var PairLabel = pairLabel

// StoredPair is a holder's two shares of row seq of origin seg, as bytes.
func StoredPair(e any, seg, seq int) []byte {
	type rowShare interface {
		RowShare(k, seq int) ([]byte, error)
	}
	b, _ := e.(rowShare).RowShare(seg, seq)
	return b
}

// TagKey is the MAC key holder e derives, as a helper of entry holder
// entry, for query qid.
func TagKey(e any, entry int, qid [16]byte) ([32]byte, error) {
	switch h := e.(type) {
	case *Holder[uint8]:
		return h.tagKey(entry, qid)
	case *Holder[uint16]:
		return h.tagKey(entry, qid)
	}
	return [32]byte{}, fmt.Errorf("%T is no holder", e)
}

// MergedScans checks a holder's merged pass over its shares: three scans
// of random probes (1, 2 and 3 probes, each with its sigma) scored in one
// scanAll give every probe the vector it gets in a pass of its own.
func MergedScans(e any) error {
	switch h := e.(type) {
	case *Holder[uint8]:
		return mergedScans(h)
	case *Holder[uint16]:
		return mergedScans(h)
	}
	return fmt.Errorf("not a holder: %T", e)
}

func mergedScans[E additive.Elem](h *Holder[E]) error {
	r := rand.New(rand.NewPCG(5, 6))
	d := h.p.Dim()
	var scans []*scan[E]
	for n := 1; n <= 3; n++ {
		sc := &scan[E]{}
		for range n {
			pr := &probe[E]{y: [2][]E{make([]E, d), make([]E, d)}}
			for i := range d {
				pr.y[0][i], pr.y[1][i] = E(r.Uint32()), E(r.Uint32())
			}
			var sigma additive.Seed
			for i := range sigma {
				sigma[i] = byte(r.Uint32())
			}
			sc.prs, sc.sigmas = append(sc.prs, pr), append(sc.sigmas, &sigma)
		}
		scans = append(scans, sc)
	}
	merged := h.scanAll(context.Background(), scans)
	for i, sc := range scans {
		alone := h.scanAll(context.Background(), []*scan[E]{sc})
		if merged[i].err != nil || alone[0].err != nil {
			return fmt.Errorf("scan %d: %v, alone %v", i, merged[i].err, alone[0].err)
		}
		for q := range sc.prs {
			if !slices.Equal(merged[i].vecs[q].own, alone[0].vecs[q].own) {
				return fmt.Errorf("scan %d probe %d: the merged pass's vector differs from its own pass's", i, q)
			}
		}
	}
	return nil
}

// MergedPasses checks a holder's merged pass for checked queries: three
// random T_beta queries scored in one scorePass give each the two vectors
// it gets in a pass of its own.
func MergedPasses(e any) error {
	switch h := e.(type) {
	case *Holder[uint8]:
		return mergedPasses(h)
	case *Holder[uint16]:
		return mergedPasses(h)
	}
	return fmt.Errorf("not a holder: %T", e)
}

func mergedPasses[E additive.Elem](h *Holder[E]) error {
	r := rand.New(rand.NewPCG(7, 8))
	d := h.p.Dim()
	var ps []*pass
	for range 3 {
		var pos []int32
		var coef []int8
		for _, j := range r.Perm(d)[:h.p.Beta()] {
			pos, coef = append(pos, int32(j)), append(coef, int8(1-2*r.IntN(2)))
		}
		q, err := additive.NewQuery(d, pos, coef)
		if err != nil {
			return err
		}
		ps = append(ps, &pass{ctx: context.Background(), q: q})
	}
	// A helper's query whose entry digest does not match, and one whose
	// caller is gone, in the middle: refused, the others unchanged.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	refused := []*pass{
		{ctx: context.Background(), q: ps[0].q, from: h.Peers()[0], want: protocol.Digest{{Rows: 12345}}},
		{ctx: gone, q: ps[1].q},
	}
	all := append([]*pass{ps[0], refused[0]}, append([]*pass{refused[1]}, ps[1:]...)...)
	res := h.scorePass(context.Background(), all)
	for i, code := range map[int]protocol.Code{1: protocol.CodeCountedDown, 2: protocol.CodeUnavailable} {
		var pe *protocol.Error
		if !errors.As(res[i].err, &pe) || pe.Code != code {
			return fmt.Errorf("query %d: %v, want a refusal with code %v", i, res[i].err, code)
		}
	}
	merged := append(res[:1:1], res[3:]...)
	for i, p := range ps {
		alone := h.scorePass(context.Background(), []*pass{p})
		if merged[i].err != nil || alone[0].err != nil {
			return fmt.Errorf("query %d: %v, alone %v", i, merged[i].err, alone[0].err)
		}
		if len(alone[0].own) == 0 || !slices.Equal(merged[i].own, alone[0].own) || !slices.Equal(merged[i].next, alone[0].next) {
			return fmt.Errorf("query %d: the merged pass's vectors differ from its own pass's (or no rows)", i)
		}
	}
	return nil
}

// Hold stops holder e's passes for checked queries until the returned
// release is called: a pass whose query waits, inside, for it.
func Hold(e any) (release func()) {
	switch h := e.(type) {
	case *Holder[uint8]:
		return hold(h)
	case *Holder[uint16]:
		return hold(h)
	}
	return func() {}
}

func hold[E additive.Elem](h *Holder[E]) func() {
	q, err := additive.NewQuery(h.p.Dim(), []int32{0}, []int8{1})
	if err != nil {
		panic(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	go h.passes.Do(context.Background(), &pass{ctx: context.Background(), q: q, started: func(blind.View) { close(in); <-out }})
	<-in
	return func() { close(out) }
}
