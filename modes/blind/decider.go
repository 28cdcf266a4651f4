package blind

import (
	"context"
	"fmt"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
)

// Decider is the decider K: it holds no share; per query it receives one
// permuted, masked score-share vector from every holder, adds them and
// answers the entry with the permuted positions of the best rows whose
// score reaches the threshold. It sees each query's scores in random
// order and nothing else: no id, no row, no template, no other query.
type Decider struct {
	env   engine.Env
	p     *config.Params
	stats *engine.ScoreStats // best scores, shown per window of queries
	blindbase.Decider[[]byte, *protocol.DecideResult]
	bufs engine.Buffers // the vectors' buffers, lent again once decided
}

// NewDecider makes the decider's engine.
func NewDecider(env engine.Env) (*Decider, error) {
	if env.Params.DeciderName() != env.Self {
		return nil, fmt.Errorf("blind: %q is not the decider of this cluster", env.Self)
	}
	p := env.Params
	return &Decider{env: env, p: p, stats: engine.NewScoreStats(p, env.Metrics),
		Decider: blindbase.NewDecider(env.Self, "blind-decider", merge.NewTable[[]byte, *protocol.DecideResult](p.Mu(), p.Timeouts().DeciderWait, func(k int) string { return p.Party(k).Name }))}, nil
}

// Routes: only share holders send shares.
func (d *Decider) Routes() map[protocol.Type]engine.Route {
	return d.ShareRoutes(protocol.TDecideShare, d.share)
}

// share takes one holder's vector; the entry's request waits for the
// answer, a helper's is acknowledged at once.
func (d *Decider) share(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.DecideShare)
	holder := d.p.PartyIndex(r.From.Name)
	if holder < 0 {
		return protocol.Errorf(protocol.CodeForbidden, "only share holders send score shares")
	}
	if perr := blindbase.CheckShare(d.p, int(m.Bits), int(m.TopK), m.Rows); perr != nil {
		return perr
	}
	entry := -1
	if m.Entry {
		entry = holder
	}
	size := m.TailSize()
	q, perr := d.Queries.Join(m.Query, int(m.Rows), holder, size, entry, int(m.TopK), 0)
	if perr != nil {
		return perr
	}
	vec, err := network.ReadGrowing(r.Stream, d.bufs.Get(size), size)
	if err != nil {
		d.Queries.Fail(q, fmt.Errorf("%s's score shares: %w", r.From.Name, err))
		return protocol.Errorf(protocol.CodeBadRequest, "reading the score shares: %v", err)
	}
	if d.Queries.Add(q, holder, vec) {
		res, err := d.decide(ctx, q)
		d.Queries.Finish(q, res, err)
		for _, v := range q.Parts { // the answer holds none of them
			d.bufs.Put(v)
		}
	}
	if !m.Entry {
		return &protocol.DecideShareOK{}
	}
	res, perr := d.Queries.Wait(ctx, q)
	if perr != nil {
		return perr
	}
	return res
}

// decide adds the vectors and finds the best positions: those reaching the
// threshold, or in a research cluster the best whatever their scores.
func (d *Decider) decide(ctx context.Context, q *merge.Pending[[]byte, *protocol.DecideResult]) (*protocol.DecideResult, error) {
	thr := d.p.Threshold()
	reveal := d.p.RevealScores()
	if reveal {
		thr = -1 << 30 // every live row; the entry judges the threshold
	}
	var matches []sharing.Match
	var best int
	var live bool
	var err error
	switch d.p.Ring().Bits {
	case 8:
		matches, best, live, err = decideVecs[uint8](q, thr)
	default:
		matches, best, live, err = decideVecs[uint16](q, thr)
	}
	if err != nil {
		return nil, err
	}
	if live {
		d.stats.Observe(best)
	}
	res := &protocol.DecideResult{}
	for _, mt := range matches {
		res.Positions = append(res.Positions, uint32(mt.Row))
		if reveal {
			res.Scores = append(res.Scores, int32(mt.Score))
		}
	}
	if d.env.Sharded() {
		return d.merge(ctx, q, res, matches)
	}
	return res, nil
}

// Sharded blind mode (config: Literal.Shards = S > 1; docs/DESIGN-NOTES.md
// "Shards"). Each holder and the decider run as a coordinator and S shard
// servers; shard s of every member is an unsharded blind cluster over the
// rows rowmap.ShardOf puts in shard s. An identify comes to a holder's
// coordinator, which draws the query id and asks each of its shards to
// run the query over its rows (ShardIdentify); every decider shard finds
// its shard's best rows, reports their scores to the decider's coordinator
// (DecideMerge; engine/merge's Merger) and learns their ranks in the
// merged answer, which it passes to its entry shard with the positions;
// the holder's coordinator orders the shards' ids by rank (engine/shard's
// Coordinator, Ranked).
// The decider's coordinator sees scores the one decider would; what the
// decider learns beside (which shard holds a match) is in docs/SECURITY.md
// "Sharded blind mode".

// merge, at a decider shard, keeps the positions that make the merged
// answer, with their ranks (merge.MergeRanks).
func (d *Decider) merge(ctx context.Context, q *merge.Pending[[]byte, *protocol.DecideResult], res *protocol.DecideResult, matches []sharing.Match) (*protocol.DecideResult, error) {
	scores := make([]int32, len(matches))
	for i, mt := range matches {
		scores[i] = int32(mt.Score)
	}
	ranks, err := merge.MergeRanks(ctx, d.env, q.ID, q.TopK, scores)
	if err != nil {
		return nil, err
	}
	out := &protocol.DecideResult{}
	for i, r := range ranks {
		if r == protocol.NoRank {
			continue
		}
		out.Positions = append(out.Positions, res.Positions[i])
		out.Ranks = append(out.Ranks, r)
		if len(res.Scores) > 0 {
			out.Scores = append(out.Scores, res.Scores[i])
		}
	}
	return out, nil
}

// decideVecs decides a query and finds its best live score (false where
// no row lives) in one pass over the vectors.
func decideVecs[E additive.Elem](q *merge.Pending[[]byte, *protocol.DecideResult], thr int) ([]sharing.Match, int, bool, error) {
	vecs := make([][]E, len(q.Parts))
	for k, v := range q.Parts {
		vecs[k] = additive.ViewElems[E](v)
	}
	return additive.DecideBest(q.TopK, thr, 0, vecs...)
}
