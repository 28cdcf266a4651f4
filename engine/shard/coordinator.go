// Package shard is a sharded member's coordinator (config: Literal.Shards
// = S > 1; docs/DESIGN-NOTES.md "Shards"). Each row-holding member runs as
// a coordinator, which holds no rows, and S shard servers; shard s of
// every member is an unsharded cluster of the mode over the rows
// rowmap.ShardOf puts in shard s, whose engines run unchanged (their
// dialer names a peer's same shard). The coordinator forwards an
// enrollment or a deletion to the shard of its ids, and runs an identify
// over every shard under one query id, merging the shards' answers.
//
// How the answers merge is the mode's: in blind mode the decider's shards
// rank their candidates among all shards' (the entry never sees a
// score), so the coordinator orders them by those ranks (Options.Ranked);
// in 2PC/MPC the entry scores every row, so each shard answers with its
// best candidates' scores and the coordinator keeps the best over all
// shards, as the unsharded entry keeps the best over its blocks; in
// replicated mode the decider's shards keep the merged top K and each
// entry shard answers those with the scores it checked, merged by score.
package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// Options is what differs between the modes' coordinators.
type Options struct {
	// Mode names the coordinator in health answers ("blind-coord").
	Mode string
	// Enroll is the mode's enrollment request (Enroll, or SealedEnroll
	// where no server sees a template) and EnrollMax its size bound.
	Enroll    protocol.Type
	EnrollMax int
	// Ranked: a shard's ranks are its candidates' places in the merged
	// answer (a decider ranked them over every shard). Otherwise each
	// shard answers its best candidates with their scores, best first,
	// and the coordinator merges them by score.
	Ranked bool
	// Merged: the helper's shards kept the top K merged over every shard
	// (replicated and HE mode), so all shards' candidates together are at
	// most K; more is refused (a deviating helper).
	Merged bool
	// Bare are refusals a shard may answer that the client gets as they
	// are, without the shard's name (HE's key server refusal, which says
	// only what an unsharded refusal says).
	Bare []string
}

// Coordinator is a sharded member's coordinator: it holds no rows.
type Coordinator struct {
	env engine.Env
	p   *config.Params
	o   Options
}

// New makes member env.Self's coordinator.
func New(env engine.Env, o Options) *Coordinator {
	return &Coordinator{env: env, p: env.Params, o: o}
}

// Routes: what a member answers its clients; the rest is its shards'.
func (c *Coordinator) Routes() map[protocol.Type]engine.Route {
	r := map[protocol.Type]engine.Route{
		protocol.THealth:   {Op: "health", From: engine.Anyone, Handle: c.health, Max: protocol.Small, Query: true},
		protocol.TIdentify: {Op: "identify", From: engine.Clients, Handle: c.identify, Max: engine.IdentifyBound(c.p), Long: true, Query: true},
		c.o.Enroll:         {Op: "enroll", From: engine.Operators, Handle: c.forward, Max: c.o.EnrollMax, Long: true},
		protocol.TDelete:   {Op: "delete", From: engine.Operators, Handle: c.forward, Max: protocol.Small},
	}
	if c.p.HideProbes() {
		r[protocol.THiddenIdentify] = engine.Route{Op: "identify", From: engine.Clients, Handle: c.identifyHidden, Max: engine.HiddenIdentifyBound(c.p), Long: true, Query: true}
	}
	return r
}

// Run: a coordinator has no background work.
func (c *Coordinator) Run(context.Context) {}

// Stats: a coordinator keeps no rows.
func (c *Coordinator) Stats() engine.Stats { return engine.Stats{} }

func (c *Coordinator) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: c.env.Self, Mode: c.o.Mode}
}

// shardErr names the shard that failed a request, under code (0: the
// relayed refusal's, as engine.AsError keeps it).
func shardErr(self string, s, shards int, err error, code protocol.Code) *protocol.Error {
	e := engine.AsError(err, protocol.CodeUnavailable)
	if code == 0 {
		code = e.Code
	}
	return protocol.Errorf(code, "%s (shard %d of %d): %s", config.ShardName(self, s), s, shards, e.Msg)
}

// forward sends an enrollment or a deletion, as the operator signed it, to
// the shard that holds its ids; a batch of ids of several shards is
// refused (the client splits batches by shard: an operator's signature
// covers exactly the ids of one request).
func (c *Coordinator) forward(ctx context.Context, r engine.Request) protocol.Msg {
	var ids []string
	switch m := r.Msg.(type) {
	case *protocol.Enroll:
		ids = m.IDs()
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
		return shardErr(c.env.Self, s, c.p.Shards(), err, 0)
	}
	return resp
}

