package additive

// Permute-and-mask (docs/BLIND-NOTES.md "Permute and mask"): from a
// per-query seed sigma every share holder derives the same permutation pi
// of the n rows and its own mask m_k, with sum_k m_k = 0 mod 2^k, and
// sends the decider out[pi(i)] = s_k[i] + m_k[pi(i)]. The decider adds the
// mu vectors, getting pi(s), and returns the best positions; the entry
// maps them back with pi^-1.
//
// pi^-1 is a keyed pseudorandom permutation that can be evaluated at one
// point: a 10-round Feistel network on [0, 2^m), 2^m the least power of
// two >= n, cycle-walked into [0, n). Its round functions are tables drawn
// from AES-256-CTR keyed by sigma, so a holder evaluates pi^-1 at every
// position with table look-ups and gathers its score shares in position
// order, and the entry evaluates it at the K answered positions only, one
// AES block per round, whatever n. Up to exactRows rows pi is an exactly
// uniform Fisher-Yates table instead (cheap there, and the Feistel's
// bounds are weak on so small a domain). docs/BLIND-NOTES.md has the
// security argument.

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

const (
	feistelRounds = 10      // even (the halves end where they began), 6 to 10
	exactRows     = 1 << 16 // n <= exactRows: pi^-1 is a Fisher-Yates table
	permChunk     = 2016    // positions a worker gathers at a time (in L1; 42 runs of the AVX2 network)
	maxPermRows   = 1<<31 - 1
	minPermRows   = 1 << 15 // positions per worker worth a goroutine
)

// Permuter holds the reusable state of PermuteMask, PermuteMaskPair,
// Unpermute and Permutation. Workers is the number of goroutines
// (GOMAXPROCS when 0); outputs never depend on it. Not safe for concurrent
// use.
type Permuter struct {
	Workers int

	n, workers int
	f          feistel  // pi^-1 for n > exactRows
	exact      []uint32 // pi^-1 for n <= exactRows: exact[q] is the row at position q
	draws      []byte
	rej        rejecter
	work       []permWorker
}

type permWorker struct {
	rows  []uint32 // pi^-1 of the chunk's positions
	walk  []uint32 // scratch of the Feistel's walks
	buf   []byte   // mask bytes of a chunk
	masks [2]masker
}

// feistel is pi^-1 for n > exactRows rows: an alternating Feistel network
// on x = a*2^v + b in [0, 2^m), a of u = floor(m/2) bits and b of
// v = m - u bits (FF1's split of an odd length), whose round r sets
// a ^= F_r(b) for even r and b ^= F_r(a) for odd r; cycle walking makes
// pi^-1(q) the first of E(q), E(E(q)), ... below n, where E is the
// network. F_r(j) is 2 bytes (little-endian) at byte offset 2j of the
// AES-256-CTR stream (labelFeistel, m<<8 | r), cut to the width of the
// half it is XORed into: a table of 2^v (even r) or 2^u (odd r) entries.
type feistel struct {
	n       uint32
	m, u, v uint
	mv      uint32 // 2^v - 1
	// tab[r][j] = F_r(j); the padding keeps the tables in different L1
	// sets. Allocated on first use (1.3 MB).
	tab      *[10][1<<16 + 32]uint16
	ctr, out [16]byte // entry's AES block
}

// shape sets the domain and halves for n > exactRows rows: 2^m < 2n, so
// a point walks fewer than 2 steps on average.
func (f *feistel) shape(n int) {
	f.n = uint32(n)
	f.m = uint(bits.Len32(uint32(n - 1)))
	f.u = f.m / 2
	f.v = f.m - f.u
	f.mv = 1<<f.v - 1
}

// sub is the stream of round r's table: each domain size has its own.
func (f *feistel) sub(r int) uint32 { return uint32(f.m)<<8 | uint32(r) }

// widths are round r's input and output bits.
func (f *feistel) widths(r int) (in, out uint) {
	if r%2 == 0 {
		return f.v, f.u
	}
	return f.u, f.v
}

