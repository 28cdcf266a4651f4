// Package blind is the protocol engine of blind mode (docs/BLIND-NOTES.md, docs/SECURITY.md "Blind mode"): mu share
// holders keep additive shares over Z_(2^k) of every enrolled row's
// gallery vector G(x), and a decider that holds no share finds the best
// rows in a randomly permuted, masked sum of the holders' score shares.
// Any holder is the entry for its devices; it learns the answer, never a
// score or a share of anyone else.
//
// Identify: the entry draws a query id and a seed sigma, sends (y, sigma)
// to every other holder; every holder computes its score share of every
// row (column sums over the query's positions), permutes it with pi(sigma)
// and adds its mask m_k(sigma) (the masks sum to zero), and sends the
// vector to the decider; the decider adds the mu vectors, getting pi(s),
// and answers the entry with the permuted positions of the best rows that
// reach the threshold; the entry maps them back with pi^-1.
//
// Enrollment is sealed (rowtxn's SealedEnroll): the operator's client
// computes G(x) and its shares and seals each holder's to that holder, so
// the entry relays parts it cannot read; a share travels as a 32-byte seed
// to all holders but the entry. Enrollment and deletion are the two-phase
// transactions of engine/rowtxn.
//
// # Security model
//
// Semi-honest, non-colluding servers. One holder's store is uniform. A
// helper sees y (as in the paper) and sigma; the decider sees each query's
// scores in random order, unlinkable across queries; the entry sees the
// answer. See docs/SECURITY.md.
package blind

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
)

// shares adapts an additive column store to rowtxn.Shares: a share is d
// elements of k bits, little-endian.
type shares[E additive.Elem] struct{ *additive.Store[E] }

func (s shares[E]) Put(seq int, share []byte, live bool) error {
	if share == nil { // lost to damage: zeros, and the row must be deleted
		return s.Store.Put(seq, make([]E, s.Dim()), live)
	}
	return s.Store.Put(seq, additive.ViewElems[E](share), live)
}

func (s shares[E]) Erase(seq int) error { return s.Delete(seq) }

// PutRows stores a batch of new rows column by column.
func (s shares[E]) PutRows(seq0 int, shares [][]byte) error {
	rows := make([][]E, len(shares))
	for i, b := range shares {
		rows[i] = additive.ViewElems[E](b)
	}
	return s.Store.PutRows(seq0, rows)
}

// Holder is one share holder of a blind cluster.
type Holder[E additive.Elem] struct {
	*rowtxn.Core[shares[E]]
	env   engine.Env
	p     *config.Params
	query *engine.LevelTransformers
	perms sync.Pool      // *additive.Permuter
	bufs  sync.Pool      // *[]E, a score vector
	acks  blindbase.Acks // of the shares sent as a helper: a stopping holder waits for them
	// passes merges concurrent queries' scoring into one pass over the
	// shares (scoreVector).
	passes *engine.Batcher[*pass, passed[E]]
	m      struct {
		score, permute, decider, passes, passed prometheus.Counter
	}
}

// New makes share holder env.Self for the cluster's ring: feed it the log
// with Replay, then call Start.
func New(env engine.Env) (Engine, error) {
	switch env.Params.Ring().Bits {
	case 8:
		return newHolder[uint8](env)
	case 16:
		return newHolder[uint16](env)
	}
	return nil, fmt.Errorf("blind: a ring of %d bits", env.Params.Ring().Bits)
}

// Engine is a share holder whatever its ring.
type Engine = rowtxn.Holder

