package replicated

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
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

// tagKeep holds the tags of the queries in flight, by entry. It forgets
// a query's tags once fetched or after keep (the identify timeout), and
// makes room by forgetting that entry's oldest: each entry has its own
// quota (tagQuota), so an entry that floods queries the decider never
// answers evicts only its own.
type tagKeep struct {
	mu    sync.Mutex
	by    map[int]*entryTags
	seq   uint64
	keep  time.Duration
	batch int       // the most queries of one entry's batch (the holder's batch_max, at most MaxHiddenBatch)
	since time.Time // the holder's start: tags missing before since+keep may be a restart's
}

// entryTags are one entry's kept tags, and their queries in the order
// kept (an entry whose tags were fetched stays there until it is reached,
// and is skipped: its seq no longer matches).
type entryTags struct {
	kept  map[[16]byte]keptTags
	order []keptAt
	bytes int
}

type keptTags struct {
	tags []byte
	at   time.Time
	seq  uint64
}

type keptAt struct {
	qid [16]byte
	seq uint64
}

// keptOverhead is what one kept query costs beside its tags (the map's
// and the order's entries), counted in its entry's quota.
const keptOverhead = 128

// tagQuota is the bytes of tags one entry may have kept: two batches of
// batch queries of this size in flight and 8 more, and at least 128 MiB;
// at most 4096 queries.
func tagQuota(tagBytes, batch int) int {
	return max(128<<20, (2*max(batch, 1)+8)*(tagBytes+keptOverhead))
}

const maxKeptPerEntry = 4096

func (k *tagKeep) put(entry int, qid [16]byte, tags []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.by == nil {
		k.by = map[int]*entryTags{}
	}
	e := k.by[entry]
	if e == nil {
		e = &entryTags{kept: map[[16]byte]keptTags{}}
		k.by[entry] = e
	}
	now := time.Now()
	if old, ok := e.kept[qid]; ok { // a query id used again: the newer counts
		delete(e.kept, qid)
		e.bytes -= len(old.tags) + keptOverhead
	}
	quota := tagQuota(len(tags), k.batch)
	e.dropOldest(func(t keptTags) bool {
		return now.Sub(t.at) > k.keep || e.bytes+len(tags)+keptOverhead > quota || len(e.kept) >= maxKeptPerEntry
	})
	k.seq++
	e.kept[qid] = keptTags{tags: tags, at: now, seq: k.seq}
	e.order = append(e.order, keptAt{qid, k.seq})
	e.bytes += len(tags) + keptOverhead
}

// dropOldest forgets the entry's oldest kept tags while drop says so of
// them, in the order kept (entries already fetched, or kept again, free
// nothing and are passed over).
func (e *entryTags) dropOldest(drop func(keptTags) bool) {
	for len(e.order) > 0 {
		first := e.order[0]
		if t, ok := e.kept[first.qid]; ok && t.seq == first.seq {
			if !drop(t) {
				return
			}
			delete(e.kept, first.qid)
			e.bytes -= len(t.tags) + keptOverhead
		}
		e.order = e.order[1:]
	}
}

// young reports whether the holder started within the tags' keep: tags
// missing then may have been kept by the process before a restart.
func (k *tagKeep) young() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Since(k.since) < k.keep
}

// take hands over qid's tags once.
func (k *tagKeep) take(qid [16]byte) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	for _, e := range k.by { // expired tags go now, not at the entry's next query
		e.dropOldest(func(t keptTags) bool { return now.Sub(t.at) > k.keep })
	}
	for _, e := range k.by {
		if t, ok := e.kept[qid]; ok {
			delete(e.kept, qid)
			e.bytes -= len(t.tags) + keptOverhead
			return t.tags, time.Since(t.at) <= k.keep
		}
	}
	return nil, false
}

