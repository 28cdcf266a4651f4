// Package merge is what the deciders of the modes that split a query into
// parts share (blind, replicated and HE mode; docs/DESIGN-NOTES.md
// "Shards"): the table of a decider's queries whose parts, one per
// holder or per shard, are still coming (Table), and in a sharded cluster
// the merge of the shards' best scores into the answer's ranks (Merger,
// the decider's or key server's coordinator; MergeRanks, each of its
// shards' step). It holds no share and imports no mode: every mode that
// merges imports it.
package merge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
)

// Bounds on what a decider holds at once: queries, and bytes of score
// shares (mu vectors of n*k/8 bytes per query, 2 MB per holder at 1M
// rows of a 16-bit ring). A holder may have at most half the queries
// waiting for the other holders (orphans), so one holder that sends
// shares of queries nobody else joins cannot fill the table; orphans and
// unanswered queries expire after Timeouts().DeciderWait.
const (
	MaxQueries      = 128 // three entries of replicated mode with two batches of 8 hidden probes in flight: 48
	maxPendingBytes = 2 << 30
)

// Table is a decider's queries whose parts (one per holder, of type P)
// are still coming, until the answer (R) or a failure; blind mode's and
// replicated blind mode's deciders keep one each.
type Table[P, R any] struct {
	holders int
	wait    time.Duration
	name    func(holder int) string
	// Owner names the table's server in refusals ("the decider" when
	// empty; a merger names its member).
	Owner string

	mu      sync.Mutex
	queries map[[16]byte]*Pending[P, R]
	bytes   int // bytes reserved by pending queries
}

// Pending collects the parts of one query.
type Pending[P, R any] struct {
	ID      [16]byte
	Rows    int
	TopK    int // the entry's
	Entry   int // the entry's holder index, -1 until a part names it
	Parts   []P // by holder
	has     []bool
	arrived []bool // holders whose parts have arrived
	want    int    // parts that make the query complete (holders, or fewer in a degraded query)
	// complete: every part is in and the query is being decided; it no
	// longer expires (deciding is bounded by the decider's own timeouts).
	complete bool
	joined   int // holders that have announced their parts
	got      int // holders whose parts have arrived
	creator  int // the holder whose part came first
	bytes    int // reserved of Table.bytes
	created  time.Time
	done     chan struct{} // closed by finish, once
	once     sync.Once
	res      R
	err      error
}

// finish records the outcome and wakes the entry's request (first call
// wins).
func (q *Pending[P, R]) finish(res R, err error) {
	q.once.Do(func() { q.res, q.err = res, err; close(q.done) })
}

// NewTable makes an empty table for queries of holders parts that wait at
// most wait for each other; name names a holder in refusals.
func NewTable[P, R any](holders int, wait time.Duration, name func(holder int) string) *Table[P, R] {
	return &Table[P, R]{holders: holders, wait: wait, name: name, queries: map[[16]byte]*Pending[P, R]{}}
}

func (t *Table[P, R]) owner() string {
	if t.Owner == "" {
		return "the decider"
	}
	return t.Owner
}

// Len is the number of pending queries.
func (t *Table[P, R]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queries)
}