func newHolder[E additive.Elem](env engine.Env) (*Holder[E], error) {
	p := env.Params
	d := p.Dim()
	core, err := rowtxn.New(env, rowtxn.Options[shares[E]]{
		ShareSize: d * additive.RingOf[E]().Bits / 8,
		NewShares: func() (shares[E], error) {
			s, err := additive.NewStore[E](d, 0)
			return shares[E]{s}, err
		},
		SeedSize: additive.SeedSize,
		Expand: func(b []byte) ([]byte, error) {
			var seed additive.Seed
			copy(seed[:], b)
			full := make([]E, d)
			err := additive.ExpandShare(full, &seed)
			return additive.ElemBytes(full), err
		},
	})
	if err != nil {
		return nil, err
	}
	q, err := engine.NewLevelTransformers(d, p.QueryLevels())
	if err != nil {
		return nil, err
	}
	h := &Holder[E]{Core: core, env: env, p: p, query: q}
	// A pass starts as soon as none runs; the queries that arrive while
	// one runs (up to batch_max) form the next.
	bmax, _ := p.Batch()
	h.passes = engine.NewBatcher(bmax, 0, 1, p.Timeouts().Identify, h.scorePass)
	for _, c := range []struct {
		c          *prometheus.Counter
		name, help string
	}{
		{&h.m.score, "idface_blind_score_seconds_total", "Time in passes over the shares computing score shares (column sums over every row; concurrent queries share a pass)."},
		{&h.m.permute, "idface_blind_permute_seconds_total", "Time permuting and masking score shares."},
		{&h.m.decider, "idface_blind_decider_wait_seconds_total", "Entry: time from sending its shares to the decider's answer (the other holders' work, the wire, the decider)."},
		{&h.m.passes, "idface_blind_passes_total", "Passes over this holder's shares (its own queries as the entry and the other entries' together)."},
		{&h.m.passed, "idface_blind_passed_total", "Queries scored in those passes (over passes: the mean pass)."},
	} {
		*c.c = prometheus.NewCounter(prometheus.CounterOpts{Name: c.name, Help: c.help})
		env.Metrics.MustRegister(*c.c)
	}
	return h, nil
}

// Routes lists the requests a share holder answers.
func (h *Holder[E]) Routes() map[protocol.Type]engine.Route {
	r := h.Core.Routes()
	// Enrollment is sealed only: the operator's client shares and seals
	// each holder's part, so no server sees a template (a plain Enroll is
	// not routed here).
	share := h.p.Dim() * additive.RingOf[E]().Bits / 8
	r[protocol.TSealedEnroll] = engine.Route{Op: "enroll", From: engine.Operators, Handle: h.Guard(h.SealedEnroll), Max: engine.SealedEnrollBound(h.p, share)}
	r[protocol.TSealedPrepare] = engine.Route{Op: "prepare", From: engine.Parties, Handle: h.Guard(h.SealedPrepare), Max: engine.SealedPrepareBound(h.p, share)}
	r[protocol.TIdentify] = engine.Route{Op: "identify", From: engine.Clients, Handle: h.Guard(h.identify), Max: engine.IdentifyBound(h.p), Long: true, Query: true}
	r[protocol.TBlindQuery] = engine.Route{Op: "query", From: engine.Parties, Handle: h.Guard(h.serveQuery), Max: engine.BlindQueryBound(h.p), Long: true, Query: true}
	if h.env.Sharded() {
		r[protocol.TShardIdentify] = engine.Route{Op: "identify", From: engine.Parties, Handle: h.Guard(h.shardIdentify), Max: engine.ShardIdentifyBound(h.p), Long: true, Query: true}
	}
	return r
}

// snapshot takes the committed row map (caller holds the read lock).
func (h *Holder[E]) snapshot() blindbase.View {
	return blindbase.NewView(h.Digest(), func(s int) []uint64 { return h.Shares(s).LiveBits() })
}

// entryDigest is the row map an entry sent a helper, sealed for the two.
type entryDigest struct {
	entry  string
	digest protocol.Digest
}

