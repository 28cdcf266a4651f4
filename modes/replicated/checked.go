package replicated

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Checked products of hidden probes (docs/HIDDEN-PROBES.md, "Checking the
// products"; the algebra in sharing/replicated/products.go). Holder j
// verifies two product shares: its successor's (check j+1: j is its
// P_(i-1), with X over its next store, the share x_(j+1)) and its
// predecessor's (check j-1: j is its P_(i+1), with X over its own store,
// the share x_j, and the predecessor's vector, which it receives). It
// sends the decider both parts with its own vector; the decider answers
// only if every check holds.

// checkPeers are holder j's pair keys: with its predecessor (check j+1's
// verifiers' key, and the pair mask H(k_(j-1,j))) and its successor
// (check j-1's key, and H(k_(j,j+1))).
type checkPeers struct {
	pred, succ   [32]byte
	predI, succI int
}

func (h *Holder[E]) checkPeers() (*checkPeers, error) {
	self := h.Self()
	cp := &checkPeers{predI: (self + 2) % replicated.Holders, succI: (self + 1) % replicated.Holders}
	var ok1, ok2 bool
	cp.pred, ok1 = h.env.PairKeys[h.p.Party(cp.predI).Name]
	cp.succ, ok2 = h.env.PairKeys[h.p.Party(cp.succI).Name]
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s shares no key with the other share holders, so it cannot check hidden probes' products; start it with its identity key", h.env.Self)
	}
	return cp, nil
}

// checkSums are a holder's sums X for both its checks over the live rows
// of one view: low = X_(j+1) of check j+1 (over its next store), high =
// X_j of check j-1 (over its own store); CheckRounds x d each. Read only
// once made.
type checkSums[E additive.Elem] struct {
	digest    protocol.Digest
	segs      []*segSums[E]
	low, high []E
}

// segSums are one segment's part of the sums, what it covers, and the
// weights of its rows (both checks', in Challenges.Grow's layout; they
// depend on the row's place alone, so they are only ever appended to).
type segSums[E additive.Elem] struct {
	rows, live int
	low, high  []E
	rl, rh     []uint16 // the rows' weights of both checks (Challenges.Grow)
}

// erasures are the shares a holder's stores erased or replaced (a
// reshare) in the rows the check sums cover, since the sums last looked:
// the sums take out what they had added and add the row as it is now.
// pair.Erase and pair.Put record them under the rows' write lock; sums
// takes them, and sets what it covers, under the read lock as the one
// scan running. Kept only where probes are hidden; nothing is recorded
// before the first sums (a start's replay).
type erasures[E additive.Elem] struct {
	segs    [][]erased[E]
	covered []int // rows of each segment the sums cover
}

type erased[E additive.Elem] struct {
	seq       int
	own, next []E // the share as the sums had it
}

// record keeps row seq's share (own, next) before it changes, if the sums
// cover it.
func (e *erasures[E]) record(seg, seq int, own, next *additive.Store[E]) error {
	if e == nil || seg >= len(e.covered) || seq >= e.covered[seg] {
		return nil
	}
	d := own.Dim()
	o, err := own.Row(seq, make([]E, d))
	if err != nil {
		return err
	}
	n, err := next.Row(seq, make([]E, d))
	if err != nil {
		return err
	}
	e.segs[seg] = append(e.segs[seg], erased[E]{seq, o, n})
	return nil
}

// warmEvery is how often warmChecks brings the check sums to the rows of
// now between probes.
const warmEvery = time.Second

