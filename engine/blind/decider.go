package blind

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
)

// maxQueries bounds the queries a decider holds shares of at once (memory:
// mu vectors of n*k/8 bytes each).
const maxQueries = 32

// Decider is the decider K: it holds no share; per query it receives one
// permuted, masked score-share vector from every holder, adds them and
// answers the entry with the permuted positions of the best rows whose
// score reaches the threshold. It sees each query's scores in random
// order and nothing else: no id, no row, no template, no other query.
type Decider struct {
	env engine.Env
	p   *config.Params

	mu      sync.Mutex
	queries map[[16]byte]*pendingQuery
}

// pendingQuery collects the holders' vectors of one query.
type pendingQuery struct {
	rows, topK int
	vecs       [][]byte // by holder
	got        int
	entry      int           // the entry's holder index, -1 until it has sent
	done       chan struct{} // closed by finish, once
	once       sync.Once
	res        *protocol.DecideResult
	err        error
	created    time.Time
}

// finish records the outcome and wakes the entry's request (first call
// wins).
func (q *pendingQuery) finish(res *protocol.DecideResult, err error) {
	q.once.Do(func() { q.res, q.err = res, err; close(q.done) })
}

// NewDecider makes the decider's engine.
func NewDecider(env engine.Env) (*Decider, error) {
	if env.Params.DeciderName() != env.Self {
		return nil, fmt.Errorf("blind: %q is not the decider of this cluster", env.Self)
	}
	return &Decider{env: env, p: env.Params, queries: map[[16]byte]*pendingQuery{}}, nil
}

// Routes: only share holders send shares.
func (d *Decider) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:      {Op: "health", From: engine.Anyone, Handle: d.health},
		protocol.TDecideShare: {Op: "decide", From: engine.Servers, Handle: d.share},
	}
}

// Run drops the shares of queries whose other shares never came.
func (d *Decider) Run(ctx context.Context) {
	engine.Every(ctx, time.Second, func() { d.expire(time.Now().Add(-2 * d.p.Timeouts().Request)) })
}

func (d *Decider) expire(before time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, q := range d.queries {
		if q.created.Before(before) {
			delete(d.queries, id)
		}
	}
}

// Stats: the decider keeps no rows.
func (d *Decider) Stats() engine.Stats { return engine.Stats{} }

func (d *Decider) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: d.env.Self, Mode: "blind-decider"}
}

// share takes one holder's vector; the entry's request waits for the
// answer, a helper's is acknowledged at once.
func (d *Decider) share(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.DecideShare)
	holder := d.p.PartyIndex(r.From.Name)
	if holder < 0 {
		return protocol.Errorf(protocol.CodeForbidden, "only share holders send score shares")
	}
	bits := d.p.Ring().Bits
	switch {
	case int(m.Bits) != bits:
		return protocol.Errorf(protocol.CodeBadRequest, "score shares of %d bits; this cluster's ring has %d", m.Bits, bits)
	case int(m.TopK) > d.p.MaxTopK() || m.TopK < 1:
		return protocol.Errorf(protocol.CodeBadRequest, "top %d, the cluster allows 1..%d", m.TopK, d.p.MaxTopK())
	case m.Rows > maxRows:
		return protocol.Errorf(protocol.CodeBadRequest, "%d rows, a decider takes at most %d", m.Rows, maxRows)
	}
	q, err := d.join(m, holder)
	if err != nil {
		return engine.AsError(err, protocol.CodeBadRequest)
	}
	vec := make([]byte, int(m.Rows)*bits/8)
	if _, err := io.ReadFull(r.Stream, vec); err != nil {
		d.fail(q, fmt.Errorf("%s's score shares: %w", r.From.Name, err))
		return protocol.Errorf(protocol.CodeBadRequest, "reading the score shares: %v", err)
	}
	d.add(q, holder, vec)
	if !m.Entry {
		return &protocol.DecideShareOK{}
	}
	select {
	case <-q.done:
	case <-ctx.Done():
		d.fail(q, fmt.Errorf("the other holders' score shares did not arrive in time"))
		<-q.done
	}
	if q.err != nil {
		return engine.AsError(q.err, protocol.CodeUnavailable)
	}
	return q.res
}

// maxRows bounds the rows of one query (n*k/8 bytes per vector).
const maxRows = 1 << 27

// join registers a holder's share of a query.
func (d *Decider) join(m *protocol.DecideShare, holder int) (*pendingQuery, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.queries[m.Query]
	if q == nil {
		if len(d.queries) >= maxQueries {
			return nil, fmt.Errorf("the decider holds %d queries, its limit; retry shortly", maxQueries)
		}
		q = &pendingQuery{rows: int(m.Rows), topK: 1, vecs: make([][]byte, d.p.Mu()), entry: -1, done: make(chan struct{}), created: time.Now()}
		d.queries[m.Query] = q
	}
	switch {
	case q.rows != int(m.Rows):
		return nil, fmt.Errorf("%d rows where another holder sent %d: the holders' row maps differ", m.Rows, q.rows)
	case q.vecs[holder] != nil:
		return nil, fmt.Errorf("holder %d sent its shares of this query twice", holder)
	case m.Entry && q.entry >= 0:
		return nil, fmt.Errorf("two entries for one query")
	}
	q.vecs[holder] = []byte{} // taken
	if m.Entry {
		q.entry, q.topK = holder, int(m.TopK)
	}
	return q, nil
}

// add stores a vector and decides once every holder's has come.
func (d *Decider) add(q *pendingQuery, holder int, vec []byte) {
	d.mu.Lock()
	q.vecs[holder] = vec
	q.got++
	complete := q.got == len(q.vecs) && q.entry >= 0
	d.mu.Unlock()
	if !complete {
		return
	}
	res, err := d.decide(q)
	d.drop(q)
	q.finish(res, err)
}

// fail ends a query without an answer.
func (d *Decider) fail(q *pendingQuery, err error) {
	d.drop(q)
	q.finish(nil, err)
}

func (d *Decider) drop(q *pendingQuery) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, p := range d.queries {
		if p == q {
			delete(d.queries, id)
		}
	}
}

// decide adds the vectors and finds the best positions: those reaching the
// threshold, or in a research cluster the best whatever their scores.
func (d *Decider) decide(q *pendingQuery) (*protocol.DecideResult, error) {
	thr := d.p.Threshold()
	reveal := d.p.RevealScores()
	if reveal {
		thr = -1 << 30 // every live row; the entry judges the threshold
	}
	var matches []sharing.Match
	var err error
	switch d.p.Ring().Bits {
	case 8:
		matches, err = decideVecs[uint8](q, thr)
	default:
		matches, err = decideVecs[uint16](q, thr)
	}
	if err != nil {
		return nil, err
	}
	res := &protocol.DecideResult{}
	for _, mt := range matches {
		res.Positions = append(res.Positions, uint32(mt.Row))
		if reveal {
			res.Scores = append(res.Scores, int32(mt.Score))
		}
	}
	return res, nil
}

func decideVecs[E additive.Elem](q *pendingQuery, thr int) ([]sharing.Match, error) {
	vecs := make([][]E, len(q.vecs))
	for k, v := range q.vecs {
		vecs[k] = additive.ViewElems[E](v)
	}
	return additive.Decide(q.topK, thr, 0, vecs...)
}