// scoreVector computes this holder's permuted, masked score shares for
// the query over its committed rows. A helper passes the entry's digest
// (want) and is refused if its rows differ; the entry passes started, which
// sees the snapshot before the scoring (to send the helpers the digest).
//
// Concurrent queries (this holder's own as the entry, and those other
// entries ask it for as a helper) share one pass over the shares
// (h.passes, scorePass): a column several of them select is read once. The
// permutation and masks are each query's own, applied by its caller while
// the next pass runs.
func (h *Holder[E]) scoreVector(ctx context.Context, q *additive.Query, sigma *additive.Seed, want *entryDigest, started func(blindbase.View)) (blindbase.View, []E, func(), error) {
	// Waited for to the end, also when ctx ends first: the pass may be
	// scoring into this query's buffer (local work, bounded by the shares).
	res, err := h.passes.Do(context.Background(), &pass{ctx: ctx, q: q, want: want, started: started})
	if err == nil {
		err = res.err
	}
	if err != nil {
		return res.v, nil, nil, err
	}
	t1 := time.Now()
	src, dst := res.src, h.buf(res.v.Rows())
	release := func() { h.bufs.Put(&src); h.bufs.Put(&dst) }
	perm := h.permuter()
	defer h.perms.Put(perm)
	if err := additive.PermuteMask(perm, dst, src, res.v.Live, sigma, h.Self(), h.p.Mu()); err != nil {
		release()
		return res.v, nil, nil, err
	}
	h.m.permute.Add(time.Since(t1).Seconds())
	return res.v, dst, release, nil
}

// pass is one query's part in a pass over the shares (scoreVector).
type pass struct {
	ctx     context.Context // the request's: a query whose caller is gone is not scored
	q       *additive.Query
	want    *entryDigest
	started func(blindbase.View)
}

// passed is a query's score shares from a pass (a buffer of h.bufs), on
// the pass's view of the rows, or why it was refused.
type passed[E additive.Elem] struct {
	v   blindbase.View
	src []E
	err error
}

// scorePass is one pass over the committed rows for every query of ps:
// one snapshot, each query admitted on it (a helper's if the entry's
// digest matches) or refused, then the score shares of all admitted
// queries by additive.ScoreSharesBatch.
//
// A helper's query whose digest matched when it arrived (AwaitDigest)
// but not at its pass lost a race with a commit while it waited: it is
// refused with CodeCountedDown, on which the entry runs the query once
// more under a fresh id (and a new snapshot).
func (h *Holder[E]) scorePass(_ context.Context, ps []*pass) []passed[E] {
	out := make([]passed[E], len(ps))
	t0 := time.Now()
	h.RLock()
	v := h.snapshot()
	var qs []*additive.Query
	var srcs [][]E
	var admitted []int
	for i, p := range ps {
		out[i].v = v
		if err := p.ctx.Err(); err != nil {
			out[i].err = protocol.Errorf(protocol.CodeUnavailable, "%s: %v", h.env.Self, err)
			continue
		}
		if p.want != nil {
			if have, err := h.SealFor(p.want.entry, v.Digest); err != nil || !have.Equal(p.want.digest) {
				out[i].err = blindbase.RowsMoved(h.env.Self)
				continue
			}
		}
		if p.started != nil {
			p.started(v)
		}
		out[i].src = h.buf(v.Rows())
		qs, srcs, admitted = append(qs, p.q), append(srcs, out[i].src), append(admitted, i)
	}
	var err error
	sub := make([][]E, len(qs))
	for s := range v.Digest {
		rows := int(v.Digest[s].Rows)
		if rows == 0 || len(qs) == 0 {
			continue
		}
		for j := range srcs {
			sub[j] = srcs[j][v.Off[s]:v.Off[s+1]]
		}
		if err = h.Shares(s).ScoreSharesBatch(sub, qs, 0, rows, 0); err != nil {
			break
		}
	}
	h.RUnlock()
	for _, i := range admitted {
		if err != nil {
			src := out[i].src
			h.bufs.Put(&src)
			out[i].src, out[i].err = nil, err
		}
	}
	h.m.score.Add(time.Since(t0).Seconds())
	h.m.passes.Inc()
	h.m.passed.Add(float64(len(qs)))
	return out
}

func (h *Holder[E]) buf(n int) []E {
	if b, ok := h.bufs.Get().(*[]E); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]E, n)
}

