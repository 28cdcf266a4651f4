package merge

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Merger is the decider's coordinator (and, in mode he, the key
// server's): it merges the shards' best scores of each query into the
// answer's ranks. It sees scores the decider (key server) of an unsharded
// cluster sees, fewer of them.
type Merger struct {
	env     engine.Env
	p       *config.Params
	queries *Table[*protocol.DecideMerge, [][]uint16]
}

// NewMerger makes the coordinator of member env.Self, the decider or the
// key server.
func NewMerger(env engine.Env) *Merger {
	p := env.Params
	g := &Merger{env: env, p: p, queries: NewTable[*protocol.DecideMerge, [][]uint16](p.Shards(), p.Timeouts().DeciderWait,
		func(s int) string { return config.ShardName(env.Self, s) })}
	g.queries.Owner = env.Self + " (the coordinator that merges its shards' answers)"
	return g
}

// Routes: only the member's own shards merge.
func (g *Merger) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:      {Op: "health", From: engine.Anyone, Handle: g.health, Max: protocol.Small, Query: true},
		protocol.TDecideMerge: {Op: "merge", From: engine.Allow(network.RoleHelper), Handle: g.merge, Max: protocol.Small, Long: true, Query: true},
	}
}

// Run drops the queries whose other shards never reported.
func (g *Merger) Run(ctx context.Context) { g.queries.Run(ctx) }

// Stats: the merger keeps no rows.
func (g *Merger) Stats() engine.Stats { return engine.Stats{} }

func (g *Merger) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: g.env.Self, Mode: "merger"}
}

// merge takes one decider shard's scores and answers, once every shard's
// are in, their ranks.
func (g *Merger) merge(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.DecideMerge)
	if r.From.Name != g.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only %s's own shards merge their answers", g.env.Self)
	}
	s := int(m.Shard)
	if s >= g.p.Shards() {
		return protocol.Errorf(protocol.CodeBadRequest, "shard %d of %d", s, g.p.Shards())
	}
	if perr := engine.CheckTopK(g.p, int(m.TopK)); perr != nil {
		return perr
	}
	if !slices.IsSortedFunc(m.Scores, func(a, b int32) int { return cmp.Compare(b, a) }) {
		return protocol.Errorf(protocol.CodeBadRequest, "a shard's scores not best first")
	}
	entry := -1
	if s == 0 {
		entry = 0 // the query completes when every shard is in; shard 0 stands for the entry
	}
	q, perr := g.queries.Join(m.Query, 0, s, 4*len(m.Scores), entry, int(m.TopK), 0)
	if perr != nil {
		return perr
	}
	if g.queries.Add(q, s, m) {
		ranks, err := mergeRanks(q.Parts)
		g.queries.Finish(q, ranks, err)
	}
	ranks, perr := g.queries.Wait(ctx, q)
	if perr != nil {
		if missing := g.missing(q); missing != "" {
			return protocol.Errorf(perr.Code, "%s's %s did not report in time: the query failed or is slow there", g.env.Self, missing)
		}
		return perr
	}
	return &protocol.DecideMergeOK{Ranks: ranks[s]}
}

// missing names the shards whose scores of q have not come.
func (g *Merger) missing(q *Pending[*protocol.DecideMerge, [][]uint16]) string {
	g.queries.mu.Lock()
	defer g.queries.mu.Unlock()
	var names []string
	for s, ok := range q.arrived {
		if !ok {
			names = append(names, fmt.Sprintf("shard %d", s))
		}
	}
	return strings.Join(names, ", ")
}

// mergeRanks ranks every shard's scores in one list, best first, and
// keeps the top K: ranks[s][i] is the rank of shard s's i-th score, or
// protocol.NoRank. Equal scores of different shards come in random order,
// as equal scores do in one decider's permuted vector (a shard's own
// come in its order).
func mergeRanks(parts []*protocol.DecideMerge) ([][]uint16, error) {
	topK := int(parts[0].TopK)
	type entry struct{ score, shard, i int }
	var all []entry
	ranks := make([][]uint16, len(parts))
	for s, m := range parts {
		if int(m.TopK) != topK {
			return nil, fmt.Errorf("shards disagree on the query's top K (%d, %d)", topK, m.TopK)
		}
		ranks[s] = make([]uint16, len(m.Scores))
		for i, v := range m.Scores {
			ranks[s][i] = protocol.NoRank
			all = append(all, entry{int(v), s, i})
		}
	}
	tie := make([]uint64, len(parts)) // a random order of the shards, for ties
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, err
	}
	r := mrand.New(mrand.NewChaCha8(seed))
	for s := range tie {
		tie[s] = r.Uint64()
	}
	slices.SortStableFunc(all, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(tie[a.shard], tie[b.shard]))
	})
	for rank, e := range all[:min(topK, len(all))] {
		ranks[e.shard][e.i] = uint16(rank)
	}
	return ranks, nil
}

// MergeRanks is a decider shard's step in a sharded query (blind and
// replicated mode; a key server shard's in mode he): it sends the shard's
// best scores (best first) to its member's coordinator (Merger) and returns each one's rank in the
// merged answer, or protocol.NoRank where it is not in it.
func MergeRanks(ctx context.Context, env engine.Env, qid [16]byte, topK int, scores []int32) ([]uint16, error) {
	m := &protocol.DecideMerge{Query: qid, Shard: uint16(env.Shard), TopK: uint16(topK), Scores: scores}
	// Beyond the merger's own wait, so that its refusal, naming the shards
	// that did not report, arrives.
	t := env.Params.Timeouts()
	ctx, cancel := context.WithTimeout(ctx, t.DeciderWait+t.Request/4)
	defer cancel()
	coord := config.CoordinatorName(env.Self)
	resp, err := rpc.Call(ctx, env.Net, coord, m)
	if err != nil {
		return nil, fmt.Errorf("%s (%s's coordinator): %w", coord, env.Self, err)
	}
	ok, isOK := resp.(*protocol.DecideMergeOK)
	if !isOK || len(ok.Ranks) != len(scores) {
		return nil, fmt.Errorf("%s answered the merge with %v", coord, resp.Type())
	}
	return ok.Ranks, nil
}
