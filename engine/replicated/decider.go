package replicated

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Bounds on what the decider holds at once (as in blind mode): queries,
// and bytes of vectors and tags. A holder may have at most half the
// queries waiting for the others, so one holder cannot fill the table.
const (
	maxQueries      = 32
	maxPendingBytes = 2 << 30
	maxRows         = 1 << 27
)

// Decider is the decider of a replicated cluster: per query it receives
// one message from each holder, checks every share's full vector against
// the other holder's digest (and the tags against theirs), then adds the
// three vectors and answers the entry with the best permuted positions,
// each with the value and tag the entry checks.
type Decider struct {
	env engine.Env
	p   *Params

	mu      sync.Mutex
	queries map[[16]byte]*pending
	bytes   int
	refused *prometheus.CounterVec
}

// part is one holder's contribution to a query.
type part struct {
	msg  *protocol.ReplShare
	vec  []byte // pi(c_i) + m_i
	tags []byte // the tags of vec, from the entry's predecessor only
}

// pending collects one query's three parts.
type pending struct {
	qid     [16]byte
	rows    int
	entry   int // holder index, from the first part; every part must agree
	topK    int
	parts   [replicated.Holders]*part
	joined  int
	got     int
	creator int
	bytes   int
	created time.Time
	done    chan struct{}
	once    sync.Once
	res     *protocol.ReplResult
	err     error
}

func (q *pending) finish(res *protocol.ReplResult, err error) {
	q.once.Do(func() { q.res, q.err = res, err; close(q.done) })
}

// NewDecider makes the decider's engine.
func NewDecider(env engine.Env) (*Decider, error) {
	p, err := NewParams(env.Params)
	if err != nil {
		return nil, err
	}
	if p.DeciderName() != env.Self {
		return nil, fmt.Errorf("replicated: %q is not the decider of this cluster", env.Self)
	}
	d := &Decider{env: env, p: p, queries: map[[16]byte]*pending{}}
	d.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_refusals_total",
		Help: "Queries the decider refused because two holders of a share disagree (label: the pair)."}, []string{"pair"})
	env.Metrics.MustRegister(d.refused)
	return d, nil
}

// Routes: only share holders send shares.
func (d *Decider) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:    {Op: "health", From: engine.Anyone, Handle: d.health, Max: engine.Small},
		protocol.TReplShare: {Op: "decide", From: engine.Parties, Handle: d.share, Max: engine.Small, Long: true},
	}
}

// Run drops the parts of queries whose other parts never came.
func (d *Decider) Run(ctx context.Context) {
	engine.Every(ctx, time.Second, func() {
		before := time.Now().Add(-d.p.Timeouts().DeciderWait)
		d.mu.Lock()
		var old []*pending
		for _, q := range d.queries {
			if q.created.Before(before) {
				old = append(old, q)
			}
		}
		d.mu.Unlock()
		for _, q := range old {
			d.fail(q, errMissing)
		}
	})
}

var errMissing = fmt.Errorf("the other holders' score shares did not arrive in time")

// Stats: the decider keeps no rows.
func (d *Decider) Stats() engine.Stats { return engine.Stats{} }

func (d *Decider) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: d.env.Self, Mode: "replicated-decider"}
}