func (h *Holder[E]) permuter() *additive.Permuter {
	if p, ok := h.perms.Get().(*additive.Permuter); ok {
		return p
	}
	return &additive.Permuter{}
}

// sendShare sends a holder's vector to the decider; the entry's stream
// then carries the decider's answer.
func (h *Holder[E]) sendShare(ctx context.Context, qid [16]byte, vec []E, topK int, entry bool) (*network.Stream, error) {
	m := &protocol.DecideShare{Query: qid, Rows: uint32(len(vec)), Bits: uint8(additive.RingOf[E]().Bits), TopK: uint16(topK), Entry: entry}
	return blindbase.SendShares(ctx, h.env.Net, h.p.DeciderName(), m, additive.ElemBytes(vec))
}

// identify runs a query as the entry.
func (h *Holder[E]) identify(ctx context.Context, r engine.Request) protocol.Msg {
	if h.env.Sharded() {
		return protocol.Errorf(protocol.CodeBadRequest, "%s is one shard of %s: identify through %s's address (its coordinator)", h.env.Member(), h.env.Self, h.env.Self)
	}
	m := r.Msg.(*protocol.Identify)
	run, perr := h.run(ctx, m, nil)
	for again := 0; perr != nil && perr.Code == protocol.CodeCountedDown && again < blindbase.MaxRunsAgain; again++ {
		run, perr = h.run(ctx, m, nil) // under a fresh id
	}
	if perr != nil {
		if perr.Code == protocol.CodeCountedDown {
			perr.Code = protocol.CodeUnavailable
		}
		return perr
	}
	return h.answer(run, int(m.TopK))
}

// shardIdentify runs a query over this shard's rows as the entry, under
// the coordinator's query id.
func (h *Holder[E]) shardIdentify(ctx context.Context, r engine.Request) protocol.Msg {
	if !h.env.Sharded() || r.From.Name != h.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only a shard's own coordinator asks it to identify")
	}
	m := r.Msg.(*protocol.ShardIdentify)
	run, perr := h.run(ctx, &protocol.Identify{TopK: m.TopK, Template: m.Template}, &m.Query)
	if perr != nil {
		return perr
	}
	return h.shardAnswer(run, int(m.TopK))
}

// ran is a query the entry ran: the decider's answer and what maps it
// back to rows.
type ran struct {
	res   *protocol.DecideResult
	v     blindbase.View
	sigma additive.Seed
	bytes uint64 // every server's traffic
}

