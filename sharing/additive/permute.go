package additive

// Permute-and-mask (docs/BLIND-NOTES.md "Score-share kernel"): from a per-query seed sigma every
// share holder derives the same uniform permutation pi of the n rows and
// its own mask m_k, with sum_k m_k = 0 mod 2^k, and sends the decider
// out[pi(i)] = s_k[i] + m_k[pi(i)]. The decider adds the mu vectors,
// getting pi(s), and returns the best positions; the entry maps them back
// with pi^-1. docs/BLIND-NOTES.md has the uniformity argument.
//
// pi is Rao and Sandelius's shuffle: every row draws a uniform bucket out
// of B (a power of two, buckets of about 4096 rows), rows are scattered
// stably into their buckets, and each bucket is Fisher-Yates shuffled with
// unbiased bounded draws (Lemire's method with rejection). The scatter and
// every shuffle run in cache, and each bucket's draws sit at a known
// keystream offset, so rows scatter and buckets shuffle in parallel, and
// the entry inverts a position by replaying one bucket.

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

const (
	maxBucketBits = 16   // B <= 2^16: bucket ids take at most 2 bytes
	bucketRows    = 4096 // target rows per bucket: a shuffle stays in L1
	maxPermRows   = 1<<31 - 1
	minPermRows   = 1 << 15 // rows per worker worth a goroutine
)

// bucketBits returns log2 B for n rows: the least B with n/B <= rows
// (bucketRows; tests lower it to shuffle tiny n with several buckets).
func bucketBits(n, rows int) int {
	b := 0
	for b < maxBucketBits && n>>b > rows {
		b++
	}
	return b
}

// Permuter holds the reusable scratch of PermuteMask, Unpermute and
// Permutation. Workers is the number of goroutines (GOMAXPROCS when 0);
// outputs never depend on it. Not safe for concurrent use.
type Permuter struct {
	Workers int
	// bucketRows is the target rows per bucket: bucketRows when 0 (tests
	// lower it; every party must use the same).
	bucketRows int

	n, bbits, workers int
	ids               []byte  // bucket of each row: 1 byte (B <= 256) or 2, little-endian
	off               []int   // off[b]: first position of bucket b; off[B] = n
	draw              []int64 // draw[b]: index of bucket b's first Fisher-Yates draw
	cur               []int   // cur[w*B+b]: worker w's next position in bucket b
	work              []permWorker
	idx               []uint32
	tgt               []target
	first             []int32
	pairs             []uint64 // PermuteMaskPair's packed pairs
}

type permWorker struct {
	ks    keystream
	draws []byte
	buf   []byte
	rej   rejecter
}

// target is a position the entry maps back: in bucket b it holds the
// member of rank rank (row order); i is its index in the caller's list.
type target struct{ b, rank, i int }

// rejecter supplies redraws after a rejection from the bucket's own
// stream, so a rejection never shifts another bucket's draws.
type rejecter struct {
	ks  keystream
	b   int
	buf [64]byte
	i   int
}

func (r *rejecter) redraw(ks keystream, b int) uint32 {
	if r.b != b || r.ks.ctr == nil {
		r.ks = keystream{block: ks.block}
		r.ks.seek(labelReject, uint32(b), 0)
		r.b, r.i = b, len(r.buf)
	}
	if r.i == len(r.buf) {
		r.ks.fill(r.buf[:])
		r.i = 0
	}
	v := binary.LittleEndian.Uint32(r.buf[r.i:])
	r.i += 4
	return v
}

// shuffle is Fisher-Yates (Durstenfeld) on bucket b's segment a: for
// t = m-1..1 swap a[t] with a[j], j uniform in [0, t] by Lemire's
// multiply-and-reject on draw m-1-t. A rejection (probability < m/2^32
// per draw) redraws from the bucket's reject stream.
func shuffle[T uint8 | uint16 | uint32](a []T, draws []byte, ks keystream, rej *rejecter, b int) {
	m := len(a)
	if m < 2 {
		return
	}
	draws = draws[:4*(m-1)]
	for t := m - 1; t > 0; t-- {
		s := uint64(t + 1)
		x := uint64(binary.LittleEndian.Uint32(draws)) * s
		draws = draws[4:]
		if uint32(x) < uint32(s) {
			thr := uint32(-s) % uint32(s) // 2^32 mod s
			for uint32(x) < thr {
				x = uint64(rej.redraw(ks, b)) * s
			}
		}
		j := x >> 32
		a[t], a[j] = a[j], a[t]
	}
}

