package replicated

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Decider is the decider of a replicated cluster: per query it receives
// one message from each holder, checks every share's full vector against
// the other holder's digest, then adds the three vectors and answers the
// entry with the best permuted positions, each with the value the entry
// checks and its tag, which it fetches from the two helpers that keep
// them (tagfetch.go).
type Decider struct {
	env engine.Env
	p   *Params
	blindbase.Decider[*part, *protocol.ReplResult]
	refused *prometheus.CounterVec
	gate    *gate              // degraded queries: served only for an outage this decider sees too
	stats   *engine.ScoreStats // best scores, shown per window of queries
	bufs    engine.Buffers     // the parts' buffers, lent again once decided
}

// part is one holder's contribution to a query.
type part struct {
	msg  *protocol.ReplShare
	own  []byte // pi(c_i) + m_i
	next []byte // pi(c_(i+1)) + m_(i+1), in a degraded query when its other holder is down
	tags []byte // the tags of the vector of the share the entry lacks, in a degraded research query only (plan.sendsTags)
	// check is a hidden probe's holder's parts of the checks of its two
	// neighbours' products, and the digest of its predecessor's vector
	// (checked.go).
	check []byte
	buf   []byte // what own, next, tags and check are read into
}

// pending is one query's three parts.
type pending = merge.Pending[*part, *protocol.ReplResult]

// NewDecider makes the decider's engine.
func NewDecider(env engine.Env) (*Decider, error) {
	p, err := NewParams(env.Params)
	if err != nil {
		return nil, err
	}
	if p.DeciderName() != env.Self {
		return nil, fmt.Errorf("replicated: %q is not the decider of this cluster", env.Self)
	}
	d := &Decider{env: env, p: p, Decider: blindbase.NewDecider(env.Self, string(config.ModeReplicated), merge.NewTable[*part, *protocol.ReplResult](replicated.Holders, p.Timeouts().DeciderWait, func(k int) string { return p.Party(k).Name }))}
	d.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_refusals_total",
		Help: "Queries the decider refused because two holders of a share disagree (label: the pair), or a hidden probe's product check failed (label: the holder checked; it or one of its two checkers deviated)."}, []string{"pair"})
	d.gate = newGate(env, p)
	d.stats = engine.NewScoreStats(p.Params, env.Metrics)
	for _, c := range append(d.gate.collectors(), d.refused) {
		env.Metrics.MustRegister(c)
	}
	return d, nil
}

// Routes: only share holders send shares.
func (d *Decider) Routes() map[protocol.Type]engine.Route {
	r := d.ShareRoutes(protocol.TReplShare, d.share)
	d.gate.showInHealth(r)
	return r
}

// share takes one holder's part: the entry's request waits for the
// answer, a helper's is acknowledged once read.
func (d *Decider) share(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.ReplShare)
	holder := d.p.PartyIndex(r.From.Name)
	if holder < 0 {
		return protocol.Errorf(protocol.CodeForbidden, "only share holders send score shares")
	}
	pl := planOf(int(m.Entry), m.Down)
	if perr := blindbase.CheckShare(d.p.Params, int(m.Bits), int(m.TopK), m.Rows); perr != nil {
		return perr
	}
	held := replicated.Held(holder)
	switch {
	case m.Hidden != d.p.HideProbes():
		return protocol.Errorf(protocol.CodeBadRequest, "%s sent shares of a hidden-probe query %v to a cluster whose hide_probes is %v", r.From.Name, m.Hidden, d.p.HideProbes())
	case m.Hidden:
	case pl.down == holder:
		return protocol.Errorf(protocol.CodeBadRequest, "%s sent shares of a query that names it down", r.From.Name)
	case m.Next != (pl.full(held[1]) == holder):
		return protocol.Errorf(protocol.CodeBadRequest, "%s's next vector in full is %v, for a query of entry %d with down %d", r.From.Name, m.Next, m.Entry, m.Down)
	case m.Tags != pl.sendsTags(d.p, holder):
		return protocol.Errorf(protocol.CodeBadRequest, "tags %v from %s, whose entry is holder %d (down %d)", m.Tags, r.From.Name, m.Entry, m.Down)
	}
	// The entry's claim that a holder is down is checked here, by this
	// decider's own contact, as each helper checks it; a query completes
	// only with the entry's part.
	if !m.Hidden && pl.down != noneDown && holder == int(m.Entry) {
		if perr := d.gate.admit(ctx, holder, pl.down, nil); perr != nil {
			return perr
		}
	}
	checks := checkBlobSize(d.p.Dim(), d.p.Bits)
	size := m.TailSize(checks)
	q, perr := d.Queries.Join(m.Query, int(m.Rows), holder, size, int(m.Entry), int(m.TopK), pl.parts())
	if perr != nil {
		return perr
	}
	b, err := network.ReadGrowing(r.Stream, d.bufs.Get(size), size)
	if err != nil {
		d.Queries.Fail(q, fmt.Errorf("%s's score shares: %w", r.From.Name, err))
		return protocol.Errorf(protocol.CodeBadRequest, "reading the score shares: %v", err)
	}
	t, err := m.SplitTail(b, checks)
	if err != nil { // ReadGrowing read size bytes: never
		d.Queries.Fail(q, err)
		return protocol.Errorf(protocol.CodeInternal, "the score shares: %v", err)
	}
	pt := &part{msg: m, own: t.Own, next: t.Next, tags: t.Tags, check: t.Check, buf: b}
	if d.Queries.Add(q, holder, pt) {
		res, err := d.decide(ctx, q)
		d.Queries.Finish(q, res, err)
		for _, pt := range q.Parts { // the answer holds none of them
			if pt != nil {
				d.bufs.Put(pt.buf)
			}
		}
	}
	if holder != int(m.Entry) {
		return &protocol.DecideShareOK{}
	}
	res, perr := d.Queries.Wait(ctx, q)
	if perr != nil {
		return perr
	}
	return res
}