// warmChecks keeps the check sums of hidden probes' products current
// between probes: without it the first probe after a start or a bulk
// enrollment sums the weights over every new row (seconds at 10^6 rows)
// before it is scored. It runs a pass with no probe (scanAll) at once
// and every warmEvery; one that finds nothing changed costs a view. A
// probe that comes meanwhile waits for the pass, as it would have summed
// the same rows itself.
func (h *Holder[E]) warmChecks(ctx context.Context) {
	t := time.NewTicker(warmEvery)
	defer t.Stop()
	for ctx.Err() == nil {
		h.scans.Do(ctx, &scan[E]{warm: true})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sums returns the check sums of view v (the caller holds the read lock
// and is the one scan running: h.scans).
func (h *Holder[E]) sums(v blindbase.View) (*checkSums[E], error) {
	if c := h.chk.sums; c != nil && c.digest.Equal(v.Digest) {
		return c, nil
	}
	if h.chk.low == nil {
		cp, err := h.checkPeers()
		if err != nil {
			return nil, err
		}
		self, sh := h.Self(), h.tagShard()
		if h.chk.low, err = replicated.NewChallenges[E](&cp.pred, (self+1)%replicated.Holders, sh); err != nil {
			return nil, err
		}
		if h.chk.high, err = replicated.NewChallenges[E](&cp.succ, (self+2)%replicated.Holders, sh); err != nil {
			return nil, err
		}
	}
	md := replicated.CheckRounds * h.p.Dim()
	next := &checkSums[E]{digest: v.Digest, low: make([]E, md), high: make([]E, md)}
	for s := range v.Digest {
		var old *segSums[E]
		if c := h.chk.sums; c != nil && s < len(c.segs) {
			old = c.segs[s]
		}
		sg := h.segmentSums(s, v, old)
		next.segs = append(next.segs, sg)
		for k := range md {
			next.low[k] += sg.low[k]
			next.high[k] += sg.high[k]
		}
	}
	h.chk.sums = next
	return next, nil
}

// segmentSums is segment s's part of the sums at view v, from old's (rows
// appended are added, rows erased or replaced since are taken out and
// added as they are now).
func (h *Holder[E]) segmentSums(s int, v blindbase.View, old *segSums[E]) *segSums[E] {
	d := h.p.Dim()
	md := replicated.CheckRounds * d
	rows := int(v.Digest[s].Rows)
	sg := &segSums[E]{rows: rows, live: int(v.Digest[s].Live), low: make([]E, md), high: make([]E, md)}
	er := h.chk.erased
	for len(er.segs) <= s {
		er.segs, er.covered = append(er.segs, nil), append(er.covered, 0)
	}
	changed := er.segs[s]
	er.segs[s], er.covered[s] = nil, rows // from now on, changes to these rows are recorded
	if old != nil {
		sg.rl, sg.rh = old.rl, old.rh // a row's weights never change
	}
	// The weights of the rows new to the segment.
	have := 0
	if old != nil && old.rows <= rows {
		have = old.rows
	} else {
		sg.rl, sg.rh = nil, nil // (a segment never shrinks; if it did, its weights start over)
	}
	sg.rl = h.chk.low.Grow(sg.rl, s, have, rows)
	sg.rh = h.chk.high.Grow(sg.rh, s, have, rows)
	st := h.Shares(s)
	from := 0
	if old != nil && old.rows <= rows {
		copy(sg.low, old.low)
		copy(sg.high, old.high)
		from = old.rows
		seen := map[int]bool{}
		for _, e := range changed { // the first record of a row is the share the sums had
			if e.seq >= old.rows || seen[e.seq] {
				continue
			}
			seen[e.seq] = true
			h.m.summed.Inc()
			addRow(sg.low, sg.rl, e.seq, e.next, d, true)
			addRow(sg.high, sg.rh, e.seq, e.own, d, true)
			own, _ := st.own.Row(e.seq, make([]E, d))
			next, _ := st.next.Row(e.seq, make([]E, d))
			addRow(sg.low, sg.rl, e.seq, next, d, false)
			addRow(sg.high, sg.rh, e.seq, own, d, false)
		}
	}
	if from == rows {
		return sg
	}
	h.m.summed.Add(float64(rows - from))
	// Blocks of rows (within a chunk of the column-major stores, their
	// weights kept in cache), every column of a block in turn.
	const block = 256
	for lo := from; lo < rows; {
		n := min(block, additive.ChunkRows-lo%additive.ChunkRows, rows-lo)
		if lo%2 == 1 {
			n = 1 // then the blocks start on a pair of rows (k = 8's weights)
		}
		for _, side := range []struct {
			st *additive.Store[E]
			w  []uint16
			x  []E
		}{{st.next, sg.rl, sg.low}, {st.own, sg.rh, sg.high}} {
			for j := range d {
				replicated.Accumulate(side.x, d, j, side.w, lo, side.st.Column(j, lo)[:n])
			}
		}
		lo += n
	}
	return sg
}

// addRow adds (or with neg, subtracts) row seq's weights (of a
// segment's weights w) times share x into X (CheckRounds x d).
func addRow[E additive.Elem](x []E, w []uint16, seq int, share []E, d int, neg bool) {
	for t := range replicated.CheckRounds {
		r := replicated.Weight[E](w, seq, t)
		if neg {
			r = -r
		}
		xt := x[t*d : (t+1)*d]
		for j, v := range share {
			xt[j] += r * v
		}
	}
}

// probeMasks is what a holder's permute step of a hidden probe leaves
// for its checks of the same probe (checkParts), so that the
// permutation and the masks are computed once: pi (pi[row] = position),
// the predecessor's sigma mask with the dead rows' constant, and the two
// pair masks H(k_(j-1,j)) and H(k_(j,j+1)), in position order.
type probeMasks[E additive.Elem] struct {
	pi               []uint32
	back, pred, succ []E
}

// permuteHidden permutes and masks a hidden probe's product share z into
// vec.own: sigma's mask of this holder, and the zero-sharing
// H(k_(j-1,j)) - H(k_(j,j+1)) of the probe (its context), which no single
// other holder can remove; it keeps what the checks need (probeMasks).
func (h *Holder[E]) permuteHidden(perm *additive.Permuter, vec *vectors[E], z []E, sigma *additive.Seed, probe [32]byte) error {
	cp, err := h.checkPeers()
	if err != nil {
		return err
	}
	n := vec.Rows()
	m := &probeMasks[E]{pi: make([]uint32, n), back: make([]E, n), pred: make([]E, n), succ: make([]E, n)}
	if err := additive.PermuteMaskAll(perm, m.pi, vec.Live, sigma, replicated.Holders,
		additive.Masked[E]{Dst: vec.own, Src: z, Holder: h.Self()}, additive.Masked[E]{Dst: m.back, Holder: cp.predI}); err != nil {
		return err
	}
	if err := replicated.PairMask(m.pred, &cp.pred, cp.predI, h.tagShard(), probe); err != nil {
		return err
	}
	if err := replicated.PairMask(m.succ, &cp.succ, h.Self(), h.tagShard(), probe); err != nil {
		return err
	}
	for p := range vec.own {
		vec.own[p] += m.pred[p] - m.succ[p]
	}
	vec.masks = m
	return nil
}

// checkParts computes this holder's two parts of a hidden probe's checks
// (CheckLow for check j+1, CheckHigh for check j-1) from its vector's
// view and masks (permuteHidden's), its query shares and its
// predecessor's vector pred, and the digest of pred, which the decider
// compares with the vector it got. It uses up vec.masks.
func (h *Holder[E]) checkParts(vec *vectors[E], pr *probe[E], qid [16]byte, pred []E) ([]byte, error) {
	cp, err := h.checkPeers()
	if err != nil {
		return nil, err
	}
	m := vec.masks
	if m == nil {
		return nil, fmt.Errorf("replicated: the checks of a probe whose masks are gone")
	}
	vec.masks = nil
	self, sh := h.Self(), h.tagShard()
	d := h.p.Dim()
	// The predecessor's vector less its sigma mask and dead rows'
	// constant, plus the pair mask it subtracted with this holder:
	// z_(j-1) + H(k_(j-2,j-1)).
	back := m.back
	for p := range back {
		back[p] = pred[p] - back[p] + m.pred[p]
	}
	// B of check j+1: H(k_(j,j+1)), which this holder subtracted.
	a, b := make([]E, replicated.CheckRounds), make([]E, replicated.CheckRounds)
	h.rowSums(a, vec.sums, false, vec.View, m.pi, back)
	h.rowSums(b, vec.sums, true, vec.View, m.pi, m.succ)
	size := replicated.CheckPartSize(d)
	out := make([]E, 2*size)
	blLow, err := replicated.NewBlinds[E](&cp.pred, (self+1)%replicated.Holders, sh, pr.context, d)
	if err != nil {
		return nil, err
	}
	blHigh, err := replicated.NewBlinds[E](&cp.succ, cp.predI, sh, pr.context, d)
	if err != nil {
		return nil, err
	}
	replicated.CheckLow(out[:size], vec.sums.low, pr.y[1], b, blLow)
	replicated.CheckHigh(out[size:], vec.sums.high, pr.y[0], a, blHigh)
	g := replicated.VectorDigest(qid, cp.predI, h.p.Bits, additive.ElemBytes(pred))
	return protocol.AppendReplChecks(nil, additive.ElemBytes(out[:size]), additive.ElemBytes(out[size:]), g), nil
}

// rowSums adds sum_rows r^t v[pi(row)] into sums, segment by segment,
// with the weights of one side of the view's sums (low: of check j+1).
func (h *Holder[E]) rowSums(sums []E, cs *checkSums[E], low bool, v blindbase.View, pi []uint32, vals []E) {
	const chunk = 4096
	g := make([]E, chunk)
	for s := range v.Digest {
		w := cs.segs[s].rh
		if low {
			w = cs.segs[s].rl
		}
		for lo := v.Off[s]; lo < v.Off[s+1]; lo += chunk {
			n := min(chunk, v.Off[s+1]-lo)
			for i := range n {
				g[i] = vals[pi[lo+i]]
			}
			replicated.WeightedSums(sums, w, lo-v.Off[s], g[:n])
		}
	}
}

// checkBlobSize is the bytes of a holder's check parts and digest.
func checkBlobSize(d, bits int) int {
	return protocol.ReplChecksSize(replicated.CheckPartSize(d), bits)
}

// exchange sends this holder's vector of query qid to its successor and
// returns its predecessor's (both check it), and the bytes the sending
// moved.
func (h *Holder[E]) exchange(ctx context.Context, qid [16]byte, w []E) ([]E, uint64, error) {
	succ := h.p.Party((h.Self() + 1) % replicated.Holders).Name
	sent := make(chan error, 1)
	var moved uint64
	go func() {
		m := &protocol.HiddenVector{Query: qid, Rows: uint32(len(w)), Bits: uint8(h.p.Bits)}
		s, err := blindbase.SendShares(ctx, h.env.Net, succ, m, additive.ElemBytes(w))
		if err == nil {
			_, err = rpc.ReadReply(ctx, s, succ)
			moved = uint64(s.Sent() + s.Received())
			s.Finish()
		}
		sent <- err
	}()
	in, err := h.vectorsIn.take(ctx, qid)
	if err == nil && in.vec == nil {
		err = fmt.Errorf("%s did not score this probe: %s", h.p.Party((h.Self()+2)%replicated.Holders).Name, in.skipped)
	}
	if serr := <-sent; serr != nil {
		h.skipVectors(serr, qid) // (a query given up on: the successor must not wait for it)
		if err == nil {
			err = fmt.Errorf("sending %s the vector it checks: %w", succ, serr)
		}
	}
	if err != nil {
		return nil, moved, err
	}
	if len(in.vec) != len(additive.ElemBytes(w)) {
		return nil, moved, fmt.Errorf("the predecessor's vector holds %d bytes, for %d rows", len(in.vec), len(w))
	}
	return additive.ViewElems[E](in.vec), moved, nil
}

// skipVectors tells this holder's successor that it will send no vector
// of the probes qids (refused here, or not scored), so that the successor
// does not wait for them; and forgets what its predecessor sent of them.
// Best effort: the successor otherwise waits until its query's deadline.
func (h *Holder[E]) skipVectors(why error, qids ...[16]byte) {
	succ := h.p.Party((h.Self() + 1) % replicated.Holders).Name
	msg := ""
	if why != nil {
		msg = why.Error()
		if len(msg) > protocol.MaxMessage {
			msg = msg[:protocol.MaxMessage]
		}
	}
	for _, qid := range qids {
		h.vectorsIn.drop(qid)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), contactWait(h.p))
			defer cancel()
			rpc.Call(ctx, h.env.Net, succ, &protocol.HiddenVector{Query: qid, Bits: uint8(h.p.Bits), None: true, Why: msg})
		}()
	}
}

