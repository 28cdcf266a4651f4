package blind

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
)

// Bounds on what the decider holds at once: queries, and bytes of score
// shares (mu vectors of n*k/8 bytes per query, 2 MB per holder at 1M
// rows of a 16-bit ring). A holder may have at most half the queries
// waiting for the other holders (orphans), so one holder that sends
// shares of queries nobody else joins cannot fill the table; orphans and
// unanswered queries expire after Timeouts().DeciderWait.
const (
	maxQueries      = 32
	maxPendingBytes = 2 << 30
)

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
	bytes   int // score-share bytes reserved by pending queries
}

// pendingQuery collects the holders' vectors of one query.
type pendingQuery struct {
	rows, topK int
	vecs       [][]byte      // by holder
	joined     int           // holders that have announced their shares
	got        int           // holders whose shares have arrived
	creator    int           // the holder whose shares came first
	bytes      int           // reserved of Decider.bytes
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
		protocol.THealth:      {Op: "health", From: engine.Anyone, Handle: d.health, Max: engine.Small},
		protocol.TDecideShare: {Op: "decide", From: engine.Parties, Handle: d.share, Max: engine.Small, Long: true},
	}
}

// Run drops the shares of queries whose other shares never came.
func (d *Decider) Run(ctx context.Context) {
	engine.Every(ctx, time.Second, func() { d.expire(time.Now().Add(-d.p.Timeouts().DeciderWait)) })
}

func (d *Decider) expire(before time.Time) {
	d.mu.Lock()
	var old []*pendingQuery
	for _, q := range d.queries {
		if q.created.Before(before) {
			old = append(old, q)
		}
	}
	d.mu.Unlock()
	for _, q := range old {
		d.fail(q, errMissing)
	}
}

var errMissing = fmt.Errorf("the other holders' score shares did not arrive in time")

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
	q, perr := d.join(m, holder)
	if perr != nil {
		return perr
	}
	vec, err := network.ReadGrowing(r.Stream, nil, int(m.Rows)*bits/8)
	if err != nil {
		d.fail(q, fmt.Errorf("%s's score shares: %w", r.From.Name, err))
		return protocol.Errorf(protocol.CodeBadRequest, "reading the score shares: %v", err)
	}
	d.add(q, holder, vec)
	if !m.Entry {
		return &protocol.DecideShareOK{}
	}
	wait := time.NewTimer(time.Until(q.created.Add(d.p.Timeouts().DeciderWait)))
	defer wait.Stop()
	select {
	case <-q.done:
	case <-wait.C:
		d.fail(q, errMissing)
	case <-ctx.Done():
		d.fail(q, errMissing)
	}
	if q.err != nil {
		return engine.AsError(q.err, protocol.CodeUnavailable)
	}
	return q.res
}

// maxRows bounds the rows of one query (n*k/8 bytes per vector).
const maxRows = 1 << 27

// join registers a holder's share of a query and reserves the bytes its
// vector will take. A share that contradicts the query's others ends the
// query: it cannot be answered.
func (d *Decider) join(m *protocol.DecideShare, holder int) (*pendingQuery, *protocol.Error) {
	size := int(m.Rows) * d.p.Ring().Bits / 8
	d.mu.Lock()
	q := d.queries[m.Query]
	if q == nil {
		if len(d.queries) >= maxQueries {
			d.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeUnavailable, "the decider holds %d queries, its limit; retry shortly", maxQueries)
		}
		orphans := 0
		for _, o := range d.queries {
			if o.creator == holder && o.joined == 1 {
				orphans++
			}
		}
		if orphans >= maxQueries/2 {
			d.mu.Unlock()
			return nil, protocol.Errorf(protocol.CodeUnavailable, "%d queries from %s wait for the other holders' shares; retry shortly", orphans, d.p.Party(holder).Name)
		}
		q = &pendingQuery{rows: int(m.Rows), topK: 1, vecs: make([][]byte, d.p.Mu()), creator: holder, entry: -1, done: make(chan struct{}), created: time.Now()}
		d.queries[m.Query] = q
	}
	var err error
	switch {
	case q.rows != int(m.Rows):
		err = fmt.Errorf("%d rows where another holder sent %d: the holders' row maps differ", m.Rows, q.rows)
	case q.vecs[holder] != nil:
		err = fmt.Errorf("holder %d sent its shares of this query twice", holder)
	case m.Entry && q.entry >= 0:
		err = fmt.Errorf("two entries for one query")
	case d.bytes+size > maxPendingBytes:
		err = fmt.Errorf("the decider holds %d MB of score shares, its limit; retry shortly", d.bytes>>20)
	}
	if err != nil {
		d.mu.Unlock()
		d.fail(q, err)
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	q.vecs[holder] = []byte{} // taken
	q.joined++
	q.bytes += size
	d.bytes += size
	if m.Entry {
		q.entry, q.topK = holder, int(m.TopK)
	}
	d.mu.Unlock()
	return q, nil
}

// add stores a vector and decides once every holder's has come.
func (d *Decider) add(q *pendingQuery, holder int, vec []byte) {
	d.mu.Lock()
	select {
	case <-q.done: // failed or expired meanwhile
		d.mu.Unlock()
		return
	default:
	}
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
			d.bytes -= q.bytes
			q.bytes = 0
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