// share takes one holder's part: the entry's request waits for the
// answer, a helper's is acknowledged once read.
func (d *Decider) share(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.ReplShare)
	holder := d.p.PartyIndex(r.From.Name)
	if holder < 0 {
		return protocol.Errorf(protocol.CodeForbidden, "only share holders send score shares")
	}
	tagger, _ := entryRoles(int(m.Entry))
	switch {
	case int(m.Bits) != d.p.Bits:
		return protocol.Errorf(protocol.CodeBadRequest, "score shares of %d bits; this cluster's ring has %d", m.Bits, d.p.Bits)
	case int(m.TopK) > d.p.MaxTopK() || m.TopK < 1:
		return protocol.Errorf(protocol.CodeBadRequest, "top %d, the cluster allows 1..%d", m.TopK, d.p.MaxTopK())
	case m.Rows > maxRows:
		return protocol.Errorf(protocol.CodeBadRequest, "%d rows, a decider takes at most %d", m.Rows, maxRows)
	case m.Tags != (holder == tagger):
		return protocol.Errorf(protocol.CodeBadRequest, "tags from %s, whose entry is holder %d", r.From.Name, m.Entry)
	}
	size := int(m.Rows) * d.p.Bits / 8
	if m.Tags {
		size += 4 * int(m.Rows)
	}
	q, perr := d.join(m, holder, size)
	if perr != nil {
		return perr
	}
	b, err := network.ReadGrowing(r.Stream, nil, size)
	if err != nil {
		d.fail(q, fmt.Errorf("%s's score shares: %w", r.From.Name, err))
		return protocol.Errorf(protocol.CodeBadRequest, "reading the score shares: %v", err)
	}
	vec := int(m.Rows) * d.p.Bits / 8
	d.add(q, holder, &part{msg: m, vec: b[:vec], tags: b[vec:]})
	if holder != int(m.Entry) {
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

// join registers a holder's part and reserves its bytes. A part that
// contradicts the query's others ends the query.
func (d *Decider) join(m *protocol.ReplShare, holder, size int) (*pending, *protocol.Error) {
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
		q = &pending{qid: m.Query, rows: int(m.Rows), entry: int(m.Entry), topK: 1, creator: holder, done: make(chan struct{}), created: time.Now()}
		d.queries[m.Query] = q
	}
	var err error
	switch {
	case q.rows != int(m.Rows):
		err = fmt.Errorf("%d rows where another holder sent %d: the holders' row maps differ", m.Rows, q.rows)
	case q.entry != int(m.Entry):
		err = fmt.Errorf("holders name different entries for one query")
	case q.parts[holder] != nil:
		err = fmt.Errorf("holder %d sent its shares of this query twice", holder)
	case d.bytes+size > maxPendingBytes:
		err = fmt.Errorf("the decider holds %d MB of score shares, its limit; retry shortly", d.bytes>>20)
	}
	if err != nil {
		d.mu.Unlock()
		d.fail(q, err)
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	q.parts[holder] = &part{} // taken
	q.joined++
	q.bytes += size
	d.bytes += size
	if holder == q.entry {
		q.topK = int(m.TopK)
	}
	d.mu.Unlock()
	return q, nil
}

// add stores a part and decides once all three have come.
func (d *Decider) add(q *pending, holder int, pt *part) {
	d.mu.Lock()
	select {
	case <-q.done:
		d.mu.Unlock()
		return
	default:
	}
	q.parts[holder] = pt
	q.got++
	complete := q.got == replicated.Holders
	d.mu.Unlock()
	if !complete {
		return
	}
	res, err := d.decide(q)
	d.drop(q)
	q.finish(res, err)
}

func (d *Decider) fail(q *pending, err error) {
	d.drop(q)
	q.finish(nil, err)
}

func (d *Decider) drop(q *pending) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.queries[q.qid] == q {
		delete(d.queries, q.qid)
		d.bytes -= q.bytes
		q.bytes = 0
	}
}

// disagreements lists the pairs of holders whose parts contradict each
// other: share j's full vector (from holder j) against its digest (from
// holder j-1), and the tags (from the entry's predecessor) against their
// digest (from the entry's successor).
func (d *Decider) disagreements(q *pending) []string {
	var pairs []string
	for j := range replicated.Holders {
		h := replicated.HoldersOf(j)
		if replicated.VectorDigest(q.qid, j, d.p.Bits, q.parts[h[0]].vec) != q.parts[h[1]].msg.Digest {
			pairs = append(pairs, pairLabel(d.p, h[0], h[1]))
		}
	}
	tagger, digester := entryRoles(q.entry)
	if replicated.TagsDigest(q.qid, q.parts[tagger].tags) != q.parts[digester].msg.TagDigest {
		pairs = append(pairs, pairLabel(d.p, tagger, digester))
	}
	return pairs
}

// decide checks the parts, then adds the vectors and finds the best
// positions, each with the value and tag of the vector the entry lacks.
func (d *Decider) decide(q *pending) (*protocol.ReplResult, error) {
	if pairs := d.disagreements(q); len(pairs) > 0 {
		for _, p := range pairs {
			d.refused.WithLabelValues(p).Inc()
		}
		d.env.Log.Warn("holders disagree on a query's score shares; refused", "pairs", strings.Join(pairs, ","))
		return nil, protocol.Errorf(protocol.CodeInconsistent, "the share holders disagree on this query's score shares (%s); the query is refused, nothing was answered. One of each pair is faulty or compromised: check them", strings.Join(pairs, ", "))
	}
	thr := d.p.Threshold()
	reveal := d.p.RevealScores()
	if reveal {
		thr = -1 << 30 // every live row; the entry judges the threshold
	}
	var matches []sharing.Match
	var err error
	switch d.p.Bits {
	case 8:
		matches, err = decideVecs[uint8](q, thr)
	default:
		matches, err = decideVecs[uint16](q, thr)
	}
	if err != nil {
		return nil, err
	}
	res := &protocol.ReplResult{}
	tagger, _ := entryRoles(q.entry)
	lacking, tags := q.parts[tagger].vec, q.parts[tagger].tags
	for _, mt := range matches {
		res.Positions = append(res.Positions, uint32(mt.Row))
		v := uint16(lacking[mt.Row])
		if d.p.Bits == 16 {
			v = binary.LittleEndian.Uint16(lacking[2*mt.Row:])
		}
		res.Values = append(res.Values, v)
		res.Tags = append(res.Tags, binary.LittleEndian.Uint32(tags[4*mt.Row:]))
		if reveal {
			res.Scores = append(res.Scores, int32(mt.Score))
		}
	}
	return res, nil
}

func decideVecs[E additive.Elem](q *pending, thr int) ([]sharing.Match, error) {
	var vecs [replicated.Holders][]E
	for k, p := range q.parts {
		vecs[k] = additive.ViewElems[E](p.vec)
	}
	return additive.Decide(q.topK, thr, 0, vecs[:]...)
}