// takeVector receives a hidden probe's vector from this holder's
// predecessor, which this holder checks.
func (h *Holder[E]) takeVector(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.HiddenVector)
	pred := h.p.Party((h.Self() + 2) % replicated.Holders).Name
	switch {
	case r.From.Name != pred:
		return protocol.Errorf(protocol.CodeForbidden, "only %s sends %s the vectors it checks", pred, h.env.Self)
	case !h.p.HideProbes():
		return protocol.Errorf(protocol.CodeBadRequest, "a hidden probe's vector in a cluster that does not hide probes")
	}
	if m.None { // the predecessor will not score this probe
		why := m.Why
		if why == "" {
			why = "it did not score it"
		}
		if perr := h.vectorsIn.put(m.Query, mail{skipped: why}); perr != nil {
			return perr
		}
		return &protocol.HiddenVectorOK{}
	}
	if perr := blindbase.CheckShare(h.p.Params, int(m.Bits), 1, m.Rows); perr != nil {
		return perr
	}
	// At most the rows this holder has and a batch more (a commit may
	// reach the predecessor first): a deviating predecessor cannot make it
	// hold more than maxSlots vectors of its own size.
	if have := h.Stats().Rows; int(m.Rows) > have+protocol.MaxBatch {
		return protocol.Errorf(protocol.CodeBadRequest, "a vector of %d rows; %s has %d", m.Rows, h.env.Self, have)
	}
	size := m.TailSize()
	b, err := network.ReadGrowing(r.Stream, make([]byte, 0, min(size, 1<<20)), size)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "reading the vector: %v", err)
	}
	if perr := h.vectorsIn.put(m.Query, mail{vec: b}); perr != nil {
		return perr
	}
	return &protocol.HiddenVectorOK{}
}

