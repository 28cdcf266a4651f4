package mpcface

import (
	"context"
	"errors"
	"fmt"
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

// identify runs a query as the entry party (paper Fig. "2pc_id" and App.
// H): T_beta, broadcast (y+, y-), then XOR and score every block as it
// arrives.
func (e *Engine) identify(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Identify)
	y, err := e.tr.Apply(m.Template)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	topK := int(m.TopK)
	if perr := engine.CheckTopK(e.p, topK); perr != nil {
		return perr
	}
	floor := engine.ScoreFloor(e.p) // scores below it are never kept
	sel := sharing.NewSelection(y)
	n := 2 * sel.Beta
	bw := blockWords(e.p)

	// Snapshot the row map: the digest the helpers must match and the live
	// bits we score with. Rows below the snapshot never change.
	e.RLock()
	g := e.Digest()
	live := make([][]uint64, len(g))
	for s := range g {
		st := e.Shares(s)
		live[s] = append([]uint64(nil), st.LiveWords(0, st.Words())...)
	}
	e.RUnlock()
	blocks := plan(g, bw)
	segOff := make([]int, len(g)+1) // global word offset of each segment
	for s, sd := range g {
		segOff[s+1] = segOff[s] + template.Words(int(sd.Rows))
	}

	q := &protocol.Query{Dim: uint16(e.p.Dim()), Beta: uint16(sel.Beta), Plus: y.Plus, Minus: y.Minus, Digest: g, BlockWords: uint32(bw)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var peers []*peerStream
	for _, name := range e.Peers() {
		pq := *q // the digest sealed for this helper
		var perr *protocol.Error
		if pq.Digest, perr = e.SealFor(name, g); perr != nil {
			return perr
		}
		ps, err := openQuery(network.Bulk(ctx), e.env.Net, name, &pq, blocks, n, bw)
		if err != nil {
			return engine.AsError(err, protocol.CodeUnavailable)
		}
		defer ps.s.Finish()
		peers = append(peers, ps)
	}

	scorers := make([]*sharing.Scorer, e.workers)
	for i := range scorers {
		scorers[i], _ = sharing.NewScorer(sel.Beta, topK, floor)
	}
	own := getBuf(bw * n)
	defer putBuf(own)
	cols := make([][][]uint64, 1+len(peers))
	var held [][]uint64
	var waited, scored time.Duration
	defer func() {
		e.m.wait.Add(waited.Seconds())
		e.m.score.Add(scored.Seconds())
	}()
	for _, b := range blocks {
		t0 := time.Now()
		var err error
		if cols[0], err = e.ownColumns(b, g, sel, own, cols[0][:0]); err != nil {
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
			cols[i+1] = sharing.BlockColumns(blk, n, cols[i+1][:0])
		}
		t2 := time.Now()
		if err := scoreBlock(scorers, cols, segOff[b.seg]+b.w0, live[b.seg][b.w0:b.w0+b.nw]); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		waited += t2.Sub(t1)
		scored += time.Since(t2) + t1.Sub(t0)
		for _, blk := range held {
			putBuf(blk)
		}
	}
	for _, ps := range peers {
		if _, ok := <-ps.blocks; ok || ps.err != nil {
			return engine.AsError(fmt.Errorf("%s: %v", ps.name, ps.err), protocol.CodeUnavailable)
		}
	}

	parts := make([][]sharing.Match, len(scorers))
	for i, sc := range scorers {
		parts[i] = sc.Result()
	}
	matches := sharing.Merge(topK, parts...)
	ans := engine.NewAnswer(e.p, topK)
	e.RLock()
	if e.Digest().DeletedSince(g) { // an erased share may have been scored
		e.RUnlock()
		return protocol.Errorf(protocol.CodeInconsistent, "a row was deleted during the query; retry")
	}
	for _, mt := range matches {
		s := 0
		for mt.Row >= segOff[s+1]*64 {
			s++
		}
		ans.Scored(e.ID(s, mt.Row-segOff[s]*64), mt.Score)
	}
	e.RUnlock()
	var sent, recv uint64
	for _, ps := range peers {
		sent += uint64(ps.s.Sent())
		recv += uint64(ps.s.Received())
	}
	ans.Bytes(sent, recv, sent+recv) // every server-to-server byte of the query
	return ans.Done()
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
	s      *network.Stream
	blocks chan []uint64
	err    error
}

func openQuery(ctx context.Context, net network.Dialer, to string, q *protocol.Query, blocks []blockPlan, n, bw int) (*peerStream, error) {
	s, err := net.Open(ctx, to)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	if err := s.WriteFrame(protocol.Marshal(q)); err != nil {
		s.Finish()
		return nil, fmt.Errorf("sending the query to %s: %w", to, err)
	}
	s.CloseWrite()
	ps := &peerStream{name: to, s: s, blocks: make(chan []uint64, 2)}
	go func() {
		defer close(ps.blocks)
		ps.err = ps.receive(ctx, blocks, n, bw)
	}()
	return ps, nil
}

func (ps *peerStream) receive(ctx context.Context, blocks []blockPlan, n, bw int) error {
	next := func() (protocol.Msg, error) {
		m, err := rpc.ReadReply(ctx, ps.s, ps.name)
		if e, ok := err.(*protocol.Error); ok {
			return nil, protocol.Errorf(e.Code, "%s: %s", ps.name, e.Msg)
		}
		return m, err
	}
	for _, want := range blocks {
		m, err := next()
		if err != nil {
			return err
		}
		h, ok := m.(*protocol.Block)
		if !ok || int(h.Seg) != want.seg || int(h.W0) != want.w0 || int(h.NW) != want.nw {
			return fmt.Errorf("%s sent %v where block %+v was due", ps.name, m.Type(), want)
		}
		buf := getBuf(bw * n)[:want.nw*n]
		if err := ps.s.ReadWords(buf); err != nil {
			putBuf(buf)
			if ctx.Err() != nil || network.IsTimeout(err) {
				return fmt.Errorf("%s did not answer in time", ps.name)
			}
			return fmt.Errorf("%s: reading a block: %w", ps.name, err)
		}
		select {
		case ps.blocks <- buf:
		case <-ctx.Done():
			putBuf(buf)
			return ctx.Err()
		}
	}
	m, err := next()
	if err != nil {
		return err
	}
	if _, ok := m.(*protocol.BlocksEnd); !ok {
		return fmt.Errorf("%s sent %v after the last block", ps.name, m.Type())
	}
	return nil
}

// serveQuery answers an entry's query as a helper: check the query is one
// this cluster allows and the row maps agree, then stream this party's
// selected columns block by block.
func (e *Engine) serveQuery(ctx context.Context, r engine.Request) protocol.Msg {
	q := r.Msg.(*protocol.Query)
	if int(q.Beta) != e.p.Beta() {
		// A wider query would hand the entry more of every row's shares
		// (beta = d: all of them) than the cluster's protocol gives it.
		return protocol.Errorf(protocol.CodeBadRequest, "query of weight beta = %d; this cluster queries with beta = %d", q.Beta, e.p.Beta())
	}
	y, err := q.Ternary()
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "query: %v", err)
	}
	if y.Dim != e.p.Dim() {
		return protocol.Errorf(protocol.CodeBadRequest, "query of dimension %d, cluster uses %d", y.Dim, e.p.Dim())
	}
	if int(q.BlockWords) != blockWords(e.p) {
		return protocol.Errorf(protocol.CodeBadRequest, "blocks of %d words, cluster uses %d", q.BlockWords, blockWords(e.p))
	}
	if err := e.AwaitDigest(ctx, r.From.Name, q.Digest); err != nil {
		return err
	}
	sel := sharing.NewSelection(y)
	n := 2 * sel.Beta
	// Copy block k+1 (one memmove per column) while block k is on the wire:
	// one large Write per block keeps the transport's send loop busy.
	type ready struct {
		b   blockPlan
		buf []uint64
		err error
	}
	blocks := plan(q.Digest, int(q.BlockWords))
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
	deleted := e.Digest().DeletedSince(q.Digest)
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
