package blind

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Sharded blind mode (config: Literal.Shards = S > 1; docs/DESIGN-NOTES.md
// "Shards"). Each holder and the decider run as a coordinator and S shard
// servers; shard s of every member is an unsharded blind cluster over the
// rows rowmap.ShardOf puts in shard s. An identify comes to a holder's
// coordinator, which draws the query id and asks each of its shards to
// run the query over its rows (ShardIdentify); every decider shard finds
// its shard's best rows, reports their scores to the decider's coordinator
// (DecideMerge) and learns their ranks in the merged answer, which it
// passes to its entry shard with the positions; the holder's coordinator
// orders the shards' ids by rank. Nobody learns more than unsharded: the
// decider's coordinator sees scores the one decider would, the entry the
// answer, in order.

// Coordinator is a sharded holder's coordinator: it holds no rows. It
// forwards an enrollment or a deletion to the shard of its ids and runs
// an identify over every shard.
type Coordinator struct {
	env engine.Env
	p   *config.Params
}

// NewCoordinator makes holder env.Self's coordinator.
func NewCoordinator(env engine.Env) *Coordinator { return &Coordinator{env: env, p: env.Params} }

// Routes: what a holder answers its clients; the rest is its shards'.
func (c *Coordinator) Routes() map[protocol.Type]engine.Route {
	share := c.p.Dim() * Ring(c.p).Bits / 8
	return map[protocol.Type]engine.Route{
		protocol.THealth:       {Op: "health", From: engine.Anyone, Handle: c.health, Max: engine.Small},
		protocol.TIdentify:     {Op: "identify", From: engine.Clients, Handle: c.identify, Max: engine.IdentifyBound(c.p), Long: true},
		protocol.TSealedEnroll: {Op: "enroll", From: engine.Operators, Handle: c.forward, Max: engine.SealedEnrollBound(c.p, share), Long: true},
		protocol.TDelete:       {Op: "delete", From: engine.Operators, Handle: c.forward, Max: engine.Small},
	}
}

// Run: a coordinator has no background work.
func (c *Coordinator) Run(context.Context) {}

// Stats: a coordinator keeps no rows.
func (c *Coordinator) Stats() engine.Stats { return engine.Stats{} }

func (c *Coordinator) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: c.env.Self, Mode: "blind-coord"}
}

// shardErr names the shard that failed a request.
func shardErr(self string, s, shards int, err error) *protocol.Error {
	e := engine.AsError(err, protocol.CodeUnavailable)
	return protocol.Errorf(e.Code, "%s (shard %d of %d): %s", config.ShardName(self, s), s, shards, e.Msg)
}

// forward sends an enrollment or a deletion, as the operator signed it, to
// the shard that holds its ids; a batch of ids of several shards is
// refused (the client splits batches by shard: an operator's signature
// covers exactly the ids of one request).
func (c *Coordinator) forward(ctx context.Context, r engine.Request) protocol.Msg {
	var ids []string
	switch m := r.Msg.(type) {
	case *protocol.SealedEnroll:
		ids = m.IDs
	case *protocol.Delete:
		ids = []string{m.ID}
	}
	if len(ids) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "an enrollment of no ids")
	}
	s := c.p.ShardOf(ids[0])
	for _, id := range ids[1:] {
		if c.p.ShardOf(id) != s {
			return protocol.Errorf(protocol.CodeBadRequest, "ids %q and %q are in shards %d and %d: a request goes to one shard (the client splits batches by shard)", ids[0], id, s, c.p.ShardOf(id))
		}
	}
	resp, err := rpc.Call(ctx, c.env.Net, config.ShardName(c.env.Self, s), r.Msg)
	if err != nil {
		return shardErr(c.env.Self, s, c.p.Shards(), err)
	}
	return resp
}

