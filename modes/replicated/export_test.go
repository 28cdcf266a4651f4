package replicated

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// set changes the limit; every entry starts again with a full burst.
func (l *limiter) set(rate float64, burst int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate, l.burst, l.b, l.rateOf = rate, float64(burst), map[int]*bucket{}, nil
}

// Pending is the number of queries the decider holds parts of.
func (d *Decider) Pending() int { return d.Queries.Len() }

// PairLabel is the refusal counter's label of the pair of holders a, b.
var PairLabel = pairLabel

// TrailerSize is the bytes a holder keeps after each row's pair.
const TrailerSize = replicated.TrailerSize

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
			for i := range pr.context {
				pr.context[i] = byte(r.Uint32())
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
	go h.passes.Do(context.Background(), &pass{ctx: context.Background(), q: q, started: func(blindbase.View) { close(in); <-out }})
	<-in
	return func() { close(out) }
}

// Deviation is what a deviating entry does to one query (Deviate): it
// tells its helper and the decider that holder Down is down, and adds
// Delta at the positions of the rows Raise (ids) in the vector that, with
// Down down, no other holder computes.
type Deviation struct {
	Down  int
	Raise []string
	Delta int
}

// Learned is what the deviating entry read from the decider's answer:
// the exact score of every raised row it could compute (from a value
// whose tag holds, or from a score less its addition), the ids of every
// answered row, and whether the answer carried any value, tag or score.
type Learned struct {
	Scores   map[string]int
	Answered []string
	Opened   bool // any nonzero value or tag, or a score
	Err      error
}

// Deviate runs one query of y (top topK) through holder e as its entry,
// deviating as dev says, and returns what it learned. The holder's own
// code runs every step but the addition (and the entry's checks of the
// answer, which a deviating entry skips).
func Deviate(e any, y []float32, topK int, dev Deviation) Learned {
	switch h := e.(type) {
	case *Holder[uint8]:
		return deviate(h, y, topK, dev)
	case *Holder[uint16]:
		return deviate(h, y, topK, dev)
	}
	return Learned{Err: fmt.Errorf("not a holder: %T", e)}
}

func deviate[E additive.Elem](h *Holder[E], y []float32, topK int, dev Deviation) Learned {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl := plan{entry: h.Self(), down: dev.Down}
	nq, perr := blindbase.NewQuery(h.env, h.p.Params, h.query, &protocol.Identify{TopK: uint16(topK), Template: y})
	if perr != nil {
		return Learned{Err: perr}
	}
	sigma, qid := nq.Sigma, nq.ID
	var peers []string
	for _, name := range h.Peers() {
		if h.p.PartyIndex(name) != dev.Down {
			peers = append(peers, name)
		}
	}
	f := h.newFanout(ctx, peers)
	defer f.cancel()
	ask := func(v blindbase.View) {
		f.askAll(v, func(_ int, sealed protocol.Digest) *protocol.BlindQuery {
			return &protocol.BlindQuery{Query: qid, Sigma: sigma, Digest: sealed, Pos: nq.Pos, Coef: nq.Coef, Down: pl.wireDown()}
		})
	}
	vec, err := h.score(ctx, nq.Q, &sigma, "", nil, ask)
	var base []E // the entry's honest part of every position's score
	raised := map[int]bool{}
	if err == nil {
		n := vec.Rows()
		base = make([]E, n)
		for p := range base {
			base[p] = vec.own[p] + vec.next[p]
		}
		pi, perr := (&additive.Permuter{}).Permutation(&sigma, n)
		if perr != nil {
			return Learned{Err: perr}
		}
		unchecked := vec.own // the vector of the share this entry holds with the down holder
		if pl.full(replicated.Held(h.Self())[1]) == h.Self() {
			unchecked = vec.next
		}
		h.RLock()
		for row := range n {
			if s, seq, live := vec.Locate(row); live && slices.Contains(dev.Raise, h.ID(s, seq)) {
				unchecked[pi[row]] += E(dev.Delta)
				raised[pi[row]] = true
			}
		}
		h.RUnlock()
	}
	res, _, perr := f.finish(err, func(ctx context.Context) (*network.Stream, error) {
		return h.sendShares(ctx, qid, vec, pl, topK, nil)
	})
	if perr != nil {
		return Learned{Err: perr}
	}
	out := Learned{Scores: map[string]int{}, Opened: len(res.Scores) > 0}
	rows, perr := blindbase.Unpermute(h.permuter(), res.Positions, &sigma, vec.Rows())
	if perr != nil {
		return Learned{Err: perr}
	}
	key := f.oks[0].TagKey
	h.RLock()
	defer h.RUnlock()
	for i, p := range res.Positions {
		s, seq, _ := vec.Locate(rows[i])
		id := h.ID(s, seq)
		out.Answered = append(out.Answered, id)
		if i < len(res.Values) && i < len(res.Tags) {
			out.Opened = out.Opened || res.Values[i] != 0 || res.Tags[i] != 0
			if tag, err := replicated.Tag(&key, int(p), uint64(res.Values[i])); err == nil && tag == res.Tags[i] && raised[int(p)] {
				out.Scores[id] = additive.Signed(base[p] + E(res.Values[i]))
			}
		}
		if i < len(res.Scores) && raised[int(p)] {
			out.Scores[id] = int(res.Scores[i]) - dev.Delta
		}
	}
	return out
}