// mailbox holds the vectors a holder's predecessor sent, until the
// holder's own pass of the same probe takes them. A probe this holder has
// given up on (taken, refused, or its wait ended) is remembered for keep,
// and what comes late for it is dropped; a full mailbox makes room by
// dropping its oldest vector, so vectors that nobody will take (a
// predecessor's, or a device's refused probes) cannot shut it.
type mailbox struct {
	mu    sync.Mutex
	slots map[[16]byte]*slot
	gone  map[[16]byte]time.Time
	keep  time.Duration // a query's longest life (the identify timeout)
}

type slot struct {
	v  chan mail
	at time.Time
}

// mail is a predecessor's vector of a probe, or why it sends none.
type mail struct {
	vec     []byte
	skipped string
}

// maxSlots bounds the vectors waiting (two batches of the largest size).
const maxSlots = 2 * protocol.MaxHiddenBatch

// prune forgets what is older than a query may live (caller holds mu).
func (mb *mailbox) prune(now time.Time) {
	if mb.keep <= 0 {
		mb.keep = 2 * time.Minute
	}
	if mb.slots == nil {
		mb.slots, mb.gone = map[[16]byte]*slot{}, map[[16]byte]time.Time{}
	}
	for q, s := range mb.slots {
		if now.Sub(s.at) > mb.keep {
			delete(mb.slots, q)
		}
	}
	for q, at := range mb.gone {
		if now.Sub(at) > mb.keep {
			delete(mb.gone, q)
		}
	}
}

