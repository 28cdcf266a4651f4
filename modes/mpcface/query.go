package mpcface

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// blockPlan lists the blocks of a query: segment, first word, word count.
type blockPlan struct {
	seg, w0, nw int
}

// plan cuts every segment into blocks of at most blockWords words that
// never cross a storage chunk; entry and helpers derive the same plan.
func plan(g protocol.Digest, blockWords int) []blockPlan {
	var out []blockPlan
	for s, sd := range g {
		W := template.Words(int(sd.Rows))
		for w0 := 0; w0 < W; {
			w1 := min(w0+blockWords, W, sharing.ChunkEnd(w0))
			out = append(out, blockPlan{s, w0, w1 - w0})
			w0 = w1
		}
	}
	return out
}

// probe is one identification at the entry: T_beta(y), its selected
// columns and how many candidates its device asked for.
type probe struct {
	y        template.Ternary
	sel      sharing.Selection
	topK     int
	deadline time.Time // its request's
	shard    bool      // a shard's part of its coordinator's identify: answered with scores
}

// identify runs a query as the entry party (paper Fig. "2pc_id" and App.
// H): T_beta, broadcast (y+, y-), then XOR and score every block as it
// arrives. Concurrent identifies are batched (engine.Batcher): a batch
// asks each helper once for the union of its probes' columns.
func (e *Engine) identify(ctx context.Context, r engine.Request) protocol.Msg {
	if e.env.Sharded() {
		return protocol.Errorf(protocol.CodeBadRequest, "%s is one shard of %s: identify through %s's address (its coordinator)", e.env.Member(), e.env.Self, e.env.Self)
	}
	return e.probe(ctx, r.Msg.(*protocol.Identify), false)
}

// shardIdentify runs a query over this shard's rows for the member's
// coordinator (engine/shard), which merges the shards' best candidates by
// score: the coordinator is the entry party's own, which sees every score
// unsharded too.
func (e *Engine) shardIdentify(ctx context.Context, r engine.Request) protocol.Msg {
	if !e.env.Sharded() || r.From.Name != e.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only a shard's own coordinator asks it to identify")
	}
	m := r.Msg.(*protocol.ShardIdentify)
	return e.probe(ctx, &protocol.Identify{TopK: m.TopK, Template: m.Template}, true)
}

// probe runs one identify, alone or in a batch.
func (e *Engine) probe(ctx context.Context, m *protocol.Identify, shard bool) protocol.Msg {
	y, err := e.tr.Apply(m.Template)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	topK := int(m.TopK)
	if perr := engine.CheckTopK(e.p, topK); perr != nil {
		return perr
	}
	pr := &probe{y: y, sel: sharing.NewSelection(y), topK: topK, shard: shard}
	pr.deadline, _ = ctx.Deadline()
	if e.batch == nil {
		return e.run(ctx, []*probe{pr})[0]
	}
	// The batch ends a little before its earliest request's deadline
	// (runBatch), so this request gets the batch's answer, which names a
	// helper that did not answer in time, before its own deadline; a
	// cancelled request (a shutdown's grace ran out) stops waiting at once.
	res, err := e.batch.Do(ctx, pr)
	if err != nil {
		return engine.AsError(fmt.Errorf("identify: %w", err), protocol.CodeUnavailable)
	}
	return res
}

// runBatch is the batcher's run: one pass for the batch, one answer per
// probe, ended a little before its earliest request's deadline. It runs
// outside the server's handler, so it turns a panic (a bug) into every
// probe's refusal, as the server does for a handler.
func (e *Engine) runBatch(ctx context.Context, probes []*probe) (out []protocol.Msg) {
	e.m.batches.Inc()
	e.m.batched.Add(float64(len(probes)))
	defer func() {
		if v := recover(); v != nil {
			e.env.Log.Error("a batch of identifies panicked; its requests are refused and the server goes on (a bug: please report it with this log)", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			out = make([]protocol.Msg, len(probes))
			for i := range out {
				out[i] = protocol.Errorf(protocol.CodeInternal, "identify failed inside the server (a bug, logged there)")
			}
		}
	}()
	var first time.Time
	for _, pr := range probes {
		if !pr.deadline.IsZero() && (first.IsZero() || pr.deadline.Before(first)) {
			first = pr.deadline
		}
	}
	if !first.IsZero() {
		margin := min(100*time.Millisecond, time.Until(first)/10)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, first.Add(-max(margin, 0)))
		defer cancel()
	}
	return e.run(ctx, probes)
}