// identify runs the query over every shard under one query id and merges
// the shards' answers. A shard that fails fails the query, naming it: its
// rows may hold the answer.
func (c *Coordinator) identify(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Identify)
	if c.p.HideProbes() {
		// Refused here, before any shard sees the template.
		return protocol.Errorf(protocol.CodeBadRequest, "this cluster hides probes: identify with a client that has this cluster's configuration (it seals the probe's shares to the holders); a template was not used")
	}
	if perr := engine.CheckTopK(c.p, int(m.TopK)); perr != nil {
		return perr
	}
	if len(m.Template) != c.p.Dim() {
		return protocol.Errorf(protocol.CodeBadRequest, "a template of dimension %d; this cluster's is %d", len(m.Template), c.p.Dim())
	}
	req := func(qid [16]byte) protocol.Msg {
		return &protocol.ShardIdentify{Query: qid, TopK: m.TopK, Template: m.Template}
	}
	// A shard that counted a holder down (replicated mode), or that had
	// restarted since this coordinator last asked it, answers the query
	// again under a fresh query id (degraded, in the first case): one id
	// never carries two runs of a shard.
	answers, cause := c.ask(ctx, req)
	if cause != nil && cause.Code == protocol.CodeCountedDown {
		answers, cause = c.ask(ctx, req)
	}
	if cause != nil {
		if cause.Code == protocol.CodeCountedDown {
			cause.Code = protocol.CodeUnavailable
		}
		return cause
	}
	return c.merge(answers, int(m.TopK))
}

// identifyHidden runs a device's hidden probe (replicated mode with
// hide_probes) over every shard under one query id. It is never run
// again: every holder's shard runs a probe once (its nonce), so a shard
// that counted a holder down or restarted fails the probe, and the
// device makes a new one.
func (c *Coordinator) identifyHidden(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.HiddenIdentify)
	if perr := engine.CheckTopK(c.p, int(m.TopK)); perr != nil {
		return perr
	}
	answers, cause := c.ask(ctx, func(qid [16]byte) protocol.Msg { return &protocol.ShardHidden{Query: qid, Probe: *m} })
	if cause != nil {
		if cause.Code == protocol.CodeCountedDown {
			cause.Code = protocol.CodeUnavailable
			cause.Msg += " (a hidden probe runs once: identify again, with a new probe)"
		}
		return cause
	}
	out := c.merge(answers, int(m.TopK))
	if ok, isOK := out.(*protocol.IdentifyOK); isOK { // each shard decider's verdict, sealed to the device
		for _, a := range answers {
			ok.Verdicts = append(ok.Verdicts, a.Verdict)
		}
	}
	return out
}

// ask runs the query (req of the query id) on every shard under a fresh
// query id: their answers, or the first failure. A shard that cannot be
// reached fails it with CodeShardDown, on which a client of a mode that
// answers with a member down (replicated) asks another member's
// coordinator.
func (c *Coordinator) ask(ctx context.Context, reqOf func(qid [16]byte) protocol.Msg) (answers []*protocol.ShardAnswer, cause *protocol.Error) {
	var qid [16]byte
	if _, err := c.env.RandReader().Read(qid[:]); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	req := reqOf(qid)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	S := c.p.Shards()
	answers = make([]*protocol.ShardAnswer, S)
	t0 := time.Now()
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	returned := make([]bool, S) // the shards whose call has come back
	for s := range S {
		wg.Go(func() {
			resp, _, err := rpc.AskOnce(ctx, c.env.Net, config.ShardName(c.env.Self, s), req) // stops waiting when another shard fails; never sent twice
			mu.Lock()
			returned[s] = true
			mu.Unlock()
			if err == nil {
				a, ok := resp.(*protocol.ShardAnswer)
				if !ok {
					err = fmt.Errorf("answered %v", resp.Type())
				}
				answers[s] = a
			}
			if err != nil {
				once.Do(func() {
					var pe *protocol.Error
					switch {
					case errors.Is(err, network.ErrPeerRestarted): // never resent (AskOnce): run again under a fresh id
						cause = shardErr(c.env.Self, s, S, err, protocol.CodeCountedDown)
					case errors.As(err, &pe) && pe.Code == protocol.CodeCountedDown: // the shard's own say
						cause = shardErr(c.env.Self, s, S, err, protocol.CodeCountedDown)
					case pe == nil && ctx.Err() == nil: // the shard itself: unreachable or silent
						cause = shardErr(c.env.Self, s, S, err, protocol.CodeShardDown)
					case pe != nil && slices.Contains(c.o.Bare, pe.Msg): // said as unsharded
						cause = pe
					default:
						cause = shardErr(c.env.Self, s, S, err, 0)
					}
					// A shard that has not answered may be why this one
					// failed (its part never reached the helper's merge):
					// name it too.
					mu.Lock()
					var waiting []string
					for t, back := range returned {
						if !back {
							waiting = append(waiting, config.ShardName(c.env.Self, t))
						}
					}
					mu.Unlock()
					if len(waiting) > 0 && cause != nil && !slices.Contains(c.o.Bare, cause.Msg) {
						cause.Msg += fmt.Sprintf(" (%s had not answered yet)", strings.Join(waiting, ", "))
					}
					cancel()
					c.env.Log.Warn("a shard failed an identify", "shard", s, "after", time.Since(t0), "err", err)
				})
			}
		})
	}
	wg.Wait()
	return answers, cause
}