// keepTags computes the tags of vec under key and keeps them for the
// decider's fetch of query qid of entry entry.
func (h *Holder[E]) keepTags(entry int, qid [16]byte, vec []E, key *[32]byte) error {
	tags := make([]byte, 4*len(vec))
	if err := replicated.Tags(tags, vec, key); err != nil {
		return err
	}
	h.tagsKept.put(entry, qid, tags)
	return nil
}

// answerTags answers the decider's fetch of a query's tags: for each
// selection the XOR of the grid rows it selects, and the digests of the
// grid's rows or the digest of their list. Once: the tags are then
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
		if h.tagsKept.young() {
			// This process may have started after the query's part (a
			// restart): the entry runs the query again. Later, tags
			// missing were forgotten here (fetched already, past the
			// identify timeout, or past the entry's quota): a run again
			// would not bring them.
			return protocol.Errorf(protocol.CodeCountedDown, "%s keeps no tags of this query (it may have started after its part)", h.env.Member())
		}
		return protocol.Errorf(protocol.CodeUnavailable, "%s keeps no tags of this query (never made, fetched already, older than the identify timeout %v, or past its entry's quota)", h.env.Member(), h.tagsKept.keep)
	}
	cols, _ := replicated.TagGrid(len(tags) / 4)
	out := &protocol.TagAnswers{Rows: make([][]byte, len(m.Select))}
	for i, sel := range m.Select {
		out.Rows[i] = make([]byte, 4*cols)
		if err := replicated.TagAnswer(out.Rows[i], tags, cols, sel); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	list := replicated.TagRowDigests(tags, cols, m.Query)
	if m.List {
		out.List = list
	} else {
		out.ListDigest = replicated.TagListDigest(m.Query, list)
	}
	if !h.p.HideProbes() {
		// The decider fetches the tags of a checked query once it has every
		// part and has checked them: a query the cluster answers, which
		// counts toward the degraded limit (a part sent for a query its
		// entry then abandoned does not). Hidden probes have no degraded
		// service, and the decider fetches for refused ones too.
		h.gate.checked()
	}
	return out
}

// tagAskBound is the largest TagAsk a holder reads (protocol.TagAskBound):
// a selection of the largest grid per candidate.
func tagAskBound(p *Params) int {
	_, rows := replicated.TagGrid(protocol.MaxRows)
	return protocol.TagAskBound(engine.Limits(p.Params), replicated.TagSelectBytes(rows))
}