// run scores probes on one snapshot of the row map: every helper streams
// the union of their selected columns once (a lone probe's own columns,
// in its order: a Query), and each probe is scored from its columns of
// every block. The answers are those of the probes run one by one; the
// batch's traffic is shared evenly among them.
func (e *Engine) run(ctx context.Context, probes []*probe) []protocol.Msg {
	p := e.snapshot(probes)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	peers, perr := e.openPeers(ctx, p)
	defer func() {
		for i := len(peers) - 1; i >= 0; i-- {
			peers[i].finish()
		}
	}()
	if perr == nil {
		perr = e.newScorers(p)
	}
	if perr == nil {
		perr = e.scoreBlocks(p, peers)
	}
	if perr == nil {
		perr = streamsEnded(peers)
	}
	if perr != nil {
		return answerAll(len(probes), perr)
	}
	return e.answers(p, peers)
}

// pass is one run over the rows: its probes and the union of their
// columns, the snapshot of the row map it scores, its blocks, and each
// probe's scorers.
type pass struct {
	probes  []*probe
	u       sharing.Selection // the union of the probes' columns
	idx     [][]int32         // a batch's: each probe's columns in u
	n, bw   int               // columns of u, and row words per block
	g       protocol.Digest   // the row map the helpers must match
	live    [][]uint64        // its live bits, by segment
	blocks  []blockPlan
	segOff  []int               // the global word offset of each segment
	scorers [][]*sharing.Scorer // each probe's, one per worker
}

// answerAll is the same answer, m, for each of n probes.
func answerAll(n int, m protocol.Msg) []protocol.Msg {
	out := make([]protocol.Msg, n)
	for i := range out {
		out[i] = m
	}
	return out
}

// snapshot plans a pass: the union of the probes' columns, and the row
// map: the digest the helpers must match and the live bits we score
// with. Rows below the snapshot never change.
func (e *Engine) snapshot(probes []*probe) *pass {
	p := &pass{probes: probes, u: probes[0].sel, idx: [][]int32{nil}}
	if len(probes) > 1 {
		sels := make([]sharing.Selection, len(probes))
		for i, pr := range probes {
			sels[i] = pr.sel
		}
		p.u, p.idx = sharing.Union(sels)
	}
	p.n = len(p.u.Cols)
	p.bw = blockWords(e.p, p.n)
	e.RLock()
	p.g = e.Digest()
	p.live = make([][]uint64, len(p.g))
	for s := range p.g {
		st := e.Shares(s)
		p.live[s] = append([]uint64(nil), st.LiveWords(0, st.Words())...)
	}
	e.RUnlock()
	p.blocks = plan(p.g, p.bw)
	p.segOff = make([]int, len(p.g)+1)
	for s, sd := range p.g {
		p.segOff[s+1] = p.segOff[s] + template.Words(int(sd.Rows))
	}
	return p
}

// openPeers sends every helper its query; the streams opened before a
// failure come back with it, for the caller to finish.
func (e *Engine) openPeers(ctx context.Context, p *pass) ([]*peerStream, *protocol.Error) {
	var peers []*peerStream
	for _, name := range e.Peers() {
		sealed, perr := e.SealFor(name, p.g) // the digest sealed for this helper
		if perr != nil {
			return peers, perr
		}
		ps, err := openQuery(network.Bulk(ctx), e.env.Net, name, e.env.Peer(name), e.queryFor(p.probes, sealed, p.bw), p.blocks, p.n, p.bw)
		if err != nil {
			return peers, engine.AsError(fmt.Errorf("%s: %w", e.env.Peer(name), err), protocol.CodeUnavailable)
		}
		peers = append(peers, ps)
	}
	return peers, nil
}

