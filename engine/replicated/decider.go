package replicated

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blind"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Decider is the decider of a replicated cluster: per query it receives
// one message from each holder, checks every share's full vector against
// the other holder's digest (and the tags against theirs), then adds the
// three vectors and answers the entry with the best permuted positions,
// each with the value and tag the entry checks.
type Decider struct {
	env     engine.Env
	p       *Params
	queries *blind.Table[*part, *protocol.ReplResult]
	refused *prometheus.CounterVec
}

// part is one holder's contribution to a query.
type part struct {
	msg  *protocol.ReplShare
	vec  []byte // pi(c_i) + m_i
	tags []byte // the tags of vec, from the entry's predecessor only
}

// pending is one query's three parts.
type pending = blind.Pending[*part, *protocol.ReplResult]

// NewDecider makes the decider's engine.
func NewDecider(env engine.Env) (*Decider, error) {
	p, err := NewParams(env.Params)
	if err != nil {
		return nil, err
	}
	if p.DeciderName() != env.Self {
		return nil, fmt.Errorf("replicated: %q is not the decider of this cluster", env.Self)
	}
	d := &Decider{env: env, p: p, queries: blind.NewTable[*part, *protocol.ReplResult](replicated.Holders, p.Timeouts().DeciderWait, func(k int) string { return p.Party(k).Name })}
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
func (d *Decider) Run(ctx context.Context) { d.queries.Run(ctx) }

// Stats: the decider keeps no rows.
func (d *Decider) Stats() engine.Stats { return engine.Stats{} }

func (d *Decider) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: d.env.Self, Mode: string(Mode)}
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
	if perr := blind.CheckShare(d.p.Params, int(m.Bits), int(m.TopK), m.Rows); perr != nil {
		return perr
	}
	if m.Tags != (holder == tagger) {
		return protocol.Errorf(protocol.CodeBadRequest, "tags from %s, whose entry is holder %d", r.From.Name, m.Entry)
	}
	size := int(m.Rows) * d.p.Bits / 8
	if m.Tags {
		size += 4 * int(m.Rows)
	}
	q, perr := d.queries.Join(m.Query, int(m.Rows), holder, size, int(m.Entry), int(m.TopK))
	if perr != nil {
		return perr
	}
	b, err := network.ReadGrowing(r.Stream, nil, size)
	if err != nil {
		d.queries.Fail(q, fmt.Errorf("%s's score shares: %w", r.From.Name, err))
		return protocol.Errorf(protocol.CodeBadRequest, "reading the score shares: %v", err)
	}
	vec := int(m.Rows) * d.p.Bits / 8
	if d.queries.Add(q, holder, &part{msg: m, vec: b[:vec], tags: b[vec:]}) {
		res, err := d.decide(q)
		d.queries.Finish(q, res, err)
	}
	if holder != int(m.Entry) {
		return &protocol.DecideShareOK{}
	}
	res, perr := d.queries.Wait(ctx, q)
	if perr != nil {
		return perr
	}
	return res
}

// disagreements lists the pairs of holders whose parts contradict each
// other: share j's full vector (from holder j) against its digest (from
// holder j-1), and the tags (from the entry's predecessor) against their
// digest (from the entry's successor).
func (d *Decider) disagreements(q *pending) []string {
	var pairs []string
	for j := range replicated.Holders {
		h := replicated.HoldersOf(j)
		if replicated.VectorDigest(q.ID, j, d.p.Bits, q.Parts[h[0]].vec) != q.Parts[h[1]].msg.Digest {
			pairs = append(pairs, pairLabel(d.p, h[0], h[1]))
		}
	}
	tagger, digester := entryRoles(q.Entry)
	if replicated.TagsDigest(q.ID, q.Parts[tagger].tags) != q.Parts[digester].msg.TagDigest {
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
	tagger, _ := entryRoles(q.Entry)
	lacking, tags := q.Parts[tagger].vec, q.Parts[tagger].tags
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
	for k, p := range q.Parts {
		vecs[k] = additive.ViewElems[E](p.vec)
	}
	return additive.Decide(q.TopK, thr, 0, vecs[:]...)
}