// drawsFor fills w.draws with bucket b's m-1 draws from the worker's
// shuffle keystream, which must be positioned at them.
func (w *permWorker) drawsFor(m int) []byte {
	n := 4 * max(m-1, 0)
	w.draws = grow(w.draws, n)
	w.ks.fill(w.draws)
	return w.draws
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// parallel runs f(w) for w < p.workers and waits.
func (p *Permuter) parallel(f func(w int)) {
	if p.workers == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for w := range p.workers {
		wg.Go(func() { f(w) })
	}
	wg.Wait()
}

// rowRange is worker w's rows for the bucket draw and the scatter.
func (p *Permuter) rowRange(w int) (int, int) {
	return p.n * w / p.workers, p.n * (w + 1) / p.workers
}

// bucketRange is worker w's buckets for the shuffles, balanced by rows.
func (p *Permuter) bucketRange(w int) (int, int) {
	B := 1 << p.bbits
	find := func(q int) int { // first bucket starting at or after q
		b, _ := slices.BinarySearch(p.off[:B], q)
		return b
	}
	lo, hi := find(p.n*w/p.workers), find(p.n*(w+1)/p.workers)
	if w == p.workers-1 {
		hi = B
	}
	return lo, hi
}

// layout derives the buckets of n rows from the seed: every row's bucket,
// the bucket offsets, each bucket's first draw, and every worker's
// scatter cursors (its rows go after the earlier workers' rows of the
// same bucket, so the scatter is stable whatever the number of workers).
func (p *Permuter) layout(ks keystream, n int) {
	rows := p.bucketRows
	if rows == 0 {
		rows = bucketRows
	}
	p.n, p.bbits = n, bucketBits(n, rows)
	p.workers = p.Workers
	if p.workers <= 0 {
		p.workers = runtime.GOMAXPROCS(0)
	}
	p.workers = max(min(p.workers, n/minPermRows), 1)
	for len(p.work) < p.workers {
		p.work = append(p.work, permWorker{})
	}
	B := 1 << p.bbits
	width := 1
	if p.bbits > 8 {
		width = 2
	}
	p.ids = grow(p.ids, width*n)
	p.cur = grow(p.cur, p.workers*B)
	clear(p.cur)
	p.parallel(func(w int) {
		r0, r1 := p.rowRange(w)
		ks := ks
		ks.seek(labelBucket, 0, uint64(width*r0))
		ids := p.ids[width*r0 : width*r1]
		ks.fill(ids)
		cnt, mask := p.cur[w*B:(w+1)*B], B-1
		if width == 1 {
			for _, v := range ids {
				cnt[int(v)&mask]++
			}
			return
		}
		for i := 0; i+1 < len(ids); i += 2 {
			cnt[int(binary.LittleEndian.Uint16(ids[i:]))&mask]++
		}
	})
	p.off = grow(p.off, B+1)
	p.draw = grow(p.draw, B+1)
	p.off[0], p.draw[0] = 0, 0
	for b := range B {
		m := 0
		for w := range p.workers { // counts become cursors
			c := p.cur[w*B+b]
			p.cur[w*B+b] = p.off[b] + m
			m += c
		}
		p.off[b+1] = p.off[b] + m
		p.draw[b+1] = p.draw[b] + int64(max(m-1, 0))
	}
}

func (p *Permuter) bucket(i int) int {
	if p.bbits <= 8 {
		return int(p.ids[i]) & (1<<p.bbits - 1)
	}
	return int(binary.LittleEndian.Uint16(p.ids[2*i:])) & (1<<p.bbits - 1)
}

// scatter moves src into dst bucket by bucket, keeping row order within a
// bucket (the stability the uniformity argument relies on). With live,
// deleted rows enter as dead.
func scatter[T uint8 | uint16 | uint32](p *Permuter, dst, src []T, live []uint64, dead T) {
	B := 1 << p.bbits
	p.parallel(func(w int) {
		r0, r1 := p.rowRange(w)
		cur := p.cur[w*B : (w+1)*B]
		switch {
		case live == nil && p.bbits <= 8:
			ids, mask := p.ids[r0:r1], byte(B-1)
			for i, v := range src[r0:r1] {
				b := ids[i] & mask
				dst[cur[b]] = v
				cur[b]++
			}
		case p.bbits <= 8:
			// A holder's rows are nearly all live: whole live words (64
			// rows) take the tight loop, the rest test each row.
			ids, mask := p.ids, byte(B-1)
			for i := r0; i < r1; {
				end := min(r1, i|63+1)
				if lw := live[i>>6]; lw == ^uint64(0) {
					for ; i < end; i++ {
						b := ids[i] & mask
						dst[cur[b]] = src[i]
						cur[b]++
					}
					continue
				}
				for ; i < end; i++ {
					v := src[i]
					if live[i>>6]>>uint(i&63)&1 == 0 {
						v = dead
					}
					b := ids[i] & mask
					dst[cur[b]] = v
					cur[b]++
				}
			}
		default:
			for i := r0; i < r1; i++ {
				v := src[i]
				if live != nil && live[i>>6]>>uint(i&63)&1 == 0 {
					v = dead
				}
				b := p.bucket(i)
				dst[cur[b]] = v
				cur[b]++
			}
		}
	})
}

// shuffleAll shuffles every bucket of dst in parallel, then calls after
// on each worker's positions [p0, p1) (for the masks).
func shuffleAll[T uint8 | uint16 | uint32](p *Permuter, dst []T, ks keystream, after func(pw *permWorker, p0, p1 int)) {
	p.parallel(func(w int) {
		b0, b1 := p.bucketRange(w)
		pw := &p.work[w]
		pw.ks = ks
		pw.ks.seek(labelShuffle, 0, uint64(p.draw[b0])*4)
		pw.rej.ks.ctr = nil
		for b := b0; b < b1; b++ {
			seg := dst[p.off[b]:p.off[b+1]]
			shuffle(seg, pw.drawsFor(len(seg)), ks, &pw.rej, b)
		}
		if after != nil {
			after(pw, p.off[b0], p.off[b1])
		}
	})
}

// PermuteMask is share holder `holder`'s (0-based, of mu) permute-and-mask
// step over the n = len(src) score shares src: dst[pi(i)] = src[i] +
// m_holder[pi(i)] mod 2^k, with pi and the masks derived from the query
// seed. A row whose live bit is clear (live == nil: all live) enters as
// DeadScore at holder 0 and 0 elsewhere, so the decider sees DeadScore.
//
// Masks telescope: with R_t = keystream(sigma, "mask", t) for t = 1..mu-1
// and R_0 = R_mu = 0, holder h adds R_(h+1) - R_h, so the masks sum to 0;
// each holder expands at most two keystreams whatever mu, and any mu-1
// masks are independent and uniform.
func PermuteMask[E Elem](p *Permuter, dst, src []E, live []uint64, seed *Seed, holder, mu int) error {
	n := len(src)
	switch {
	case len(dst) != n || n > maxPermRows:
		return fmt.Errorf("sharing: permute %d score shares into %d", n, len(dst))
	case mu < 2 || holder < 0 || holder >= mu:
		return fmt.Errorf("sharing: holder %d of mu = %d", holder, mu)
	case live != nil && len(live) < template.Words(n):
		return fmt.Errorf("sharing: live bitset has %d words, want %d", len(live), template.Words(n))
	case n > 0 && &dst[0] == &src[0]:
		return fmt.Errorf("sharing: permute in place: dst and src must differ")
	}
	ks, err := newKeystream(seed)
	if err != nil {
		return err
	}
	p.layout(ks, n)
	var dead E
	if holder == 0 {
		dead = E(DeadScore[E]())
	}
	scatter(p, dst, src, live, dead)
	shuffleAll(p, dst, ks, func(pw *permWorker, p0, p1 int) { addMask(pw, dst, ks, holder, mu, p0, p1) })
	return nil
}

// addMask adds holder's mask R_(holder+1) - R_holder to dst[p0:p1].
func addMask[E Elem](pw *permWorker, dst []E, ks keystream, holder, mu, p0, p1 int) {
	size := elemBits[E]() / 8
	pw.buf = grow(pw.buf, 8192)
	chunk := len(pw.buf) / size
	for k, t := range [2]int{holder + 1, holder} {
		if t == mu || t == 0 {
			continue // R_mu = R_0 = 0
		}
		pw.ks = keystream{block: ks.block}
		pw.ks.seek(labelMask, uint32(t), uint64(p0*size))
		for a := p0; a < p1; a += chunk {
			c := min(chunk, p1-a)
			pw.ks.fill(pw.buf[:c*size])
			m := viewElems[E](pw.buf[:c*size])
			if k == 0 {
				addInto(dst[a:a+c], m)
			} else {
				subInto(dst[a:a+c], m)
			}
		}
	}
}

// Unpermute maps permuted positions back to rows for the entry: rows[i] =
// pi^-1(positions[i]) for the permutation of n rows under seed. It replays
// the bucket draw and only the buckets holding the positions (the top-K),
// not the whole permutation.
func (p *Permuter) Unpermute(rows, positions []int, seed *Seed, n int) error {
	if len(rows) != len(positions) || n < 0 || n > maxPermRows {
		return fmt.Errorf("sharing: unpermute %d positions into %d rows (n = %d)", len(positions), len(rows), n)
	}
	for _, q := range positions {
		if q < 0 || q >= n {
			return fmt.Errorf("%w: position %d of %d", sharing.ErrRow, q, n)
		}
	}
	if len(positions) == 0 {
		return nil
	}
	ks, err := newKeystream(seed)
	if err != nil {
		return err
	}
	p.layout(ks, n)
	B := 1 << p.bbits
	// Position q is local index q - off[b] of bucket b; replaying b's
	// shuffle on the identity says which member, by rank in row order (the
	// scatter is stable), landed there.
	p.tgt = p.tgt[:0]
	for i, q := range positions {
		b, _ := slices.BinarySearch(p.off[:B+1], q+1) // first offset > q
		p.tgt = append(p.tgt, target{b: b - 1, rank: q, i: i})
	}
	slices.SortFunc(p.tgt, func(x, y target) int { return x.b - y.b })
	pw := &p.work[0]
	for i := 0; i < len(p.tgt); {
		b := p.tgt[i].b
		m := p.off[b+1] - p.off[b]
		p.idx = grow(p.idx, m)
		for t := range p.idx {
			p.idx[t] = uint32(t)
		}
		pw.ks = ks
		pw.ks.seek(labelShuffle, 0, uint64(p.draw[b])*4)
		pw.rej.ks.ctr = nil
		shuffle(p.idx, pw.drawsFor(m), ks, &pw.rej, b)
		for ; i < len(p.tgt) && p.tgt[i].b == b; i++ {
			p.tgt[i].rank = int(p.idx[p.tgt[i].rank-p.off[b]])
		}
	}
	// One pass over the rows finds the rank-th member of each bucket.
	slices.SortFunc(p.tgt, func(x, y target) int {
		if x.b != y.b {
			return x.b - y.b
		}
		return x.rank - y.rank
	})
	p.first = grow(p.first, max(B, 256))
	for b := range p.first {
		p.first[b] = -1
	}
	for t := len(p.tgt) - 1; t >= 0; t-- {
		p.first[p.tgt[t].b] = int32(t)
	}
	seen := p.cur[:B] // members seen so far, counted in target buckets only
	clear(seen)
	left := len(p.tgt)
	for r := 0; r < n && left > 0; r++ {
		var b int
		if p.bbits <= 8 { // the common case: skip rows of other buckets fast
			ids, first, mask := p.ids[:n], p.first[:256], byte(B-1)
			for r < n && first[ids[r]&mask] < 0 {
				r++
			}
			if r == n {
				break
			}
			b = int(ids[r] & mask)
		} else if b = p.bucket(r); p.first[b] < 0 {
			continue
		}
		t := p.first[b]
		c := seen[b]
		seen[b]++
		for ; int(t) < len(p.tgt) && p.tgt[t].b == b && p.tgt[t].rank == c; t++ {
			rows[p.tgt[t].i] = r
			left--
		}
		if int(t) == len(p.tgt) || p.tgt[t].b != b {
			t = -1 // bucket done
		}
		p.first[b] = t
	}
	return nil
}

// Permutation returns pi itself for n rows under seed: pi[i] is the
// position of row i. For tests and for an entry that wants every row.
func (p *Permuter) Permutation(seed *Seed, n int) ([]int, error) {
	if n < 0 || n > maxPermRows {
		return nil, fmt.Errorf("sharing: permutation of %d rows", n)
	}
	ks, err := newKeystream(seed)
	if err != nil {
		return nil, err
	}
	p.layout(ks, n)
	id := make([]uint32, n)
	for i := range id {
		id[i] = uint32(i)
	}
	inv := make([]uint32, n)
	scatter(p, inv, id, nil, 0)
	shuffleAll(p, inv, ks, nil)
	pi := make([]int, n)
	for q, r := range inv {
		pi[r] = q
	}
	return pi, nil
}

// SWAR lane-wise arithmetic mod 2^k on 8-byte words of element slices:
// clearing the top bit of every lane stops carries at the lane boundary,
// and the top bits are fixed up with XORs.
func hiBits[E Elem]() uint64 {
	if elemBits[E]() == 8 {
		return 0x8080808080808080
	}
	return 0x8000800080008000
}

func swarAdd(x, y, h uint64) uint64 { return (x&^h + y&^h) ^ ((x ^ y) & h) }
func swarSub(x, y, h uint64) uint64 { return ((x | h) - y&^h) ^ ((x ^ ^y) & h) }

// addInto sets dst += a lane-wise mod 2^k.
func addInto[E Elem](dst, a []E) {
	a = a[:len(dst)]
	h := hiBits[E]()
	db, ab := elemBytes(dst), elemBytes(a)
	i := 0
	for ; i+8 <= len(db); i += 8 {
		binary.NativeEndian.PutUint64(db[i:], swarAdd(binary.NativeEndian.Uint64(db[i:]), binary.NativeEndian.Uint64(ab[i:]), h))
	}
	for j := i / elemSize[E](); j < len(dst); j++ {
		dst[j] += a[j]
	}
}

// subInto sets dst -= a lane-wise mod 2^k.
func subInto[E Elem](dst, a []E) {
	a = a[:len(dst)]
	h := hiBits[E]()
	db, ab := elemBytes(dst), elemBytes(a)
	i := 0
	for ; i+8 <= len(db); i += 8 {
		binary.NativeEndian.PutUint64(db[i:], swarSub(binary.NativeEndian.Uint64(db[i:]), binary.NativeEndian.Uint64(ab[i:]), h))
	}
	for j := i / elemSize[E](); j < len(dst); j++ {
		dst[j] -= a[j]
	}
}

func elemSize[E Elem]() int { return elemBits[E]() / 8 }

// SumShares sets dst to the sum of the share vectors mod 2^k (the
// decider's first step): dst[q] = sum_k shares[k][q].
func SumShares[E Elem](dst []E, shares ...[]E) error {
	if err := checkShares(shares, len(dst)); err != nil {
		return err
	}
	copy(dst, shares[0])
	for _, s := range shares[1:] {
		addInto(dst, s)
	}
	return nil
}

func checkShares[E Elem](shares [][]E, n int) error {
	if len(shares) < 1 {
		return fmt.Errorf("sharing: no score shares")
	}
	for k, s := range shares {
		if len(s) != n {
			return fmt.Errorf("sharing: score share %d has %d entries, want %d", k, len(s), n)
		}
	}
	return nil
}

// TopK returns the (at most) k best positions of scores, read as signed
// k-bit values, whose score is at least threshold: best first, ties to the
// lower position. DeadScore is never returned.
func TopK[E Elem](scores []E, k, threshold int) ([]sharing.Match, error) {
	return Decide(k, threshold, 1, scores)
}

// decideTile is the number of positions summed per tile (in L1).
const decideTile = 4096

// Decide is the decider's kernel: it adds the mu permuted, masked vectors
// tile by tile (SWAR) and keeps the k best positions with score >=
// threshold, as TopK on their sum, on `workers` goroutines (GOMAXPROCS
// when <= 0) over position ranges. Words whose lanes all fall below the
// current cut are skipped with one SWAR comparison.
func Decide[E Elem](k, threshold, workers int, shares ...[]E) ([]sharing.Match, error) {
	if len(shares) < 1 {
		return nil, fmt.Errorf("sharing: no score shares")
	}
	n := len(shares[0])
	if err := checkShares(shares, n); err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, fmt.Errorf("sharing: top-k with k = %d, want >= 1", k)
	}
	threshold = max(threshold, DeadScore[E]()+1)
	if threshold > RingOf[E]().MaxScore() {
		return nil, nil
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(min(workers, n/(4*decideTile)), 1)
	results := make([][]sharing.Match, workers)
	var wg sync.WaitGroup
	for g := range workers {
		a, b := n*g/workers, n*(g+1)/workers
		a, b = a&^7, b&^7 // whole words per worker
		if g == workers-1 {
			b = n
		}
		wg.Go(func() { results[g] = decideRange(shares, a, b, k, threshold) })
	}
	wg.Wait()
	if workers == 1 {
		return results[0], nil
	}
	return sharing.Merge(k, results...), nil
}

// decideRange is Decide over positions [a, b) on one goroutine.
func decideRange[E Elem](shares [][]E, a, b, k, threshold int) []sharing.Match {
	top := make([]sharing.Match, 0, k)
	cut := threshold // a position is a candidate when its score >= cut
	h := hiBits[E]()
	bitsE := elemBits[E]()
	size := bitsE / 8
	lanesMask := uint64(1)<<bitsE - 1
	var acc [decideTile / 4]uint64 // decideTile elements of up to 2 bytes
	for t0 := a; t0 < b; t0 += decideTile {
		t1 := min(t0+decideTile, b)
		nw := (t1 - t0) * size / 8 // whole words; the tail is done per element
		words := acc[:nw]
		for s, sh := range shares {
			sb := elemBytes(sh[t0:t1])
			if s == 0 {
				for i := range words {
					words[i] = binary.NativeEndian.Uint64(sb[8*i:])
				}
				continue
			}
			for i := range words {
				words[i] = swarAdd(words[i], binary.NativeEndian.Uint64(sb[8*i:]), h)
			}
		}
		// Signed lanes become unsigned by flipping their top bit; a lane
		// u reaches the biased cut c iff u + (2^k - c) carries out.
		lanesPerWord := 8 / size
		for i, w := range words {
			c := uint64(cut + 1<<(bitsE-1))
			if c > lanesMask { // nothing can reach the cut any more
				break
			}
			tb := (lanesMask + 1 - c) * (^uint64(0) / lanesMask) // broadcast
			u := w ^ h
			s := u&^h + tb&^h
			if (u&tb|(u|tb)&s)&h == 0 {
				continue
			}
			for l := range lanesPerWord {
				q := t0 + i*lanesPerWord + l
				if v := sumAt(shares, q); v >= cut {
					offer(&top, k, sharing.Match{Row: q, Score: v}, &cut)
				}
			}
		}
		for q := t0 + nw*8/size; q < t1; q++ {
			if v := sumAt(shares, q); v >= cut {
				offer(&top, k, sharing.Match{Row: q, Score: v}, &cut)
			}
		}
	}
	slices.SortFunc(top, sharing.CompareMatches)
	return top
}

// sumAt is the signed score at position q (the rare slow path).
func sumAt[E Elem](shares [][]E, q int) int {
	var v E
	for _, s := range shares {
		v += s[q]
	}
	return Signed(v)
}

// offer keeps m if it is among the k best so far (top is a heap with the
// worst on top) and raises the cut once k are held: later positions must
// beat the worst strictly, as they lose ties to the lower positions held.
func offer(top *[]sharing.Match, k int, m sharing.Match, cut *int) {
	h := *top
	switch {
	case len(h) < k:
		h = append(h, m)
		for i := len(h) - 1; i > 0; { // sift up
			up := (i - 1) / 2
			if !sharing.Better(h[up], h[i]) {
				break
			}
			h[up], h[i] = h[i], h[up]
			i = up
		}
		*top = h
	case sharing.Better(m, h[0]):
		h[0] = m
		for i := 0; ; { // sift down
			w, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && sharing.Better(h[w], h[l]) {
				w = l
			}
			if r < len(h) && sharing.Better(h[w], h[r]) {
				w = r
			}
			if w == i {
				break
			}
			h[w], h[i] = h[i], h[w]
			i = w
		}
	default:
		return
	}
	if len(h) == k {
		*cut = max(*cut, h[0].Score+1)
	}
}