// newScorers gives each probe its scorers: a lone probe's blocks are
// split over every worker; a batch's probes are scored side by side.
func (e *Engine) newScorers(p *pass) *protocol.Error {
	floor := engine.ScoreFloor(e.p) // scores below it are never kept
	per := max(1, e.workers/len(p.probes))
	p.scorers = make([][]*sharing.Scorer, len(p.probes))
	for i, pr := range p.probes {
		p.scorers[i] = make([]*sharing.Scorer, per)
		for j := range p.scorers[i] {
			var err error
			if p.scorers[i][j], err = sharing.NewScorer(pr.sel.Beta, pr.topK, floor); err != nil {
				return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
			}
		}
	}
	return nil
}

// scoreBlocks scores every block: this party's columns and each helper's,
// as they arrive, picked for each probe of a batch.
func (e *Engine) scoreBlocks(p *pass, peers []*peerStream) *protocol.Error {
	own := getBuf(p.bw * p.n)
	defer putBuf(own)
	cols := make([][][]uint64, 1+len(peers))      // the union's columns, by party
	picked := make([][][][]uint64, len(p.probes)) // each probe's, by party
	for i := range picked {
		picked[i] = make([][][]uint64, len(cols))
	}
	var held [][]uint64
	var waited, scored time.Duration
	defer func() {
		e.m.wait.Add(waited.Seconds())
		e.m.score.Add(scored.Seconds())
	}()
	for _, b := range p.blocks {
		t0 := time.Now()
		var err error
		if cols[0], err = e.ownColumns(b, p.g, p.u, own, cols[0][:0]); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		held = held[:0]
		t1 := time.Now()
		for i, ps := range peers {
			blk, ok := <-ps.blocks
			if !ok {
				return engine.AsError(ps.err, protocol.CodeUnavailable)
			}
			held = append(held, blk)
			cols[i+1] = sharing.BlockColumns(blk, p.n, cols[i+1][:0])
		}
		t2 := time.Now()
		if len(p.probes) == 1 {
			picked[0] = cols
		} else {
			for i := range p.probes {
				for k, c := range cols {
					picked[i][k] = sharing.Pick(c, p.idx[i], picked[i][k][:0])
				}
			}
		}
		if err := scoreProbes(p.scorers, picked, p.segOff[b.seg]+b.w0, p.live[b.seg][b.w0:b.w0+b.nw]); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		waited += t2.Sub(t1)
		scored += time.Since(t2) + t1.Sub(t0)
		for _, blk := range held {
			putBuf(blk)
		}
	}
	return nil
}

// streamsEnded checks that every helper ended its stream after the last
// block, without an error.
func streamsEnded(peers []*peerStream) *protocol.Error {
	for _, ps := range peers {
		if _, ok := <-ps.blocks; ok || ps.err != nil {
			return engine.AsError(fmt.Errorf("%s: %v", ps.name, ps.err), protocol.CodeUnavailable)
		}
	}
	return nil
}

// answers merges each probe's scorers into its answer (a shard's: its
// best with their scores, for its coordinator), unless a row was deleted
// during the pass.
func (e *Engine) answers(p *pass, peers []*peerStream) []protocol.Msg {
	var sent, recv uint64
	for _, ps := range peers {
		s, r := ps.bytes()
		sent, recv = sent+s, recv+r
	}
	e.RLock()
	defer e.RUnlock()
	if e.Digest().DeletedSince(p.g) { // an erased share may have been scored
		return answerAll(len(p.probes), protocol.Errorf(protocol.CodeInconsistent, "a row was deleted during the query; retry"))
	}
	q := uint64(len(p.probes))
	share := func(n uint64, i int) uint64 { // n split evenly, the first probes taking the rest
		if uint64(i) < n%q {
			return n/q + 1
		}
		return n / q
	}
	id := func(mt sharing.Match) string {
		s := 0
		for mt.Row >= p.segOff[s+1]*64 {
			s++
		}
		return e.ID(s, mt.Row-p.segOff[s]*64)
	}
	out := make([]protocol.Msg, len(p.probes))
	for i, pr := range p.probes {
		parts := make([][]sharing.Match, len(p.scorers[i]))
		for j, sc := range p.scorers[i] {
			parts[j] = sc.Result()
		}
		best := sharing.Merge(pr.topK, parts...)
		// Every server-to-server byte of the batch, shared evenly.
		ps, pr2 := share(sent, i), share(recv, i)
		if pr.shard { // the shard's best, best first, for its coordinator to merge
			a := &protocol.ShardAnswer{Bytes: ps + pr2, Sent: ps, Recv: pr2}
			for rank, mt := range best {
				a.IDs, a.Ranks, a.Scores = append(a.IDs, id(mt)), append(a.Ranks, uint16(rank)), append(a.Scores, int32(mt.Score))
			}
			out[i] = a
			continue
		}
		ans := engine.NewAnswer(e.p, pr.topK)
		for _, mt := range best {
			ans.Scored(id(mt), mt.Score)
		}
		ans.Bytes(ps, pr2, ps+pr2)
		out[i] = ans.Done()
	}
	return out
}