// run runs a query as the entry, under query id qid when given (a shard's
// coordinator's) or a fresh one. A decider that restarted since this
// holder's connection to it was made loses the query (its answer, and
// perhaps the helpers' vectors, went to the process that died), as does
// a helper whose rows a commit moved past this query's snapshot while it
// waited for a pass: the query fails with CodeCountedDown, and runs
// again under a fresh id (never the same one: one id carries one run), at
// most blindbase.MaxRunsAgain times.
func (h *Holder[E]) run(ctx context.Context, m *protocol.Identify, qid *[16]byte) (*ran, *protocol.Error) {
	topK := int(m.TopK)
	nq, perr := blindbase.NewQuery(h.env, h.p, h.query, m)
	if perr != nil {
		return nil, perr
	}
	if qid != nil {
		nq.ID = *qid
	}
	q, pos, coef, sigma, qid2 := nq.Q, nq.Pos, nq.Coef, nq.Sigma, nq.ID
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The helpers: (y, sigma) out, their share of the traffic back. The
	// first failure, a helper's or the decider's, ends the query and is
	// the answer: the decider will not answer without every share.
	peers := h.Peers()
	helperBytes := make([]uint64, len(peers))
	var wg sync.WaitGroup
	var once sync.Once
	var cause *protocol.Error
	dec := h.env.Peer(h.p.DeciderName())
	fail := func(who string, err error) {
		once.Do(func() {
			e := engine.AsError(err, protocol.CodeUnavailable)
			if blindbase.RunAgain(who, dec, err) {
				e.Code = protocol.CodeCountedDown
			}
			cause = protocol.Errorf(e.Code, "%s: %s", who, e.Msg)
			cancel()
		})
	}
	ask := func(v blindbase.View) {
		for i, name := range peers {
			sealed, err := h.SealFor(name, v.Digest) // the digest as this helper compares it
			if err != nil {
				fail(h.env.Member(), err)
				return
			}
			bq := &protocol.BlindQuery{Query: qid2, Sigma: sigma, Digest: sealed, Pos: pos, Coef: coef}
			wg.Go(func() {
				if err := h.ask(ctx, name, bq, &helperBytes[i]); err != nil {
					fail(h.env.Peer(name), err)
				}
			})
		}
	}
	v, vec, release, err := h.scoreVector(ctx, q, &sigma, nil, ask)
	if err != nil {
		fail(h.env.Member(), err)
		wg.Wait()
		return nil, cause
	}
	sent := time.Now()
	s, err := h.sendShare(ctx, qid2, vec, topK, true)
	release()
	if err != nil {
		fail(dec, err)
		wg.Wait()
		return nil, cause
	}
	defer s.Finish()
	stop := context.AfterFunc(ctx, func() { s.SetDeadline(time.Now()) }) // a helper failed
	resp, err := rpc.ReadReply(ctx, s, dec)
	stop()
	h.m.decider.Add(time.Since(sent).Seconds())
	if err != nil {
		fail(dec, err)
	}
	wg.Wait()
	if cause != nil {
		return nil, cause
	}
	res, ok := resp.(*protocol.DecideResult)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInternal, "the decider answered %v", resp.Type())
	}
	if perr := h.checkResult(res, topK); perr != nil {
		return nil, perr
	}
	total := uint64(s.Sent() + s.Received()) // the entry's stream with the decider, both ways
	for _, b := range helperBytes {
		total += b
	}
	return &ran{res: res, v: v, sigma: sigma, bytes: total}, nil
}

// ask sends a helper the query and waits for its acknowledgement (its
// shares are on their way to the decider); bytes counts its traffic for
// the answer. A cancelled query stops waiting at once.
func (h *Holder[E]) ask(ctx context.Context, name string, bq *protocol.BlindQuery, bytes *uint64) error {
	resp, n, err := rpc.Ask(ctx, h.env.Net, name, bq)
	if err != nil {
		return err
	}
	ok, isOK := resp.(*protocol.BlindQueryOK)
	if !isOK {
		return fmt.Errorf("%s answered the query with %v", name, resp.Type())
	}
	*bytes = ok.Bytes + n
	return nil
}

// checkResult checks the decider's answer has the form the cluster's
// gives: at most top K, scores only where revealed, ranks only from a
// decider shard.
func (h *Holder[E]) checkResult(res *protocol.DecideResult, topK int) *protocol.Error {
	reveal := h.p.RevealScores()
	switch {
	case len(res.Positions) > topK:
		return protocol.Errorf(protocol.CodeInternal, "the decider answered %d positions for top %d", len(res.Positions), topK)
	case reveal && len(res.Scores) != len(res.Positions):
		return protocol.Errorf(protocol.CodeInternal, "the decider answered %d scores for %d positions", len(res.Scores), len(res.Positions))
	case !reveal && len(res.Scores) != 0:
		return protocol.Errorf(protocol.CodeInternal, "the decider sent scores to a cluster that hides them")
	case h.env.Sharded() != (len(res.Ranks) == len(res.Positions)) && len(res.Positions) > 0:
		return protocol.Errorf(protocol.CodeInternal, "the decider answered %d ranks for %d positions", len(res.Ranks), len(res.Positions))
	}
	return nil
}

// rows maps the decider's positions back to live rows: f(i, segment,
// sequence) for the i-th position (deleted rows never win).
func (h *Holder[E]) rows(run *ran, f func(i, seg, seq int)) *protocol.Error {
	perm := h.permuter()
	rows, perr := blindbase.Unpermute(perm, run.res.Positions, &run.sigma, run.v.Rows())
	h.perms.Put(perm)
	if perr != nil {
		return perr
	}
	h.RLock()
	defer h.RUnlock()
	for i, row := range rows {
		if s, seq, live := run.v.Locate(row); live {
			f(i, s, seq)
		}
	}
	return nil
}