// vectors collects a complete query's three full share-score vectors by
// its plan, after checking that every part follows the same plan.
func (d *Decider) vectors(q *pending) (plan, [replicated.Holders][]byte, error) {
	var full [replicated.Holders][]byte
	if q.Entry < 0 || q.Entry >= replicated.Holders || q.Parts[q.Entry] == nil {
		return plan{}, full, protocol.Errorf(protocol.CodeInconsistent, "a query without its entry's part; refused")
	}
	pl := planOf(q.Entry, q.Parts[q.Entry].msg.Down)
	for k, pt := range q.Parts {
		if (pt == nil) != (k == pl.down) || pt != nil && pt.msg.Down != q.Parts[q.Entry].msg.Down {
			return pl, full, protocol.Errorf(protocol.CodeInconsistent, "the share holders' parts name different holders down; the query is refused")
		}
	}
	for j := range full {
		if f := pl.full(j); f == j {
			full[j] = q.Parts[f].own
		} else {
			full[j] = q.Parts[f].next
		}
	}
	return pl, full, nil
}

// disagreements lists the pairs of holders whose parts contradict each
// other: share j's full vector against its digest from its other holder,
// where both are up.
func (d *Decider) disagreements(q *pending, pl plan, full [replicated.Holders][]byte) []string {
	var pairs []string
	for j := range replicated.Holders {
		g := pl.digest(j)
		if g >= 0 && replicated.VectorDigest(q.ID, j, d.p.Bits, full[j]) != q.Parts[g].msg.Digest {
			pairs = append(pairs, pairLabel(d.p, pl.full(j), g))
		}
	}
	return pairs
}

// decide checks the parts, then adds the vectors and finds the best
// positions, each with the value and tag of the vector the entry lacks.
func (d *Decider) decide(ctx context.Context, q *pending) (*protocol.ReplResult, error) {
	if q.Entry >= 0 && q.Entry < replicated.Holders && q.Parts[q.Entry] != nil && q.Parts[q.Entry].msg.Hidden {
		return d.decideHidden(ctx, q)
	}
	pl, full, err := d.vectors(q)
	if err != nil {
		return nil, err
	}
	if pairs := d.disagreements(q, pl, full); len(pairs) > 0 {
		for _, p := range pairs {
			d.refused.WithLabelValues(p).Inc()
		}
		d.env.Log.Warn("holders disagree on a query's score shares; refused", "pairs", strings.Join(pairs, ","))
		return nil, protocol.Errorf(protocol.CodeInconsistent, "the share holders disagree on this query's score shares (%s); the query is refused, nothing was answered. One of each pair is faulty or compromised: check them", strings.Join(pairs, ", "))
	}
	if pl.bestOnly(d.p) {
		return d.result(ctx, q, full, true, lackingVec{})
	}
	l := lackingVec{vec: full[pl.lacking()], fetch: pl.down == noneDown, keepers: pl.tagHolders()}
	if !l.fetch {
		l.tags = q.Parts[pl.tagger()].tags
	}
	res, err := d.result(ctx, q, full, false, l)
	if err == nil && pl.down == noneDown {
		d.gate.checked() // every part in, checked and answered: counts toward the degraded limit
	}
	return res, err
}

// lackingVec is the vector the entry checks by tag, and its tags: fetched
// from the two helpers that keep them (keepers), or as a holder sent them
// (a degraded research query).
type lackingVec struct {
	vec, tags []byte
	fetch     bool
	keepers   [2]int
	refused   bool // a hidden probe whose checks failed: its scores are not observed
	empty     bool // and the entry's own product among them: answered as a probe that matched nobody, after the same work
}