// queryFor is what the entry asks a helper for: a lone probe's Query, or
// the batch's QueryBatch, on the row map sealed for that helper.
func (e *Engine) queryFor(probes []*probe, sealed protocol.Digest, bw int) protocol.Msg {
	if len(probes) == 1 {
		y := probes[0].y
		return &protocol.Query{Dim: uint16(e.p.Dim()), Beta: uint16(probes[0].sel.Beta), Plus: y.Plus, Minus: y.Minus, Digest: sealed, BlockWords: uint32(bw)}
	}
	q := &protocol.QueryBatch{Dim: uint16(e.p.Dim()), Beta: uint16(e.p.Beta()), Digest: sealed, BlockWords: uint32(bw)}
	for _, pr := range probes {
		q.Probes = append(q.Probes, protocol.Probe{Plus: pr.y.Plus, Minus: pr.y.Minus})
	}
	return q
}

// scoreProbes scores one block for every probe of a batch, the probes side
// by side (scoreBlock each).
func scoreProbes(sc [][]*sharing.Scorer, cols [][][][]uint64, gw0 int, live []uint64) error {
	if len(sc) == 1 {
		return scoreBlock(sc[0], cols[0], gw0, live)
	}
	errs := make([]error, len(sc))
	var wg sync.WaitGroup
	for i := range sc {
		wg.Go(func() { errs[i] = scoreBlock(sc[i], cols[i], gw0, live) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scoreBlock splits one block's words evenly over the scorers, one
// goroutine each (Engine.workers: every core, or a shard's share of them).
func scoreBlock(sc []*sharing.Scorer, cols [][][]uint64, gw0 int, live []uint64) error {
	nw := len(cols[0][0])
	errs := make([]error, len(sc))
	var wg sync.WaitGroup
	for i := range sc {
		lo, hi := nw*i/len(sc), nw*(i+1)/len(sc)
		if lo == hi {
			continue
		}
		sub := sharing.SliceWords(cols, lo, hi)
		wg.Go(func() { errs[i] = sc[i].Add(sub, gw0+lo, live[lo:hi]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ownColumns returns this party's selected columns for block b: views into
// the store for blocks of complete words, which never change, and a copy
// made under the lock for the block holding a segment's last, partial word,
// which concurrent enrollments may still extend.
func (e *Engine) ownColumns(b blockPlan, g protocol.Digest, sel sharing.Selection, buf []uint64, out [][]uint64) ([][]uint64, error) {
	seg := e.Shares(b.seg)
	e.RLock()
	defer e.RUnlock()
	if (b.w0+b.nw)*64 <= int(g[b.seg].Rows) {
		return seg.Columns(sel, b.w0, b.w0+b.nw, out)
	}
	n := len(sel.Cols)
	if err := seg.Gather(buf[:b.nw*n], sel, b.w0, b.w0+b.nw); err != nil {
		return nil, err
	}
	return sharing.BlockColumns(buf[:b.nw*n], n, out), nil
}

// peerStream receives one helper's blocks in order on a channel; the
// channel closes after the last block or on the first error (in err).
type peerStream struct {
	name   string
	blocks chan []uint64
	err    error
	mu     sync.Mutex
	// streams are the query's stream and, when the helper had restarted
	// since the connection was made, the resend's.
	streams []*network.Stream
}

// openQuery asks helper `to` for the blocks; name is how messages name it
// (engine.Env.Peer). A helper that restarted since the connection was
// made (network.ErrPeerRestarted before any block) never read the query:
// it is asked once more on a new connection (a query changes nothing).
func openQuery(ctx context.Context, net network.Dialer, to, name string, q protocol.Msg, blocks []blockPlan, n, bw int) (*peerStream, error) {
	send := func() (*network.Stream, error) {
		s, err := net.Open(ctx, to)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			s.SetDeadline(dl)
		}
		if err := s.WriteFrame(protocol.Marshal(q)); err != nil {
			s.Finish()
			return nil, fmt.Errorf("sending the query to %s: %w", name, err)
		}
		s.CloseWrite()
		return s, nil
	}
	s, err := send()
	if err != nil {
		return nil, err
	}
	ps := &peerStream{name: name, blocks: make(chan []uint64, 2), streams: []*network.Stream{s}}
	go func() {
		defer close(ps.blocks)
		got, err := ps.receive(ctx, s, blocks, n, bw)
		if got == 0 && errors.Is(err, network.ErrPeerRestarted) {
			if s, err = send(); err == nil {
				ps.mu.Lock()
				ps.streams = append(ps.streams, s)
				ps.mu.Unlock()
				_, err = ps.receive(ctx, s, blocks, n, bw)
			}
		}
		ps.err = err
	}()
	return ps, nil
}

// finish releases the query's streams.
func (ps *peerStream) finish() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, s := range ps.streams {
		s.Finish()
	}
}

// bytes are what the query's streams sent and received.
func (ps *peerStream) bytes() (sent, recv uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, s := range ps.streams {
		sent, recv = sent+uint64(s.Sent()), recv+uint64(s.Received())
	}
	return sent, recv
}

// receive reads the blocks from s onto the channel: how many it passed
// on, and the first error.
func (ps *peerStream) receive(ctx context.Context, s *network.Stream, blocks []blockPlan, n, bw int) (got int, err error) {
	next := func() (protocol.Msg, error) {
		m, err := rpc.ReadReply(ctx, s, ps.name)
		if e, ok := err.(*protocol.Error); ok {
			return nil, protocol.Errorf(e.Code, "%s: %s", ps.name, e.Msg)
		}
		return m, err
	}
	for _, want := range blocks {
		m, err := next()
		if err != nil {
			return got, err
		}
		h, ok := m.(*protocol.Block)
		if !ok || int(h.Seg) != want.seg || int(h.W0) != want.w0 || int(h.NW) != want.nw {
			return got, fmt.Errorf("%s sent %v where block %+v was due", ps.name, m.Type(), want)
		}
		buf := getBuf(bw * n)[:h.TailWords(n)]
		if err := s.ReadWords(buf); err != nil {
			putBuf(buf)
			if ctx.Err() != nil || network.IsTimeout(err) {
				return got, fmt.Errorf("%s did not answer in time", ps.name)
			}
			return got, fmt.Errorf("%s: reading a block: %w", ps.name, err)
		}
		select {
		case ps.blocks <- buf:
			got++
		case <-ctx.Done():
			putBuf(buf)
			return got, ctx.Err()
		}
	}
	m, err := next()
	if err != nil {
		return got, err
	}
	if _, ok := m.(*protocol.BlocksEnd); !ok {
		return got, fmt.Errorf("%s sent %v after the last block", ps.name, m.Type())
	}
	return got, nil
}

// serveQuery answers an entry's query as a helper: check the query is one
// this cluster allows and the row maps agree, then stream this party's
// selected columns block by block.
func (e *Engine) serveQuery(ctx context.Context, r engine.Request) protocol.Msg {
	q := r.Msg.(*protocol.Query)
	sel, perr := e.selection(q.Dim, q.Beta, q.Plus, q.Minus)
	if perr != nil {
		return perr
	}
	return e.serveColumns(ctx, r, q.Digest, sel, int(q.BlockWords))
}

// serveQueryBatch answers an entry's batch of queries as a helper: each
// probe is checked as a Query is, and the union of their columns streams
// once.
func (e *Engine) serveQueryBatch(ctx context.Context, r engine.Request) protocol.Msg {
	q := r.Msg.(*protocol.QueryBatch)
	if bmax, _ := e.p.Batch(); len(q.Probes) > bmax {
		return protocol.Errorf(protocol.CodeBadRequest, "a batch of %d queries; this cluster batches at most %d", len(q.Probes), bmax)
	}
	sels := make([]sharing.Selection, len(q.Probes))
	for i, pr := range q.Probes {
		var perr *protocol.Error
		if sels[i], perr = e.selection(q.Dim, q.Beta, pr.Plus, pr.Minus); perr != nil {
			return protocol.Errorf(perr.Code, "query %d of the batch: %s", i, perr.Msg)
		}
	}
	u, _ := sharing.Union(sels)
	return e.serveColumns(ctx, r, q.Digest, u, int(q.BlockWords))
}

// selection is the selected columns of a query T_beta(y) = (plus, minus)
// this cluster allows; it refuses another weight beta (a wider query
// would hand the entry more of every row's shares, beta = d: all of them,
// than the cluster's protocol gives it), another dimension, or an invalid
// T_beta(y).
func (e *Engine) selection(dim, beta uint16, plus, minus []uint64) (sharing.Selection, *protocol.Error) {
	if int(beta) != e.p.Beta() {
		return sharing.Selection{}, protocol.Errorf(protocol.CodeBadRequest, "query of weight beta = %d; this cluster queries with beta = %d", beta, e.p.Beta())
	}
	if int(dim) != e.p.Dim() {
		return sharing.Selection{}, protocol.Errorf(protocol.CodeBadRequest, "query of dimension %d, cluster uses %d", dim, e.p.Dim())
	}
	y := template.Ternary{Dim: int(dim), Plus: plus, Minus: minus}
	if err := y.Validate(int(beta)); err != nil {
		return sharing.Selection{}, protocol.Errorf(protocol.CodeBadRequest, "query: %v", err)
	}
	return sharing.NewSelection(y), nil
}

// serveColumns streams this party's columns sel of every row, in blocks
// of bw row words, once the row maps agree.
func (e *Engine) serveColumns(ctx context.Context, r engine.Request, digest protocol.Digest, sel sharing.Selection, bw int) protocol.Msg {
	if want := blockWords(e.p, len(sel.Cols)); bw != want {
		return protocol.Errorf(protocol.CodeBadRequest, "blocks of %d words, cluster uses %d", bw, want)
	}
	if err := e.AwaitDigest(ctx, r.From.Name, digest); err != nil {
		return err
	}
	n := len(sel.Cols)
	// Copy block k+1 (one memmove per column) while block k is on the wire:
	// one large Write per block keeps the transport's send loop busy.
	type ready struct {
		b   blockPlan
		buf []uint64
		err error
	}
	blocks := plan(digest, bw)
	next := make(chan ready, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(next)
		for _, b := range blocks {
			buf := getBuf(b.nw * n)
			seg := e.Shares(b.seg)
			e.RLock()
			err := seg.Gather(buf, sel, b.w0, b.w0+b.nw)
			e.RUnlock()
			select {
			case next <- ready{b, buf, err}:
			case <-stop:
				putBuf(buf)
				return
			}
		}
	}()
	s := r.Stream
	for rd := range next {
		if rd.err != nil {
			return protocol.Errorf(protocol.CodeInternal, "gather: %v", rd.err)
		}
		err := s.WriteFrame(protocol.Marshal(&protocol.Block{Seg: uint8(rd.b.seg), W0: uint32(rd.b.w0), NW: uint32(rd.b.nw)}))
		if err == nil {
			err = s.WriteWords(rd.buf)
		}
		putBuf(rd.buf)
		if err != nil {
			return nil // the entry went away
		}
	}
	e.RLock()
	deleted := e.Digest().DeletedSince(digest)
	e.RUnlock()
	if deleted { // a block may hold an erased share
		return protocol.Errorf(protocol.CodeInconsistent, "%s: a row was deleted during the query; retry", e.env.Self)
	}
	return &protocol.BlocksEnd{}
}

// Block buffers are reused across queries: each is one streamed block.
var bufPool sync.Pool

func getBuf(n int) []uint64 {
	if b, ok := bufPool.Get().(*[]uint64); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]uint64, n)
}

func putBuf(b []uint64) { bufPool.Put(&b) }