// tables draws the round tables from the seed's keystream.
func (f *feistel) tables(ks keystream, buf []byte) []byte {
	if f.tab == nil {
		f.tab = new([10][1<<16 + 32]uint16)
	}
	for r := range feistelRounds {
		in, out := f.widths(r)
		buf = grow(buf, 2<<in)
		ks.seek(labelFeistel, f.sub(r), 0)
		ks.fill(buf)
		t, mask := f.tab[r][:1<<in], uint16(1<<out-1)
		for j := range t {
			t[j] = binary.LittleEndian.Uint16(buf[2*j:]) & mask
		}
	}
	return buf
}

// entry is F_r(j) from the cipher alone: the one AES block of round r's
// stream that holds it (the counter block keystream.seek would start).
func (f *feistel) entry(blk cipher.Block, r int, j uint32) uint32 {
	f.ctr = [16]byte{labelFeistel}
	binary.BigEndian.PutUint32(f.ctr[4:], f.sub(r))
	binary.BigEndian.PutUint64(f.ctr[8:], uint64(j/8))
	blk.Encrypt(f.out[:], f.ctr[:])
	_, w := f.widths(r)
	return uint32(binary.LittleEndian.Uint16(f.out[2*(j%8):])) & (1<<w - 1)
}

// at is pi^-1(q) without the tables: about 10 AES blocks per walk step,
// so the entry's K positions cost microseconds whatever n.
func (f *feistel) at(blk cipher.Block, q uint32) uint32 {
	x := q
	for {
		a, b := x>>f.v, x&f.mv
		for r := 0; r < feistelRounds; r += 2 {
			a ^= f.entry(blk, r, b)
			b ^= f.entry(blk, r+1, a)
		}
		if x = a<<f.v | b; x < f.n {
			return x
		}
	}
}

// rows sets rows[j] = pi^-1(q0 + j): one step of the network for every
// position, then more for the walkers (points at n or beyond) until they
// land. walk is scratch (3 * len(rows)), returned for reuse.
func (f *feistel) rows(rows []uint32, q0 uint32, walk []uint32) []uint32 {
	c := len(rows)
	walk = grow(walk, 3*c)
	for j := range rows {
		rows[j] = q0 + uint32(j)
	}
	out := f.steps(rows, walk[:c])
	for len(out) > 0 {
		v := walk[c : c+len(out)]
		for i, j := range out {
			v[i] = rows[j]
		}
		again := f.steps(v, walk[2*c:2*c+len(v)])
		for i, j := range out {
			rows[j] = v[i]
		}
		for k, i := range again { // in place: again[k] >= k
			out[k] = out[i]
		}
		out = out[:len(again)]
	}
	return walk
}