// fetchTags fetches from helpers a and b, which keep the tags of a vector
// of n positions, the tags at positions: topK selections whatever the
// answer (the rest select row 0, which shows a helper nothing: each
// selection alone is uniform). Every row it recovers, used or not, is
// checked against the row digests helper a sends and b confirms: a
// helper's altered answer is refused here, naming the pair, whatever the
// answer (at the entry, only a used slot's tag would fail, and the
// refusal would tell the helper where the answer lies). It returns the
// tags and the bytes moved.
func (d *Decider) fetchTags(ctx context.Context, qid [16]byte, n, topK int, positions []int, helpers [2]int) ([]uint32, uint64, error) {
	cols, rows := replicated.TagGrid(n)
	if len(positions) > topK {
		return nil, 0, fmt.Errorf("replicated: %d positions for the top %d", len(positions), topK)
	}
	if rows == 0 { // no row, so no answer: the helpers know the rows' count
		return nil, 0, nil
	}
	asks := [2]protocol.TagAsk{{Query: qid, List: true}, {Query: qid}}
	targets := make([]int, topK)
	for i := range topK {
		if i < len(positions) {
			targets[i] = positions[i] / cols
		}
		s0, s1, err := replicated.TagSelect(d.env.RandReader(), rows, targets[i])
		if err != nil {
			return nil, 0, err
		}
		asks[0].Select, asks[1].Select = append(asks[0].Select, s0), append(asks[1].Select, s1)
	}
	var answers [2]*protocol.TagAnswers
	var moved [2]uint64
	var errs [2]error
	var wg sync.WaitGroup
	for i, k := range helpers {
		name := d.p.Party(k).Name
		wg.Go(func() {
			resp, _, err := rpc.AskOnce(ctx, d.env.Net, name, &asks[i])
			// The bytes of the two messages, not of the stream: a helper
			// that padded its stream (progress reports) would otherwise
			// inflate the count past the entry's bound and have the
			// honest decider blamed for it.
			moved[i] = uint64(protocol.FramedSize(&asks[i]))
			if resp != nil {
				moved[i] += uint64(protocol.FramedSize(resp))
			}
			switch a, ok := resp.(*protocol.TagAnswers); {
			case err != nil && absent(err): // it stopped after its part, or restarted: the entry may run the query again
				errs[i] = protocol.Errorf(protocol.CodeCountedDown, "fetching the answer's tags from %s: %v (ask again)", name, err)
			case err != nil:
				errs[i] = protocol.Errorf(protocol.CodeUnavailable, "%s refused the fetch of the answer's tags, or answered it with a malformed message: %v", name, err)
			case !ok || len(a.Rows) != topK:
				errs[i] = protocol.Errorf(protocol.CodeUnavailable, "%s answered the fetch of %d tags with %v", name, topK, resp.Type())
			default:
				answers[i] = a
			}
		})
	}
	wg.Wait()
	total := moved[0] + moved[1]
	for _, first := range []bool{false, true} { // a helper's refusal first: it is not hidden behind the other's absence
		for _, err := range errs {
			if err != nil && countedDown(err) == first {
				return nil, total, err
			}
		}
	}
	list := answers[0].List
	pair := pairLabel(d.p, helpers[0], helpers[1])
	bad := len(list) != rows*replicated.TagRowDigestSize || replicated.TagListDigest(qid, list) != answers[1].ListDigest ||
		answers[0].ListDigest != [protocol.DigestSize]byte{} || len(answers[1].List) != 0 // each sends what it was asked, nothing else
	rowBuf := make([]byte, protocol.TagBytes*cols)
	tags := make([]uint32, len(positions))
	for i := range topK {
		if bad {
			break
		}
		a0, a1 := answers[0].Rows[i], answers[1].Rows[i]
		if len(a0) != len(rowBuf) || len(a1) != len(rowBuf) {
			bad = true
			break
		}
		subtle.XORBytes(rowBuf, a0, a1)
		bad = !replicated.TagRowCheck(rowBuf, list, cols, n, targets[i], qid)
		if i < len(positions) {
			tags[i] = protocol.TagAt(rowBuf, positions[i]%cols)
		}
	}
	if bad {
		d.refused.WithLabelValues(pair).Inc()
		d.env.Log.Warn("the helpers' answers to the fetch of a query's tags do not hold; refused", "pair", pair)
		return nil, total, protocol.Errorf(protocol.CodeInconsistent, "the helpers that keep the tags (%s) answered their fetch inconsistently; the query is refused, nothing was answered. One of them is faulty or compromised: check them", pair)
	}
	return tags, total, nil
}

// absent reports whether a fetch failed by the helper's absence (it
// stopped after its part, or is restarting: no connection, a reset, a
// stream refused or ended with no reply) or its say that it restarted
// (CodeCountedDown, answerTags): the entry may run the query again. Any
// other refusal, and a frame too large, cut short or that does not
// decode, is the helper's, and the query is refused, naming it.
func absent(err error) bool {
	if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
		return countedDown(err)
	}
	return !errors.Is(err, network.ErrFrameTooLarge) && !errors.Is(err, protocol.ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF)
}

// countedDown reports whether err is a refusal with CodeCountedDown (ask
// again).
func countedDown(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == protocol.CodeCountedDown
}

// tagAskRoute is the holder's route for the decider's fetch.
func (h *Holder[E]) tagAskRoute() engine.Route {
	return engine.Route{Op: "query", From: engine.Allow(network.RoleHelper), Handle: h.Guard(h.answerTags), Max: tagAskBound(h.p), Query: true}
}
