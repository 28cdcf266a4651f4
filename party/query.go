package party

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
	"github.com/idface/idface/transport"
)

// digestWait bounds how long a helper waits for its row map to catch up
// with the entry's (a commit may reach parties a moment apart).
const digestWait = 2 * time.Second

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

// blockWords is the number of 64-row words per streamed block: cfg.Block
// bytes of 2*beta columns.
func (p *Party) blockWords() int { return max(1, p.cfg.Block/(2*p.cfg.Beta*8)) }

// identify runs a query as the entry party (paper Fig. "2pc_id" and App. H):
// T_beta, broadcast (y+, y-), then XOR and score every block as it arrives.
func (p *Party) identify(ctx context.Context, m *protocol.Identify) protocol.Msg {
	start := time.Now()
	resp := p.identifyAt(ctx, m)
	p.m.identifies.Add(1)
	p.m.identifyNanos.Add(int64(time.Since(start)))
	if ok, isOK := resp.(*protocol.IdentifyOK); isOK {
		p.m.bytesOut.Add(int64(ok.BytesSent))
		p.m.bytesIn.Add(int64(ok.BytesRecv))
	} else {
		p.m.identifyErrs.Add(1)
	}
	return resp
}

func (p *Party) identifyAt(ctx context.Context, m *protocol.Identify) protocol.Msg {
	tr := p.trPool.Get().(*template.Transformer)
	y := template.NewTernary(p.cfg.Dim)
	err := template.Apply(tr, m.Template, y)
	p.trPool.Put(tr)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	sel := sharing.NewSelection(y)
	n := 2 * sel.Beta
	bw := p.blockWords()

	// Snapshot the row map: the digest the helpers must match and the live
	// bits we score with. Rows below the snapshot never change.
	p.st.mu.RLock()
	g := p.st.digest()
	live := make([][]uint64, len(g))
	for s, seg := range p.st.segs {
		live[s] = append([]uint64(nil), seg.store.LiveWords(0, seg.store.Words())...)
	}
	p.st.mu.RUnlock()
	blocks := plan(g, bw)
	segOff := make([]int, len(g)+1) // global word offset of each segment
	for s, sd := range g {
		segOff[s+1] = segOff[s] + template.Words(int(sd.Rows))
	}

	q := &protocol.Query{Dim: uint16(p.cfg.Dim), Beta: uint16(sel.Beta), Plus: y.Plus, Minus: y.Minus, Digest: g, BlockWords: uint32(bw)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var peers []*peerStream
	for k, member := range p.cfg.Parties {
		if k == p.self {
			continue
		}
		ps, err := p.openQuery(ctx, member, q, blocks, n, bw)
		if err != nil {
			return asError(err, protocol.CodeUnavailable)
		}
		defer ps.s.Finish()
		peers = append(peers, ps)
	}

	scorers := make([]*sharing.Scorer, 2)
	for i := range scorers {
		scorers[i], _ = sharing.NewScorer(sel.Beta, int(m.TopK), -sel.Beta)
	}
	own := getBuf(bw * n)
	defer putBuf(own)
	cols := make([][][]uint64, 1+len(peers))
	var held [][]uint64
	var waited, scored time.Duration
	defer func() {
		p.m.waitNanos.Add(int64(waited))
		p.m.scoreNanos.Add(int64(scored))
	}()
	for _, b := range blocks {
		t0 := time.Now()
		var err error
		if cols[0], err = p.ownColumns(b, g, sel, own, cols[0][:0]); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		held = held[:0]
		t1 := time.Now()
		for i, ps := range peers {
			r, ok := <-ps.blocks
			if !ok {
				return asError(ps.err, protocol.CodeUnavailable)
			}
			held = append(held, r)
			cols[i+1] = sharing.BlockColumns(r, n, cols[i+1][:0])
		}
		t2 := time.Now()
		if err := scoreBlock(scorers, cols, segOff[b.seg]+b.w0, live[b.seg][b.w0:b.w0+b.nw]); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		waited += t2.Sub(t1)
		scored += time.Since(t2) + t1.Sub(t0)
		for _, r := range held {
			putBuf(r)
		}
	}
	for _, ps := range peers {
		if _, ok := <-ps.blocks; ok || ps.err != nil {
			return asError(fmt.Errorf("%s: %v", ps.name, ps.err), protocol.CodeUnavailable)
		}
	}

	matches := sharing.Merge(int(m.TopK), scorers[0].Result(), scorers[1].Result())
	resp := &protocol.IdentifyOK{Alpha: uint16(p.cfg.Alpha), Beta: uint16(p.cfg.Beta)}
	p.st.mu.RLock()
	for _, mt := range matches {
		s := 0
		for mt.Row >= segOff[s+1]*64 {
			s++
		}
		resp.Candidates = append(resp.Candidates, protocol.Candidate{ID: p.st.segs[s].id(mt.Row - segOff[s]*64), Score: int32(mt.Score)})
	}
	p.st.mu.RUnlock()
	resp.Accepted = len(matches) > 0 && matches[0].Score >= p.cfg.Threshold()
	for _, ps := range peers {
		resp.BytesSent += uint64(ps.s.Sent())
		resp.BytesRecv += uint64(ps.s.Received())
	}
	return resp
}

// scoreBlock splits one block's words over the two scorers (both cores).
func scoreBlock(sc []*sharing.Scorer, cols [][][]uint64, gw0 int, live []uint64) error {
	nw := len(cols[0][0])
	half := nw / 2
	var wg sync.WaitGroup
	var errs [2]error
	for i, r := range [2][2]int{{0, half}, {half, nw}} {
		if r[0] == r[1] {
			continue
		}
		sub := sharing.SliceWords(cols, r[0], r[1])
		wg.Go(func() { errs[i] = sc[i].Add(sub, gw0+r[0], live[r[0]:r[1]]) })
	}
	wg.Wait()
	if errs[0] != nil {
		return errs[0]
	}
	return errs[1]
}

// ownColumns returns this party's selected columns for block b: views into
// the store for blocks of complete words, which never change, and a copy
// made under the lock for the block holding a segment's last, partial word,
// which concurrent enrollments may still extend.
func (p *Party) ownColumns(b blockPlan, g protocol.Digest, sel sharing.Selection, buf []uint64, out [][]uint64) ([][]uint64, error) {
	seg := p.st.segs[b.seg]
	p.st.mu.RLock()
	defer p.st.mu.RUnlock()
	if (b.w0+b.nw)*64 <= int(g[b.seg].Rows) {
		return seg.store.Columns(sel, b.w0, b.w0+b.nw, out)
	}
	n := len(sel.Cols)
	if err := seg.store.Gather(buf[:b.nw*n], sel, b.w0, b.w0+b.nw); err != nil {
		return nil, err
	}
	return sharing.BlockColumns(buf[:b.nw*n], n, out), nil
}

// peerStream receives one helper's blocks in order on a channel; the
// channel closes after the last block or on the first error (in err).
type peerStream struct {
	name   string
	s      *transport.Stream
	blocks chan []uint64
	err    error
}

func (p *Party) openQuery(ctx context.Context, to Member, q *protocol.Query, blocks []blockPlan, n, bw int) (*peerStream, error) {
	s, err := p.dialer.Open(ctx, to.Name, to.Addr, to.Pin)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	if err := s.WriteFrame(protocol.Marshal(q)); err != nil {
		return nil, fmt.Errorf("sending the query to %s: %w", to.Name, err)
	}
	s.CloseWrite()
	ps := &peerStream{name: to.Name, s: s, blocks: make(chan []uint64, 2)}
	go func() {
		defer close(ps.blocks)
		ps.err = ps.receive(ctx, blocks, n, bw)
	}()
	return ps, nil
}

func (ps *peerStream) receive(ctx context.Context, blocks []blockPlan, n, bw int) error {
	next := func() (protocol.Msg, error) {
		b, err := ps.s.ReadFrame(protocol.MaxFrame)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ps.name, err)
		}
		m, err := protocol.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ps.name, err)
		}
		if e, ok := m.(*protocol.Error); ok {
			return nil, e
		}
		return m, nil
	}
	for _, want := range blocks {
		m, err := next()
		if err != nil {
			return err
		}
		h, ok := m.(*protocol.Block)
		if !ok || int(h.Seg) != want.seg || int(h.W0) != want.w0 || int(h.NW) != want.nw {
			return fmt.Errorf("%s sent %+v where block %+v was due", ps.name, m, want)
		}
		buf := getBuf(bw * n)[:want.nw*n]
		if err := ps.s.ReadWords(buf); err != nil {
			putBuf(buf)
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
		return fmt.Errorf("%s sent %T after the last block", ps.name, m)
	}
	return nil
}