// steps sets xs[j] = E(xs[j]) (one step of the network, no walking) and
// returns idx[:k] holding the j whose new xs[j] is n or beyond, the
// walkers (idx has len(xs) entries). With AVX2 (feistelAVX2) 48 points
// run at a time in feistel_amd64.s; otherwise, and for the last few, four
// points run in lock-step, so their chains of dependent look-ups
// interleave.
func (f *feistel) steps(xs []uint32, idx []uint32) []uint32 {
	var _ [10 - feistelRounds]struct{}   // rounds 6 to 9 are written out below,
	var _ [feistelRounds - 6]struct{}    // each pair under a constant test
	var _ [-(feistelRounds % 2)]struct{} // and come in pairs
	t, v, mv, last := f.tab, f.v, f.mv, f.n-1
	k, j := 0, 0
	if feistelAVX2 && len(xs) >= 48 {
		j = len(xs) / 48 * 48
		shift := [2]uint64{uint64(v)}
		const run = 42 * 48 // points a call: multiples of 48 within permChunk
		var walk [run / 8]uint8
		for at := 0; at < j; at += run {
			c := min(run, j-at)
			feistelNet48(&t[0][0], &xs[at], c, &shift, mv, last, &walk[0])
			for w, bits8 := range walk[:c/8] {
				for ; bits8 != 0; bits8 &= bits8 - 1 {
					idx[k] = uint32(at + 8*w + bits.TrailingZeros8(bits8))
					k++
				}
			}
		}
	}
	for ; j+4 <= len(xs); j += 4 {
		x := xs[j : j+4 : j+4]
		a0, b0, a1, b1 := x[0]>>v, x[0]&mv, x[1]>>v, x[1]&mv
		a2, b2, a3, b3 := x[2]>>v, x[2]&mv, x[3]>>v, x[3]&mv
		a0, a1, a2, a3 = a0^uint32(t[0][uint16(b0)]), a1^uint32(t[0][uint16(b1)]), a2^uint32(t[0][uint16(b2)]), a3^uint32(t[0][uint16(b3)])
		b0, b1, b2, b3 = b0^uint32(t[1][uint16(a0)]), b1^uint32(t[1][uint16(a1)]), b2^uint32(t[1][uint16(a2)]), b3^uint32(t[1][uint16(a3)])
		a0, a1, a2, a3 = a0^uint32(t[2][uint16(b0)]), a1^uint32(t[2][uint16(b1)]), a2^uint32(t[2][uint16(b2)]), a3^uint32(t[2][uint16(b3)])
		b0, b1, b2, b3 = b0^uint32(t[3][uint16(a0)]), b1^uint32(t[3][uint16(a1)]), b2^uint32(t[3][uint16(a2)]), b3^uint32(t[3][uint16(a3)])
		a0, a1, a2, a3 = a0^uint32(t[4][uint16(b0)]), a1^uint32(t[4][uint16(b1)]), a2^uint32(t[4][uint16(b2)]), a3^uint32(t[4][uint16(b3)])
		b0, b1, b2, b3 = b0^uint32(t[5][uint16(a0)]), b1^uint32(t[5][uint16(a1)]), b2^uint32(t[5][uint16(a2)]), b3^uint32(t[5][uint16(a3)])
		if feistelRounds > 6 {
			a0, a1, a2, a3 = a0^uint32(t[6][uint16(b0)]), a1^uint32(t[6][uint16(b1)]), a2^uint32(t[6][uint16(b2)]), a3^uint32(t[6][uint16(b3)])
			b0, b1, b2, b3 = b0^uint32(t[7][uint16(a0)]), b1^uint32(t[7][uint16(a1)]), b2^uint32(t[7][uint16(a2)]), b3^uint32(t[7][uint16(a3)])
		}
		if feistelRounds > 8 {
			a0, a1, a2, a3 = a0^uint32(t[8][uint16(b0)]), a1^uint32(t[8][uint16(b1)]), a2^uint32(t[8][uint16(b2)]), a3^uint32(t[8][uint16(b3)])
			b0, b1, b2, b3 = b0^uint32(t[9][uint16(a0)]), b1^uint32(t[9][uint16(a1)]), b2^uint32(t[9][uint16(a2)]), b3^uint32(t[9][uint16(a3)])
		}
		x0, x1, x2, x3 := a0<<v|b0, a1<<v|b1, a2<<v|b2, a3<<v|b3
		x[0], x[1], x[2], x[3] = x0, x1, x2, x3
		// Note the walkers (x > last, so last - x wraps) without a branch.
		w := idx[k : k+4 : k+4]
		w[0] = uint32(j)
		k0 := int((last - x0) >> 31)
		w[k0] = uint32(j + 1)
		k1 := k0 + int((last-x1)>>31)
		w[k1] = uint32(j + 2)
		k2 := k1 + int((last-x2)>>31)
		w[k2] = uint32(j + 3)
		k += k2 + int((last-x3)>>31)
	}
	for ; j < len(xs); j++ { // the last one to three
		a, b := xs[j]>>v, xs[j]&mv
		for r := 0; r < feistelRounds; r += 2 {
			a ^= uint32(t[r][uint16(b)])
			b ^= uint32(t[r+1][uint16(a)])
		}
		x := a<<v | b
		xs[j], idx[k] = x, uint32(j)
		k += int((last - x) >> 31)
	}
	return idx[:k]
}

// rejecter supplies redraws after a rejection from the stream labelReject,
// so a rejection never shifts the other draws.
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

