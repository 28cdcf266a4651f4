package replicated

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/replicated"
)

// Tags on demand (docs/REPLICATED-NOTES.md "The decider check"): the two
// helpers that hold the vector the entry checks by tag each compute its
// tags and keep them here; the decider fetches the tags of the positions
// it answers by a two-server private information retrieval
// (sharing/replicated.TagSelect), so neither helper learns which
// positions, nor how many, and no tag vector crosses the network.

// keptTags is a query's tag vector at a helper, until the decider's fetch.
type keptTags struct {
	tags []byte
	at   time.Time
}

// tagKeep holds the tags of the queries in flight. It forgets a query's
// tags once fetched or after keep (the identify timeout), and makes room
// by forgetting the oldest: bounded in bytes, so a flood of queries that
// the decider never answers cannot fill a helper's memory.
type tagKeep struct {
	mu    sync.Mutex
	kept  map[[16]byte]keptTags
	bytes int
	keep  time.Duration
}

// maxKeptTagBytes bounds the tags a helper keeps (64 queries at 10^6 rows).
const maxKeptTagBytes = 256 << 20

func (k *tagKeep) put(qid [16]byte, tags []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.kept == nil {
		k.kept = map[[16]byte]keptTags{}
	}
	if old, ok := k.kept[qid]; ok {
		k.bytes -= len(old.tags)
	}
	for q, t := range k.kept {
		if now.Sub(t.at) > k.keep {
			delete(k.kept, q)
			k.bytes -= len(t.tags)
		}
	}
	for len(k.kept) > 0 && k.bytes+len(tags) > maxKeptTagBytes {
		var oldest [16]byte
		first := true
		for q, t := range k.kept {
			if first || t.at.Before(k.kept[oldest].at) {
				oldest, first = q, false
			}
		}
		k.bytes -= len(k.kept[oldest].tags)
		delete(k.kept, oldest)
	}
	k.kept[qid] = keptTags{tags: tags, at: now}
	k.bytes += len(tags)
}

// take hands over qid's tags once.
func (k *tagKeep) take(qid [16]byte) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.kept[qid]
	if ok {
		delete(k.kept, qid)
		k.bytes -= len(t.tags)
	}
	return t.tags, ok && time.Since(t.at) <= k.keep
}

// keepTags computes the tags of vec under key and keeps them for the
// decider's fetch of query qid.
func (h *Holder[E]) keepTags(qid [16]byte, vec []E, key *[32]byte) error {
	tags := make([]byte, 4*len(vec))
	if err := replicated.Tags(tags, vec, key); err != nil {
		return err
	}
	h.tagsKept.put(qid, tags)
	return nil
}

// answerTags answers the decider's fetch of a query's tags: for each
// selection the XOR of the grid rows it selects. Once: the tags are then
// forgotten.
func (h *Holder[E]) answerTags(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.TagAsk)
	if dec := h.p.DeciderName(); r.From.Name != dec {
		return protocol.Errorf(protocol.CodeForbidden, "only the decider %s fetches tags", dec)
	}
	if perr := engine.CheckTopK(h.p.Params, len(m.Select)); perr != nil {
		return perr
	}
	tags, ok := h.tagsKept.take(m.Query)
	if !ok {
		return protocol.Errorf(protocol.CodeUnavailable, "%s keeps no tags of this query (never made, fetched already, or older than the identify timeout %v)", h.env.Member(), h.tagsKept.keep)
	}
	cols, _ := replicated.TagGrid(len(tags) / 4)
	out := &protocol.TagAnswers{Rows: make([][]byte, len(m.Select))}
	for i, sel := range m.Select {
		out.Rows[i] = make([]byte, 4*cols)
		if err := replicated.TagAnswer(out.Rows[i], tags, cols, sel); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	return out
}

// tagAskBound is the largest TagAsk a holder reads: a selection of the
// largest grid per candidate.
func tagAskBound(p *Params) int {
	_, rows := replicated.TagGrid(protocol.MaxRows)
	return 64 + p.MaxTopK()*(4+replicated.TagSelectBytes(rows))
}

// fetchTags fetches from helpers a and b, which keep the tags of a vector
// of n positions, the tags at positions: topK selections whatever the
// answer (the rest select row 0, which shows a helper nothing: each
// selection alone is uniform). It returns the tags and the bytes moved.
func (d *Decider) fetchTags(ctx context.Context, qid [16]byte, n, topK int, positions []int, helpers [2]int) ([]uint32, uint64, error) {
	cols, rows := replicated.TagGrid(n)
	if len(positions) > topK {
		return nil, 0, fmt.Errorf("replicated: %d positions for the top %d", len(positions), topK)
	}
	if rows == 0 { // no row, so no answer: the helpers know the rows' count
		return nil, 0, nil
	}
	var asks [2]protocol.TagAsk
	for i := range topK {
		target := 0
		if i < len(positions) {
			target = positions[i] / cols
		}
		s0, s1, err := replicated.TagSelect(d.env.RandReader(), rows, target)
		if err != nil {
			return nil, 0, err
		}
		asks[0].Query, asks[1].Query = qid, qid
		asks[0].Select, asks[1].Select = append(asks[0].Select, s0), append(asks[1].Select, s1)
	}
	var answers [2]*protocol.TagAnswers
	var moved [2]uint64
	var errs [2]error
	var wg sync.WaitGroup
	for i, k := range helpers {
		name := d.p.Party(k).Name
		wg.Go(func() {
			resp, n, err := rpc.AskOnce(ctx, d.env.Net, name, &asks[i])
			moved[i] = n
			switch a, ok := resp.(*protocol.TagAnswers); {
			case err != nil:
				errs[i] = fmt.Errorf("fetching the answer's tags from %s: %w", name, err)
			case !ok || len(a.Rows) != topK:
				errs[i] = fmt.Errorf("%s answered the fetch of %d tags with %v", name, topK, resp.Type())
			default:
				answers[i] = a
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, moved[0] + moved[1], err
		}
	}
	tags := make([]uint32, len(positions))
	for i, p := range positions {
		t, err := replicated.TagFrom(answers[0].Rows[i], answers[1].Rows[i], cols, p)
		if err != nil {
			return nil, moved[0] + moved[1], fmt.Errorf("the helpers' tag answers: %w", err)
		}
		tags[i] = t
	}
	return tags, moved[0] + moved[1], nil
}

// tagAskRoute is the holder's route for the decider's fetch.
func (h *Holder[E]) tagAskRoute() engine.Route {
	return engine.Route{Op: "query", From: engine.Allow(network.RoleHelper), Handle: h.Guard(h.answerTags), Max: tagAskBound(h.p), Query: true}
}