// Join registers holder's part of query id (rows rows, size bytes) and
// reserves its bytes. entry is the entry's holder index as this part names
// it (-1: it does not say); the entry's own part brings topK. A part that
// contradicts the query's others ends the query: it cannot be answered.
// want is the number of parts the query has by this part (0: one per
// holder).
func (t *Table[P, R]) Join(id [16]byte, rows, holder, size, entry, topK, want int) (*Pending[P, R], *protocol.Error) {
	if want == 0 {
		want = t.holders
	}
	t.mu.Lock()
	q := t.queries[id]
	if q == nil {
		if len(t.queries) >= MaxQueries {
			t.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%s holds %d queries, its limit; retry shortly", t.owner(), MaxQueries)
		}
		orphans := 0
		for _, o := range t.queries {
			if o.creator == holder && o.joined == 1 {
				orphans++
			}
		}
		if orphans >= MaxQueries/2 {
			t.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%d queries from %s wait for the other holders' shares; retry shortly", orphans, t.name(holder))
		}
		q = &Pending[P, R]{ID: id, Rows: rows, TopK: 1, Entry: -1, Parts: make([]P, t.holders), has: make([]bool, t.holders), arrived: make([]bool, t.holders), want: want,
			creator: holder, done: make(chan struct{}), created: time.Now()}
		t.queries[id] = q
	}
	var err error
	switch {
	case q.Rows != rows:
		err = fmt.Errorf("%d rows where another holder sent %d: the holders' row maps differ", rows, q.Rows)
	case q.has[holder]:
		err = fmt.Errorf("%s sent its part of this query twice", t.name(holder))
	case q.want != want:
		err = fmt.Errorf("holders disagree on how many parts the query has (%d, %d)", q.want, want)
	case q.joined >= q.want:
		err = fmt.Errorf("more parts than the query's %d", q.want)
	case entry >= 0 && q.Entry >= 0 && entry != q.Entry:
		err = fmt.Errorf("two entries for one query")
	case t.bytes+size > maxPendingBytes:
		err = fmt.Errorf("%s holds %d MB of score shares, its limit; retry shortly", t.owner(), t.bytes>>20)
	}
	if err != nil {
		t.mu.Unlock()
		t.Fail(q, err)
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	q.has[holder] = true
	q.joined++
	q.bytes += size
	t.bytes += size
	if entry >= 0 {
		q.Entry = entry
	}
	if holder == entry {
		q.TopK = topK
	}
	t.mu.Unlock()
	return q, nil
}

// Add stores holder's part and reports whether the query is complete
// (every part, the entry's among them): the caller then decides and calls
// Finish.
func (t *Table[P, R]) Add(q *Pending[P, R], holder int, part P) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-q.done: // failed or expired meanwhile
		return false
	default:
	}
	q.Parts[holder] = part
	q.arrived[holder] = true
	q.got++
	// Complete only with the entry's own part: a query is the entry's,
	// and parts without it would be answered to no one.
	q.complete = q.got == q.want && q.Entry >= 0 && q.arrived[q.Entry]
	return q.complete
}

// deciding reports whether q is complete and being decided.
func (t *Table[P, R]) deciding(q *Pending[P, R]) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return q.complete
}

// Finish drops the query and records its outcome.
func (t *Table[P, R]) Finish(q *Pending[P, R], res R, err error) {
	t.drop(q)
	q.finish(res, err)
}

// Fail ends a query without an answer.
func (t *Table[P, R]) Fail(q *Pending[P, R], err error) {
	var none R
	t.Finish(q, none, err)
}

func (t *Table[P, R]) drop(q *Pending[P, R]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.queries[q.ID] == q {
		delete(t.queries, q.ID)
		t.bytes -= q.bytes
		q.bytes = 0
	}
}

var errMissing = fmt.Errorf("the other holders' score shares did not arrive in time")

// Run drops, every second until ctx ends, the queries whose parts did not
// all come within the wait.
func (t *Table[P, R]) Run(ctx context.Context) {
	engine.Every(ctx, time.Second, func() { t.Expire(time.Now().Add(-t.wait)) })
}

// Expire fails the queries created before before.
func (t *Table[P, R]) Expire(before time.Time) {
	t.mu.Lock()
	var old []*Pending[P, R]
	for _, q := range t.queries {
		if q.created.Before(before) && !q.complete {
			old = append(old, q)
		}
	}
	t.mu.Unlock()
	for _, q := range old {
		t.Fail(q, errMissing)
	}
}

// Wait waits, for the entry's request, until the query is answered or
// fails, at most until its wait is over or ctx ends.
func (t *Table[P, R]) Wait(ctx context.Context, q *Pending[P, R]) (R, *protocol.Error) {
	wait := time.NewTimer(time.Until(q.created.Add(t.wait)))
	defer wait.Stop()
	select {
	case <-q.done:
	case <-wait.C:
		if !t.deciding(q) {
			t.Fail(q, errMissing)
			break
		}
		select { // its parts are in: the decision ends it
		case <-q.done:
		case <-ctx.Done():
			t.Fail(q, errMissing)
		}
	case <-ctx.Done():
		t.Fail(q, errMissing)
	}
	var none R
	if pe, own := q.err.(*protocol.Error); own {
		// The decision's own refusal, made there, keeps its code
		// (CodeCountedDown: the decider says ask again); a peer's,
		// wrapped, is relayed by engine.AsError.
		return none, pe
	}
	if q.err != nil {
		return none, engine.AsError(q.err, protocol.CodeUnavailable)
	}
	return q.res, nil
}