// shuffle is Fisher-Yates (Durstenfeld) on a: for t = m-1..1 swap a[t]
// with a[j], j uniform in [0, t] by Lemire's multiply-and-reject on draw
// m-1-t. A rejection (probability < m/2^32 per draw) redraws from stream
// b of labelReject.
func shuffle(a []uint32, draws []byte, ks keystream, rej *rejecter, b int) {
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

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// prepare derives pi^-1 for n rows from the seed (the exact table or the
// Feistel's round tables) and sets the workers.
func (p *Permuter) prepare(ks keystream, n int) {
	p.n = n
	p.workers = p.Workers
	if p.workers <= 0 {
		p.workers = runtime.GOMAXPROCS(0)
	}
	p.workers = max(min(p.workers, n/minPermRows), 1)
	for len(p.work) < p.workers {
		p.work = append(p.work, permWorker{})
	}
	if n <= exactRows {
		p.exactTable(ks, n)
		return
	}
	p.f.shape(n)
	p.draws = p.f.tables(ks, p.draws)
}

// exactTable sets p.exact to pi^-1 for n <= exactRows rows: the identity
// shuffled by Fisher-Yates with the draws of stream labelShuffle.
func (p *Permuter) exactTable(ks keystream, n int) {
	p.exact = grow(p.exact, n)
	for i := range p.exact {
		p.exact[i] = uint32(i)
	}
	p.draws = grow(p.draws, 4*max(n-1, 0))
	ks.seek(labelShuffle, 0, 0)
	ks.fill(p.draws)
	p.rej.ks.ctr = nil
	shuffle(p.exact, p.draws, ks, &p.rej, 0)
}

// rowsAt returns pi^-1 of positions [q0, q0+c).
func (p *Permuter) rowsAt(pw *permWorker, q0, c int) []uint32 {
	if p.n <= exactRows {
		return p.exact[q0 : q0+c]
	}
	pw.rows = grow(pw.rows, c)
	pw.walk = p.f.rows(pw.rows, uint32(q0), pw.walk)
	return pw.rows
}

// parallel runs f(w, p0, p1) for every worker w and its positions
// [p0, p1), and waits.
func (p *Permuter) parallel(f func(pw *permWorker, p0, p1 int)) {
	if p.workers == 1 {
		f(&p.work[0], 0, p.n)
		return
	}
	var wg sync.WaitGroup
	for w := range p.workers {
		wg.Go(func() { f(&p.work[w], p.n*w/p.workers, p.n*(w+1)/p.workers) })
	}
	wg.Wait()
}

// masked is one vector of a permute-and-mask step: dst[pi(i)] = src[i] +
// m_holder[pi(i)] (src nil: zeros).
type masked[E Elem] struct {
	dst, src []E
	holder   int
}

// permuteMasked gathers each vector's shares in position order, a chunk
// at a time, and adds its holder's mask to the chunk while it is in
// cache. A row whose live bit is clear (live == nil: all live) enters as
// DeadScore in holder 0's vector and as 0 in the others.
func permuteMasked[E Elem](p *Permuter, seed *Seed, live []uint64, mu int, pi []uint32, vs ...masked[E]) error {
	n := len(vs[0].dst)
	ks, err := newKeystream(seed)
	if err != nil {
		return err
	}
	p.prepare(ks, n)
	if allLive(live, n) {
		live = nil
	}
	size := elemSize[E]()
	p.parallel(func(pw *permWorker, p0, p1 int) {
		for k, v := range vs {
			pw.masks[k].start(ks, v.holder, mu, uint64(p0*size))
		}
		for q := p0; q < p1; q += permChunk {
			c := min(permChunk, p1-q)
			rows := p.rowsAt(pw, q, c)
			if pi != nil {
				for j, r := range rows {
					pi[r] = uint32(q + j)
				}
			}
			for k, v := range vs {
				dst := v.dst[q : q+c]
				if v.src == nil {
					clear(dst)
				} else {
					gather(dst, v.src, rows)
				}
				if live != nil {
					var dead E
					if v.holder == 0 {
						dead = E(DeadScore[E]())
					}
					markDead(dst, rows, live, dead)
				}
				addMask(pw, &pw.masks[k], dst)
			}
		}
	})
	return nil
}

// allLive reports whether the first n live bits are all set.
func allLive(live []uint64, n int) bool {
	if live == nil {
		return true
	}
	for _, w := range live[:n/64] {
		if w != ^uint64(0) {
			return false
		}
	}
	r := uint(n % 64)
	return r == 0 || live[n/64]&(1<<r-1) == 1<<r-1
}

// gather sets dst[j] = src[rows[j]].
func gather[E Elem](dst, src []E, rows []uint32) {
	dst = dst[:len(rows)]
	for j, r := range rows {
		dst[j] = src[r]
	}
}

// markDead sets dst[j] = dead where row rows[j]'s live bit is clear.
func markDead[E Elem](dst []E, rows []uint32, live []uint64, dead E) {
	dst = dst[:len(rows)]
	for j, r := range rows {
		if live[r>>6]>>(r&63)&1 == 0 {
			dst[j] = dead
		}
	}
}

// masker adds holder h's mask R_(h+1) - R_h to a worker's consecutive
// chunks of positions, from at most two keystreams positioned once.
type masker struct {
	ks  [2]keystream
	neg [2]bool
	k   int
}

// start positions the streams at byte off (the worker's first position).
func (m *masker) start(ks keystream, holder, mu int, off uint64) {
	m.k = 0
	for i, t := range [2]int{holder + 1, holder} {
		if t == mu || t == 0 {
			continue // R_mu = R_0 = 0
		}
		m.ks[m.k] = keystream{block: ks.block}
		m.ks[m.k].seek(labelMask, uint32(t), off)
		m.neg[m.k] = i == 1
		m.k++
	}
}

// addMask adds the mask's next len(dst) elements to dst.
func addMask[E Elem](pw *permWorker, m *masker, dst []E) {
	pw.buf = grow(pw.buf, len(dst)*elemSize[E]())
	for i := range m.k {
		m.ks[i].fill(pw.buf)
		if mask := viewElems[E](pw.buf); m.neg[i] {
			subInto(dst, mask)
		} else {
			addInto(dst, mask)
		}
	}
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
	return permuteMasked(p, seed, live, mu, nil, masked[E]{dst, src, holder})
}

// Masked is one vector of PermuteMaskAll: Dst[pi(i)] = Src[i] +
// m_Holder[pi(i)], as PermuteMask; a nil Src stands for zeros (the
// holder's mask alone, with the dead rows' constant).
type Masked[E Elem] struct {
	Dst, Src []E
	Holder   int
}

// PermuteMaskAll is PermuteMask of several vectors under one seed in one
// evaluation of the permutation, and writes pi into pi when it is not
// nil (pi[i] is the position of row i): a holder that needs the
// permutation, or another holder's mask, beside its own vector computes
// the permutation once.
func PermuteMaskAll[E Elem](p *Permuter, pi []uint32, live []uint64, seed *Seed, mu int, vs ...Masked[E]) error {
	if len(vs) == 0 || len(vs) > len(permWorker{}.masks) {
		return fmt.Errorf("sharing: permute %d vectors at once (1 or 2)", len(vs))
	}
	n := len(vs[0].Dst)
	switch {
	case n > maxPermRows || pi != nil && len(pi) != n:
		return fmt.Errorf("sharing: permute %d score shares (a permutation of %d)", n, len(pi))
	case mu < 2:
		return fmt.Errorf("sharing: mu = %d", mu)
	case live != nil && len(live) < template.Words(n):
		return fmt.Errorf("sharing: live bitset has %d words, want %d", len(live), template.Words(n))
	}
	ms := make([]masked[E], len(vs))
	for i, v := range vs {
		switch {
		case len(v.Dst) != n || v.Src != nil && len(v.Src) != n:
			return fmt.Errorf("sharing: permute %d score shares into %d", len(v.Src), len(v.Dst))
		case v.Holder < 0 || v.Holder >= mu:
			return fmt.Errorf("sharing: holder %d of mu = %d", v.Holder, mu)
		case n > 0 && v.Src != nil && &v.Dst[0] == &v.Src[0]:
			return fmt.Errorf("sharing: permute in place: dst and src must differ")
		}
		ms[i] = masked[E]{v.Dst, v.Src, v.Holder}
	}
	return permuteMasked(p, seed, live, mu, pi, ms...)
}

// Unpermute maps permuted positions back to rows for the entry: rows[i] =
// pi^-1(positions[i]) for the permutation of n rows under seed. Above
// exactRows rows it evaluates the Feistel at the positions alone, with no
// table: about 10 AES blocks per position.
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
	if n <= exactRows {
		p.exactTable(ks, n)
		for i, q := range positions {
			rows[i] = int(p.exact[q])
		}
		return nil
	}
	p.f.shape(n) // the tables are not needed
	for i, q := range positions {
		rows[i] = int(p.f.at(ks.block, uint32(q)))
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
	p.prepare(ks, n)
	pi := make([]int, n)
	p.parallel(func(pw *permWorker, p0, p1 int) {
		for q := p0; q < p1; q += permChunk {
			c := min(permChunk, p1-q)
			for j, r := range p.rowsAt(pw, q, c) {
				pi[r] = q + j
			}
		}
	})
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
	top, _, err := decide(k, threshold, workers, false, shares)
	return top, err
}

// DecideBest is Decide that also returns the query's best live score,
// whether or not it reaches the threshold (the decider's statistics), from
// the same pass: while no position has reached the threshold, a worker
// also looks at the positions that beat its best score so far, which in
// permuted order are few (a random sequence has about ln n records). ok
// is false where no row lives.
func DecideBest[E Elem](k, threshold, workers int, shares ...[]E) (top []sharing.Match, best int, ok bool, err error) {
	top, best, err = decide(k, threshold, workers, true, shares)
	return top, best, err == nil && best > DeadScore[E](), err
}

// decide is Decide, and with track DecideBest's best score (DeadScore
// where no row lives).
func decide[E Elem](k, threshold, workers int, track bool, shares [][]E) ([]sharing.Match, int, error) {
	dead := DeadScore[E]()
	if len(shares) < 1 {
		return nil, dead, fmt.Errorf("sharing: no score shares")
	}
	n := len(shares[0])
	if err := checkShares(shares, n); err != nil {
		return nil, dead, err
	}
	if k < 1 {
		return nil, dead, fmt.Errorf("sharing: top-k with k = %d, want >= 1", k)
	}
	threshold = max(threshold, dead+1)
	if threshold > RingOf[E]().MaxScore() && !track {
		return nil, dead, nil
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(min(workers, n/(4*decideTile)), 1)
	results := make([][]sharing.Match, workers)
	bests := make([]int, workers)
	var wg sync.WaitGroup
	for g := range workers {
		a, b := n*g/workers, n*(g+1)/workers
		a, b = a&^7, b&^7 // whole words per worker
		if g == workers-1 {
			b = n
		}
		wg.Go(func() { results[g], bests[g] = decideRange(shares, a, b, k, threshold, track) })
	}
	wg.Wait()
	top := results[0]
	if workers > 1 {
		top = sharing.Merge(k, results...)
	}
	if len(top) > 0 {
		return top, top[0].Score, nil // a match beats every score below the threshold
	}
	return top, slices.Max(bests), nil
}

// decider is one worker's state in decideRange.
type decider struct {
	top  []sharing.Match
	k    int
	cut  int // a position is a candidate when its score >= cut
	lo   int // a position is looked at when its score >= lo (<= cut)
	best int // the best score below the threshold (tracking)
}

// look takes the score v >= lo at position q: a candidate, or while
// tracking (no candidate yet) the best score so far.
func (d *decider) look(q, v int) {
	if v < d.cut {
		d.best, d.lo = v, v+1
		return
	}
	offer(&d.top, d.k, sharing.Match{Row: q, Score: v}, &d.cut)
	d.lo = d.cut // a candidate ends the tracking
}

// decideRange is Decide over positions [a, b) on one goroutine; with
// track it also returns the best score below the threshold while no
// position reaches it (DeadScore where none lives).
func decideRange[E Elem](shares [][]E, a, b, k, threshold int, track bool) ([]sharing.Match, int) {
	d := decider{top: make([]sharing.Match, 0, k), k: k, cut: threshold, lo: threshold, best: DeadScore[E]()}
	if track {
		d.lo = d.best + 1
	}
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
		// u reaches the biased bound c iff u + (2^k - c) carries out.
		lanesPerWord := 8 / size
		for i, w := range words {
			c := uint64(d.lo + 1<<(bitsE-1))
			if c > lanesMask { // nothing can reach the bound any more
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
				if v := sumAt(shares, q); v >= d.lo {
					d.look(q, v)
				}
			}
		}
		for q := t0 + nw*8/size; q < t1; q++ {
			if v := sumAt(shares, q); v >= d.lo {
				d.look(q, v)
			}
		}
	}
	slices.SortFunc(d.top, sharing.CompareMatches)
	return d.top, d.best
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