// CorruptShare makes holder e deviate on row seq of origin seg's segment:
// it adds delta to every coordinate of its own share of the row, in
// memory, so that its product share of that row is off by delta times the
// sum of its two query-share coefficients (unknown to it: the probe is
// hidden). Its copy as a verifier (the check sums) stays as computed
// before. It returns the undo.
func CorruptShare(e any, seg, seq, delta int) func() {
	switch h := e.(type) {
	case *Holder[uint8]:
		return corruptShare(h, seg, seq, delta)
	case *Holder[uint16]:
		return corruptShare(h, seg, seq, delta)
	}
	panic(fmt.Sprintf("CorruptShare: %T", e))
}

func corruptShare[E additive.Elem](h *Holder[E], seg, seq, delta int) func() {
	add := func(dl int) {
		h.scanning.Lock() // a pass (also one between probes) reads the stores
		defer h.scanning.Unlock()
		st := h.Shares(seg).own
		row, err := st.Row(seq, make([]E, h.p.Dim()))
		if err != nil {
			panic(err)
		}
		for j := range row {
			row[j] += E(dl)
		}
		if err := st.Put(seq, row, true); err != nil {
			panic(err)
		}
	}
	add(delta)
	return func() { add(-delta) }
}

// MailboxSlots is how many vectors wait in holder e's mailbox.
func MailboxSlots(e any) int {
	switch h := e.(type) {
	case *Holder[uint8]:
		return h.vectorsIn.len()
	case *Holder[uint16]:
		return h.vectorsIn.len()
	}
	panic(fmt.Sprintf("MailboxSlots: %T", e))
}

// PlantShare makes holder e deviate on the row of id as a holder that
// plants a face would: it adds delta (a gallery vector) to its own share
// of the row (next: its next share), in memory, so that whatever it serves
// from its store (a fetch, its queries) carries it. No query may run
// meanwhile.
func PlantShare(e any, id string, next bool, delta []int8) {
	switch h := e.(type) {
	case *Holder[uint8]:
		plantShare(h, id, next, delta)
	case *Holder[uint16]:
		plantShare(h, id, next, delta)
	default:
		panic(fmt.Sprintf("PlantShare: %T", e))
	}
}

func plantShare[E additive.Elem](h *Holder[E], id string, next bool, delta []int8) {
	h.scanning.Lock()
	defer h.scanning.Unlock()
	seg, seq := -1, -1
	h.RLock()
	for k := range replicated.Holders {
		for i := range h.Shares(k).Rows() {
			if h.ID(k, i) == id {
				seg, seq = k, i
			}
		}
	}
	h.RUnlock()
	if seg < 0 {
		panic(fmt.Sprintf("PlantShare: no row %q", id))
	}
	st := h.Shares(seg).own
	if next {
		st = h.Shares(seg).next
	}
	row, err := st.Row(seq, make([]E, h.p.Dim()))
	if err != nil {
		panic(err)
	}
	for j := range row {
		row[j] += E(delta[j])
	}
	if err := st.Put(seq, row, true); err != nil {
		panic(err)
	}
}