// serveQuery answers an entry's query as a helper: check the row maps
// agree, then stream this party's selected columns block by block.
func (p *Party) serveQuery(ctx context.Context, s *transport.Stream, q *protocol.Query) *protocol.Error {
	y, err := q.Ternary()
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "query: %v", err)
	}
	if y.Dim != p.cfg.Dim {
		return protocol.Errorf(protocol.CodeBadRequest, "query of dimension %d, cluster uses %d", y.Dim, p.cfg.Dim)
	}
	if err := p.awaitDigest(q.Digest); err != nil {
		return err
	}
	p.m.queriesServed.Add(1)
	sel := sharing.NewSelection(y)
	n := 2 * sel.Beta
	bw := int(q.BlockWords)
	// Copy block k+1 (one memmove per column) while block k is on the wire:
	// one large Write per block keeps quic-go's send loop busy.
	type ready struct {
		b   blockPlan
		buf []uint64
		err error
	}
	blocks := plan(q.Digest, bw)
	next := make(chan ready, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(next)
		for _, b := range blocks {
			buf := getBuf(b.nw * n)
			seg := p.st.segs[b.seg]
			p.st.mu.RLock()
			err := seg.store.Gather(buf, sel, b.w0, b.w0+b.nw)
			p.st.mu.RUnlock()
			select {
			case next <- ready{b, buf, err}:
			case <-stop:
				putBuf(buf)
				return
			}
		}
	}()
	for r := range next {
		if r.err != nil {
			return protocol.Errorf(protocol.CodeInternal, "gather: %v", r.err)
		}
		err := s.WriteFrame(protocol.Marshal(&protocol.Block{Seg: uint8(r.b.seg), W0: uint32(r.b.w0), NW: uint32(r.b.nw)}))
		if err == nil {
			err = s.WriteWords(r.buf)
		}
		putBuf(r.buf)
		if err != nil {
			return nil // the entry went away
		}
	}
	p.reply(s, &protocol.BlocksEnd{})
	return nil
}

// awaitDigest waits until this party's row map equals the entry's, for at
// most digestWait; a lasting difference is refused, never answered.
func (p *Party) awaitDigest(want protocol.Digest) *protocol.Error {
	deadline := time.Now().Add(digestWait)
	t := time.AfterFunc(digestWait, p.st.changed.Broadcast)
	defer t.Stop()
	p.st.mu.RLock()
	defer p.st.mu.RUnlock()
	for {
		have := p.st.digest()
		if have.Equal(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return protocol.Errorf(protocol.CodeInconsistent, "%s's rows differ from the entry's (%s); refusing to answer. If a party was restarted, it catches up within seconds; otherwise check 'idface cluster status'", p.name, have.Diff(want))
		}
		p.st.changed.Wait()
	}
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