// answer maps the decider's permuted positions back to ids.
func (h *Holder[E]) answer(run *ran, topK int) protocol.Msg {
	reveal := h.p.RevealScores()
	ans := engine.NewAnswer(h.p, topK)
	ans.Bytes(0, 0, run.bytes)
	if perr := h.rows(run, func(i, s, seq int) {
		if reveal {
			ans.Scored(h.ID(s, seq), int(run.res.Scores[i]))
		} else {
			ans.Passed(h.ID(s, seq)) // the decider kept only rows at the threshold
		}
	}); perr != nil {
		return perr
	}
	return ans.Done()
}

// shardAnswer is a shard's part of the answer: its ids with their ranks.
func (h *Holder[E]) shardAnswer(run *ran, topK int) protocol.Msg {
	a := &protocol.ShardAnswer{Bytes: run.bytes}
	if perr := h.rows(run, func(i, s, seq int) {
		a.IDs = append(a.IDs, h.ID(s, seq))
		a.Ranks = append(a.Ranks, run.res.Ranks[i])
		if h.p.RevealScores() {
			a.Scores = append(a.Scores, run.res.Scores[i])
		}
	}); perr != nil {
		return perr
	}
	return a
}

// serveQuery answers an entry's query as a helper: check the query has the
// cluster's form and the row maps agree, then send this holder's permuted,
// masked score shares to the decider.
func (h *Holder[E]) serveQuery(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.BlindQuery)
	q, perr := blindbase.CheckQuery(h.p, m)
	if perr != nil {
		return perr
	}
	if m.Down != 0 { // blind mode needs every holder: it has no degraded queries
		return protocol.Errorf(protocol.CodeBadRequest, "a blind-mode query names a holder down; this mode answers only with every holder")
	}
	if r.From.Name == h.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "a holder does not query itself")
	}
	if err := h.AwaitDigest(ctx, r.From.Name, m.Digest); err != nil {
		return err
	}
	sigma := additive.Seed(m.Sigma)
	_, vec, release, err := h.scoreVector(ctx, q, &sigma, &entryDigest{r.From.Name, m.Digest}, nil)
	if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
		return pe // this holder's own refusal (CodeCountedDown: run again), not a relayed one
	} else if err != nil {
		return engine.AsError(err, protocol.CodeInternal)
	}
	s, err := h.sendShare(ctx, m.Query, vec, 1, false)
	if err != nil {
		release()
		return engine.AsError(fmt.Errorf("decider: %w", err), protocol.CodeUnavailable)
	}
	resend := func() (*network.Stream, error) {
		ctx, cancel := context.WithTimeout(context.Background(), h.p.Timeouts().Request)
		defer cancel()
		return h.sendShare(ctx, m.Query, vec, 1, false)
	}
	return &protocol.BlindQueryOK{Bytes: h.acks.Await(s, h.p.DeciderName(), h.env.Log, resend, release)}
}

// Run runs the holder's background work until ctx ends, then waits, at
// most blindbase.AckGrace, for the decider to acknowledge the shares it sent as a
// helper.
func (h *Holder[E]) Run(ctx context.Context) {
	h.Core.Run(ctx)
	h.acks.Wait(min(blindbase.AckGrace, h.p.Timeouts().Shutdown), h.env.Log)
}

// RowShare is this holder's share of row seq of origin k's segment, as
// bytes (shard.Rebalance).
func (h *Holder[E]) RowShare(k, seq int) ([]byte, error) {
	h.RLock()
	defer h.RUnlock()
	row, err := h.Shares(k).Row(seq, make([]E, h.p.Dim()))
	if err != nil {
		return nil, err
	}
	return additive.ElemBytes(row), nil
}