// candidate is one shard's candidate in the merged answer.
type candidate struct {
	rank, score int
	id          string
}

// merge orders the shards' candidates, by their ranks in the answer
// (Ranked) or by score, a shard's own order kept among equal scores and
// shards in their order (as the unsharded entry keeps rows in theirs).
func (c *Coordinator) merge(answers []*protocol.ShardAnswer, topK int) protocol.Msg {
	scored := !c.o.Ranked || c.p.RevealScores()
	var all []candidate
	var total, sent, recv uint64
	degraded := false
	for s, a := range answers {
		total, sent, recv = total+a.Bytes, sent+a.Sent, recv+a.Recv
		degraded = degraded || a.Degraded
		if len(a.Ranks) != len(a.IDs) || scored != (len(a.Scores) == len(a.IDs)) && len(a.IDs) > 0 {
			return protocol.Errorf(protocol.CodeInternal, "shard %d answered %d ids, %d ranks and %d scores", s, len(a.IDs), len(a.Ranks), len(a.Scores))
		}
		for i, id := range a.IDs {
			cd := candidate{rank: int(a.Ranks[i]), id: id}
			if scored {
				cd.score = int(a.Scores[i])
			}
			switch {
			case !c.o.Ranked && i > 0 && cd.score > int(a.Scores[i-1]):
				return protocol.Errorf(protocol.CodeInternal, "shard %d's candidates are not best first", s)
			case c.o.Ranked && cd.rank == protocol.NoRank:
				continue
			}
			all = append(all, cd)
		}
	}
	if c.o.Merged && len(all) > topK {
		helper := c.p.DeciderName()
		if k, ok := c.p.KeyServer(); ok {
			helper = k.Name
		}
		return protocol.Errorf(protocol.CodeInconsistent, "the helper's shards kept %d candidates for the top %d; the query is refused: %s may be faulty or compromised", len(all), topK, helper)
	}
	if c.o.Ranked {
		slices.SortFunc(all, func(a, b candidate) int { return cmp.Compare(a.rank, b.rank) })
	} else {
		slices.SortStableFunc(all, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	}
	ans := engine.NewAnswer(c.p, topK)
	ans.Bytes(sent, recv, total)
	if degraded {
		ans.Degraded()
	}
	for i, cd := range all {
		if c.o.Ranked && i > 0 && all[i-1].rank == cd.rank {
			return protocol.Errorf(protocol.CodeInternal, "two shards' candidates have rank %d", cd.rank)
		}
		if scored {
			ans.Scored(cd.id, cd.score) // the threshold and top K as unsharded
		} else {
			ans.Passed(cd.id) // the decider kept only rows at the threshold
		}
	}
	return ans.Done()
}

// Server is a row-holding member's server in a mode that shards: the
// mode's own server, whose Open makes the coordinator where the process
// is one (engine.Env.Coordinating), holding no rows.
func Server(srv engine.Server, o func(*config.Params) Options) engine.Server {
	open := srv.Open
	srv.Open = func(ctx context.Context, env engine.Env, dir string) (engine.Engine, []func() error, error) {
		if env.Coordinating() {
			return New(env, o(env.Params)), nil, nil
		}
		return open(ctx, env, dir)
	}
	return srv
}