// slot is qid's slot, made if need be (caller holds mu).
func (mb *mailbox) slot(qid [16]byte, now time.Time) *slot {
	s, ok := mb.slots[qid]
	if !ok {
		if len(mb.slots) >= maxSlots {
			var oldest [16]byte
			first := true
			for q, o := range mb.slots {
				if first || o.at.Before(mb.slots[oldest].at) {
					oldest, first = q, false
				}
			}
			delete(mb.slots, oldest)
		}
		s = &slot{v: make(chan mail, 1), at: now}
		mb.slots[qid] = s
	}
	return s
}

func (mb *mailbox) put(qid [16]byte, b mail) *protocol.Error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	now := time.Now()
	mb.prune(now)
	if _, late := mb.gone[qid]; late {
		return nil // given up on here: nobody will take it
	}
	select {
	case mb.slot(qid, now).v <- b:
		return nil
	default:
		return protocol.Errorf(protocol.CodeBadRequest, "a second vector for one hidden probe")
	}
}

// len is the vectors waiting.
func (mb *mailbox) len() int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return len(mb.slots)
}

// drop gives up on a probe: its slot goes, and what comes for it later is
// dropped.
func (mb *mailbox) drop(qid [16]byte) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	now := time.Now()
	mb.prune(now)
	delete(mb.slots, qid)
	mb.gone[qid] = now
}

func (mb *mailbox) take(ctx context.Context, qid [16]byte) (mail, error) {
	mb.mu.Lock()
	now := time.Now()
	mb.prune(now)
	s := mb.slot(qid, now)
	mb.mu.Unlock()
	defer mb.drop(qid)
	select {
	case b := <-s.v:
		return b, nil
	case <-ctx.Done():
		return mail{}, fmt.Errorf("the vector to check did not come: %w", ctx.Err())
	}
}