// result adds the three vectors, finds the best positions and answers
// each with the value and tag of the vector the entry checks by tag
// (lacking; none when best). A decider
// shard keeps the positions that make the answer merged over every
// shard (merge.MergeRanks); the entry's coordinator orders them by the
// scores its shards check.
//
// best (plan.bestOnly: a degraded query in a cluster that hides scores)
// answers the best row only, if it reaches the threshold (in a shard: if
// it is the best over every shard), with zero values and tags. With a
// holder down the entry sent one vector nobody checks, and knows the
// permutation: had it added to the scores of rows it chose, a value
// there (or a score) would show it those rows' exact scores, and a list
// of rows would show it which of them its additions raised above the
// threshold. The answer is then the decision alone, which the entry
// cannot check either (docs/REPLICATED-NOTES.md "Degraded service").
func (d *Decider) result(ctx context.Context, q *pending, full [replicated.Holders][]byte, best bool, lacking lackingVec) (*protocol.ReplResult, error) {
	topK := q.TopK
	if best && !d.env.Sharded() {
		topK = 1 // a shard ranks the query's top K with the other shards, which may be checked
	}
	thr := d.p.Threshold()
	reveal := d.p.RevealScores()
	if reveal {
		thr = -1 << 30 // every live row; the entry judges the threshold
	}
	var matches []sharing.Match
	var top int
	var live bool
	var err error
	switch d.p.Bits {
	case 8:
		matches, top, live, err = decideVecs[uint8](topK, thr, full)
	default:
		matches, top, live, err = decideVecs[uint16](topK, thr, full)
	}
	if err != nil {
		return nil, err
	}
	if lacking.empty {
		matches = nil
	}
	if lacking.refused {
		live = false
	}
	if live { // the best live score, from the same pass as the decision
		d.stats.Observe(top)
	}
	if d.env.Sharded() {
		scores := make([]int32, len(matches))
		for i, mt := range matches {
			scores[i] = int32(mt.Score)
		}
		ranks, err := merge.MergeRanks(ctx, d.env, q.ID, topK, scores)
		if err != nil {
			return nil, err
		}
		kept := matches[:0]
		for i, r := range ranks {
			if r != protocol.NoRank && (!best || r == 0) {
				kept = append(kept, matches[i])
			}
		}
		matches = kept
	}
	res := &protocol.ReplResult{}
	positions := make([]int, len(matches))
	for i, mt := range matches {
		positions[i] = mt.Row
		res.Positions = append(res.Positions, uint32(mt.Row))
		if best {
			res.Values, res.Tags = append(res.Values, 0), append(res.Tags, 0) // the wire has them with every position
			continue
		}
		res.Values = append(res.Values, protocol.VectorAt(lacking.vec, d.p.Bits, mt.Row))
		if !lacking.fetch {
			res.Tags = append(res.Tags, protocol.TagAt(lacking.tags, mt.Row))
		}
		if reveal {
			res.Scores = append(res.Scores, int32(mt.Score))
		}
	}
	if !best && lacking.fetch {
		rows := len(lacking.vec) * 8 / d.p.Bits
		res.Tags, res.Fetched, err = d.fetchTags(ctx, q.ID, rows, topK, positions, lacking.keepers)
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// RefusedHidden is what a device is told of a hidden probe whose checks
// failed, whichever failed (its client opens the decider's verdict).
const RefusedHidden = protocol.RefusedHidden

// decideHidden checks a hidden-probe query's parts (each holder's query
// shares and verdict key components against the other holder of each, and
// each holder's product share), adds the three product shares and answers
// with the values and tags of helper entry+1's vector, which both helpers
// keep (entry+2 got it to check); the entry checks entry+2's vector with
// its own copy, got to check it too. The verdict, answered or refused, is
// sealed to the device.
func (d *Decider) decideHidden(ctx context.Context, q *pending) (*protocol.ReplResult, error) {
	var full [replicated.Holders][]byte
	for k, pt := range q.Parts {
		if pt == nil || !pt.msg.Hidden {
			return nil, protocol.Errorf(protocol.CodeInconsistent, "a hidden-probe query whose parts are not all hidden-probe parts; refused")
		}
		full[k] = pt.own
		// Every holder sends the top-k the device signed: an entry
		// cannot ask for more answers than the device did.
		if int(pt.msg.TopK) != q.TopK {
			return nil, protocol.Errorf(protocol.CodeInconsistent, "the entry asked for the top %d of a hidden probe whose device signed for %d; refused", q.TopK, pt.msg.TopK)
		}
	}
	a, b := (q.Entry+1)%replicated.Holders, (q.Entry+2)%replicated.Holders
	var pairs []string
	var comps [replicated.Holders][protocol.VerdictKeySize]byte
	for k := range replicated.Holders {
		next := (k + 1) % replicated.Holders // holds share k+1 and component k+1 as its own
		mk, mn := q.Parts[k].msg, q.Parts[next].msg
		// The same sigma at all three (else an entry that gave its
		// helpers different ones could pass its own shifted product:
		// review of 152aec2).
		if mk.QueryDigests[1] != mn.QueryDigests[0] || mk.VerdictKeys[1] != mn.VerdictKeys[0] || mk.SigmaDigest != mn.SigmaDigest {
			pairs = append(pairs, pairLabel(d.p, k, next))
		}
		comps[k] = mk.VerdictKeys[0]
	}
	var failed []string
	entryFailed := len(pairs) > 0
	if len(pairs) == 0 {
		var holders []int
		failed, holders = d.checkProducts(q, full)
		entryFailed = slices.Contains(holders, q.Entry)
	}
	refused := len(pairs) > 0 || len(failed) > 0
	if refused {
		// One verdict, whichever check failed, and one the entry does not
		// see (issue 44 item 3): the device gets the refusal, sealed under
		// its key, and the entry and the helpers, two of them checkers of
		// each holder, what they would get had every check passed. Where
		// only a helper's product failed its check (that helper shifted
		// it, and the entry is honest; or a checker biased its check, and
		// every vector is honest), the entry gets the decision on the
		// vectors as they are, the same answer as with its check passed, so
		// a checker at the entry reads nothing from biasing its checks of
		// the helpers. Where the entry's own product failed (it shifted
		// it, to aim at rows; or a helper biased its check of it, and the
		// entry is honest), the entry gets what a probe that matched nobody
		// gets: no decision on a vector it may have aimed. The helpers see
		// no answer, and the same fetch of tags either way. The operator
		// learns which check failed from the log and
		// idface_repl_refusals_total.
		if len(pairs) > 0 {
			for _, p := range pairs {
				d.refused.WithLabelValues(p).Inc()
			}
			d.env.Log.Warn("holders scored a hidden probe with different query shares, verdict keys or sigmas; refused", "pairs", strings.Join(pairs, ","))
		}
		for _, f := range failed {
			d.refused.WithLabelValues(strings.Fields(f)[0]).Inc() // the holder
		}
		if len(failed) > 0 {
			d.env.Log.Warn("a holder's product share of a hidden probe failed its check; refused", "holders", strings.Join(failed, ","))
		}
	}
	res, err := d.result(ctx, q, full, false, lackingVec{vec: full[a], fetch: true, keepers: [2]int{a, b}, refused: refused, empty: entryFailed})
	if err != nil {
		return nil, err
	}
	res.Verdict = protocol.SealVerdict(protocol.VerdictKey(d.p.ClusterID(), comps), max(d.env.Shard, 0), refused)
	return res, nil
}

func decideVecs[E additive.Elem](topK, thr int, full [replicated.Holders][]byte) ([]sharing.Match, int, bool, error) {
	var vecs [replicated.Holders][]E
	for j, v := range full {
		vecs[j] = additive.ViewElems[E](v)
	}
	return additive.DecideBest(topK, thr, 0, vecs[:]...)
}

// checkProducts checks every holder's product share of a hidden probe
// (checked.go): holder i's vector against the digest its successor
// checked, and the two verifiers' parts, which give 0 in every round only
// if holder i computed its share honestly. It names each holder whose
// check failed, with its verifiers, and gives their indices.
func (d *Decider) checkProducts(q *pending, full [replicated.Holders][]byte) (failed []string, holders []int) {
	dim := d.p.Dim()
	part := replicated.CheckPartSize(dim)
	for i := range replicated.Holders {
		lo, _, _, err1 := protocol.SplitReplChecks(q.Parts[(i+2)%replicated.Holders].check, part, d.p.Bits)
		_, hi, hg, err2 := protocol.SplitReplChecks(q.Parts[(i+1)%replicated.Holders].check, part, d.p.Bits)
		g := replicated.VectorDigest(q.ID, i, d.p.Bits, full[i])
		ok := err1 == nil && err2 == nil && string(hg) == string(g[:])
		if ok {
			switch d.p.Bits {
			case 8:
				ok = replicated.CheckDelta(additive.ViewElems[uint8](lo), additive.ViewElems[uint8](hi), dim)
			case 16:
				ok = replicated.CheckDelta(additive.ViewElems[uint16](lo), additive.ViewElems[uint16](hi), dim)
			}
		}
		if !ok {
			failed = append(failed, fmt.Sprintf("%s (checked by %s and %s)", d.p.Party(i).Name, d.p.Party((i+2)%replicated.Holders).Name, d.p.Party((i+1)%replicated.Holders).Name))
			holders = append(holders, i)
		}
	}
	return failed, holders
}