// identify runs the query over every shard under one query id and merges
// the shards' answers by rank. A shard that fails fails the query, naming
// it: its rows may hold the answer.
func (c *Coordinator) identify(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Identify)
	if perr := engine.CheckTopK(c.p, int(m.TopK)); perr != nil {
		return perr
	}
	if len(m.Template) != c.p.Dim() {
		return protocol.Errorf(protocol.CodeBadRequest, "a template of dimension %d; this cluster's is %d", len(m.Template), c.p.Dim())
	}
	req := &protocol.ShardIdentify{TopK: m.TopK, Template: m.Template}
	if _, err := c.env.RandReader().Read(req.Query[:]); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	S := c.p.Shards()
	answers := make([]*protocol.ShardAnswer, S)
	t0 := time.Now()
	var once sync.Once
	var cause *protocol.Error
	var wg sync.WaitGroup
	for s := range S {
		wg.Go(func() {
			resp, _, err := Ask(ctx, c.env.Net, config.ShardName(c.env.Self, s), req) // stops waiting when another shard fails
			if err == nil {
				a, ok := resp.(*protocol.ShardAnswer)
				if !ok {
					err = fmt.Errorf("answered %v", resp.Type())
				}
				answers[s] = a
			}
			if err != nil {
				once.Do(func() {
					cause = shardErr(c.env.Self, s, S, err)
					cancel()
					c.env.Log.Warn("a shard failed an identify", "shard", s, "after", time.Since(t0), "err", err)
				})
			}
		})
	}
	wg.Wait()
	if cause != nil {
		return cause
	}
	return c.merge(answers, int(m.TopK))
}

// ranked is one shard's candidate in the merged answer.
type ranked struct {
	rank  int
	id    string
	score int
}

// merge orders the shards' candidates by their ranks in the answer.
func (c *Coordinator) merge(answers []*protocol.ShardAnswer, topK int) protocol.Msg {
	reveal := c.p.RevealScores()
	var all []ranked
	var total uint64
	for s, a := range answers {
		total += a.Bytes
		if len(a.Ranks) != len(a.IDs) || reveal != (len(a.Scores) == len(a.IDs)) && len(a.IDs) > 0 {
			return protocol.Errorf(protocol.CodeInternal, "shard %d answered %d ids, %d ranks and %d scores", s, len(a.IDs), len(a.Ranks), len(a.Scores))
		}
		for i, id := range a.IDs {
			if a.Ranks[i] == protocol.NoRank {
				continue
			}
			rk := ranked{rank: int(a.Ranks[i]), id: id}
			if reveal {
				rk.score = int(a.Scores[i])
			}
			all = append(all, rk)
		}
	}
	slices.SortFunc(all, func(a, b ranked) int { return cmp.Compare(a.rank, b.rank) })
	ans := engine.NewAnswer(c.p, topK)
	ans.Bytes(0, 0, total)
	for i, rk := range all {
		if i > 0 && all[i-1].rank == rk.rank {
			return protocol.Errorf(protocol.CodeInternal, "two shards' candidates have rank %d", rk.rank)
		}
		if reveal {
			ans.Scored(rk.id, rk.score)
		} else {
			ans.Passed(rk.id)
		}
	}
	return ans.Done()
}

// Merger is the decider's coordinator: it merges the decider shards' best
// scores of each query into the answer's ranks. It sees scores the
// decider of an unsharded cluster sees, fewer of them.
type Merger struct {
	env     engine.Env
	p       *config.Params
	queries *Table[*protocol.DecideMerge, [][]uint16]
}

// NewMerger makes the decider's coordinator.
func NewMerger(env engine.Env) *Merger {
	p := env.Params
	return &Merger{env: env, p: p, queries: NewTable[*protocol.DecideMerge, [][]uint16](p.Shards(), p.Timeouts().DeciderWait,
		func(s int) string { return config.ShardName(p.DeciderName(), s) })}
}

// Routes: only the decider's own shards merge.
func (g *Merger) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:      {Op: "health", From: engine.Anyone, Handle: g.health, Max: engine.Small},
		protocol.TDecideMerge: {Op: "merge", From: engine.Allow(network.RoleHelper), Handle: g.merge, Max: engine.Small, Long: true},
	}
}

// Run drops the queries whose other shards never reported.
func (g *Merger) Run(ctx context.Context) { g.queries.Run(ctx) }

// Stats: the merger keeps no rows.
func (g *Merger) Stats() engine.Stats { return engine.Stats{} }

func (g *Merger) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: g.env.Self, Mode: "blind-merger"}
}

// merge takes one decider shard's scores and answers, once every shard's
// are in, their ranks.
func (g *Merger) merge(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.DecideMerge)
	if r.From.Name != g.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only the decider's own shards merge their answers")
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
			return protocol.Errorf(perr.Code, "the decider's %s did not report in time: the query failed or is slow there", missing)
		}
		return perr
	}
	return &protocol.DecideMergeOK{Ranks: ranks[s]}
}

// missing names the decider shards whose scores of q have not come.
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
