package additive

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// Query is a query vector y in sparse form, ordered for the score kernel:
// its columns grouped by decreasing |y_j|, positive before negative.
type Query struct {
	dim    int
	cols   []int32
	groups []qgroup
}

// qgroup is a run of cols with one magnitude: npos added, then nneg
// subtracted.
type qgroup struct{ mag, npos, nneg int }

// NewQuery builds the query with coefficient coef[i] at position pos[i]:
// positions distinct and in [0, d), coefficients in [-127, 127] and
// nonzero (+-1 for T_beta, +-1..+-L for multi-level queries).
func NewQuery(d int, pos []int32, coef []int8) (*Query, error) {
	if d < 1 || d > template.MaxDim {
		return nil, fmt.Errorf("%w: d = %d", template.ErrDimension, d)
	}
	if len(pos) != len(coef) || len(pos) == 0 {
		return nil, fmt.Errorf("sharing: query has %d positions and %d coefficients, want as many and at least one", len(pos), len(coef))
	}
	var seen [template.MaxDim / 64]uint64
	for i, p := range pos {
		switch {
		case p < 0 || int(p) >= d:
			return nil, fmt.Errorf("sharing: query position %d outside [0, %d)", p, d)
		case seen[p>>6]>>uint(p&63)&1 == 1:
			return nil, fmt.Errorf("sharing: query position %d repeated", p)
		case coef[i] == 0 || coef[i] == -128:
			return nil, fmt.Errorf("sharing: query coefficient %d at position %d, want +-1..+-127", coef[i], p)
		}
		seen[p>>6] |= 1 << uint(p&63)
	}
	// Sort by (|c| descending, sign, position): Horner's rule then needs one
	// multiply-add per distinct magnitude, not per column.
	idx := make([]int, len(pos))
	for i := range idx {
		idx[i] = i
	}
	abs := func(c int8) int { return max(int(c), -int(c)) }
	slices.SortFunc(idx, func(a, b int) int {
		ca, cb := coef[a], coef[b]
		if abs(ca) != abs(cb) {
			return abs(cb) - abs(ca)
		}
		if (ca < 0) != (cb < 0) {
			if ca < 0 {
				return 1
			}
			return -1
		}
		return int(pos[a]) - int(pos[b])
	})
	q := &Query{dim: d, cols: make([]int32, len(pos))}
	for k, i := range idx {
		q.cols[k] = pos[i]
		c := coef[i]
		if len(q.groups) == 0 || q.groups[len(q.groups)-1].mag != abs(c) {
			q.groups = append(q.groups, qgroup{mag: abs(c)})
		}
		g := &q.groups[len(q.groups)-1]
		if c > 0 {
			g.npos++
		} else {
			g.nneg++
		}
	}
	return q, nil
}

// DenseQuery builds the query of a dense coefficient vector y (d entries,
// e.g. from template.ApplyLevels).
func DenseQuery(y []int8) (*Query, error) {
	var pos []int32
	var coef []int8
	for j, c := range y {
		if c != 0 {
			pos = append(pos, int32(j))
			coef = append(coef, c)
		}
	}
	return NewQuery(len(y), pos, coef)
}

// Dim returns d; Weight the number of nonzero coefficients.
func (q *Query) Dim() int    { return q.dim }
func (q *Query) Weight() int { return len(q.cols) }

// Coefficients returns the query as (position, coefficient) pairs in the
// kernel's order.
func (q *Query) Coefficients() (pos []int32, coef []int8) {
	i := 0
	for _, g := range q.groups {
		for k := range g.npos + g.nneg {
			c := int8(g.mag)
			if k >= g.npos {
				c = -c
			}
			pos, coef = append(pos, q.cols[i]), append(coef, c)
			i++
		}
	}
	return pos, coef
}

// scoreTile is the number of column words per tile: the two accumulators
// (and two more for multi-level queries, 32 KiB in all) stay in L1 while
// the selected columns stream through in 8 KiB runs. 4 KiB runs (one page
// each, where hardware prefetch stops) ran slower at 10^6 rows.
const scoreTile = 1024

// swar holds the lane constants of a ring. Each column word is split into
// even and odd lanes, each lane in a 2k-bit slot (the odd ones shifted by
// k), so lane sums never carry into a neighbour: mE/mO select the lanes,
// bE/bO put 2^(2k-1) into every slot so subtractions never borrow across
// slots, and a slot is normalised every maxOps additions. Carries out of
// the top slot fall off the word, which is reduction mod 2^k for that lane.
type swar struct {
	mE, mO, bE, bO uint64
	maxOps         int
}

func swarOf[E Elem]() swar {
	if elemBits[E]() == 8 {
		return swar{0x00FF00FF00FF00FF, 0xFF00FF00FF00FF00, 0x8000800080008000, 0x0080008000800000, 127}
	}
	return swar{0x0000FFFF0000FFFF, 0xFFFF0000FFFF0000, 0x8000000080000000, 0x0000800000000000, 32767}
}

// ScoreShares computes this holder's score share of every row in [r0, r1):
// out[i-r0] = sum_j y_j * v[i][j] mod 2^k (docs/BLIND-NOTES.md "Score-share kernel"). Deleted
// rows have zero shares and so zero score shares. out needs r1-r0 entries.
func (s *Store[E]) ScoreShares(out []E, q *Query, r0, r1 int) error {
	if err := s.checkScore(out, q, r0, r1); err != nil {
		return err
	}
	s.score(out, q, r0, r1)
	return nil
}

// ScoreSharesParallel is ScoreShares on `workers` goroutines (GOMAXPROCS
// when <= 0), each taking a contiguous run of tiles.
func (s *Store[E]) ScoreSharesParallel(out []E, q *Query, r0, r1, workers int) error {
	if err := s.checkScore(out, q, r0, r1); err != nil {
		return err
	}
	parallelTiles[E](r0, r1, workers, func(a, b int) { s.score(out[a-r0:b-r0], q, a, b) })
	return nil
}

// ScoreSharesBatch is ScoreSharesParallel for several queries in one pass
// over the store: outs[i] gets qs[i]'s score shares, each exactly as
// ScoreShares would give them. Each tile of rows is scored for every
// query while its columns are in cache, so a column that several queries
// select is read from memory once.
func (s *Store[E]) ScoreSharesBatch(outs [][]E, qs []*Query, r0, r1, workers int) error {
	if len(outs) != len(qs) {
		return fmt.Errorf("sharing: %d score buffers for %d queries", len(outs), len(qs))
	}
	for i, q := range qs {
		if err := s.checkScore(outs[i], q, r0, r1); err != nil {
			return err
		}
	}
	parallelTiles[E](r0, r1, workers, func(a, b int) {
		sub := make([][]E, len(outs))
		for i := range outs {
			sub[i] = outs[i][a-r0 : b-r0]
		}
		s.scoreBatch(sub, qs, a, b)
	})
	return nil
}

// parallelTiles runs f over rows [r0, r1) on `workers` goroutines
// (GOMAXPROCS when <= 0), each a contiguous run split at absolute tile
// boundaries, so that no column word is scored twice.
func parallelTiles[E Elem](r0, r1, workers int, f func(a, b int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	step := scoreTile * lanes[E]()
	t0, t1 := r0/step, (r1+step-1)/step
	workers = max(min(workers, t1-t0), 1)
	var wg sync.WaitGroup
	for g := range workers {
		a := max(r0, (t0+(t1-t0)*g/workers)*step)
		b := min(r1, (t0+(t1-t0)*(g+1)/workers)*step)
		if a < b {
			wg.Go(func() { f(a, b) })
		}
	}
	wg.Wait()
}

func (s *Store[E]) checkScore(out []E, q *Query, r0, r1 int) error {
	switch {
	case q == nil || q.dim != s.dim:
		return fmt.Errorf("%w: query does not have d = %d", template.ErrDimension, s.dim)
	case r0 < 0 || r1 < r0 || r1 > s.rows:
		return fmt.Errorf("%w: rows [%d, %d) of %d", sharing.ErrRow, r0, r1, s.rows)
	case len(out) < r1-r0:
		return fmt.Errorf("sharing: score buffer holds %d entries, want %d", len(out), r1-r0)
	}
	return nil
}

// score runs the kernel over rows [r0, r1) in tiles that never cross a
// chunk.
func (s *Store[E]) score(out []E, q *Query, r0, r1 int) {
	s.scoreBatch([][]E{out}, []*Query{q}, r0, r1)
}

// scoreBatch runs the kernel for every query over rows [r0, r1) (outs[i]
// for qs[i]) in tiles of scoreTile words that never cross a chunk, every
// query scoring a tile before the next tile: a column several queries
// select is read from memory once and then from cache (a tile's column
// is 8 KiB; the union of eight T_63 selections, about 330 columns, is
// 2.6 MiB, in L3 but not L2: smaller tiles, 2 KiB, ran slower at every
// batch size, the hardware prefetcher's runs too short).
func (s *Store[E]) scoreBatch(outs [][]E, qs []*Query, r0, r1 int) {
	if r0 == r1 {
		return
	}
	var acc [4][scoreTile]uint64 // even, odd; Horner's even, odd
	c := swarOf[E]()
	nl, cw := lanes[E](), chunkWords[E]()
	for w := r0 / nl; w*nl < r1; {
		chunk := w / cw
		off := w % cw
		n := min(scoreTile, cw-off, (r1-1)/nl+1-w)
		lo, hi := max(r0, w*nl), min(r1, (w+n)*nl)
		for i, q := range qs {
			multi := len(q.groups) > 1 || q.groups[0].mag > 1
			var e []uint64
			if denseAVX2 && !multi && off%4 == 0 && n%4 == 0 { // T_beta on whole 32-byte groups
				e = acc[0][:n]
				sparseAVX2Tile[E](wordBytes(e), q, s.chunks[chunk], off, n)
			} else {
				e = swarScore(&acc, q, s.chunks[chunk], off, n, c, multi)
			}
			// e now holds rows (w..w+n)*nl in memory order: copy the part
			// in [r0, r1) (a memmove, any alignment, any byte order).
			res := unsafe.Slice((*E)(unsafe.Pointer(&e[0])), n*nl)
			copy(outs[i][lo-r0:hi-r0], res[lo-w*nl:hi-w*nl])
		}
		w += n
	}
}

// swarScore is the pure-Go kernel of one tile of n words at word offset
// off of a chunk's columns: the tile's score shares, rows in memory
// order, in the first n words of acc.
func swarScore(acc *[4][scoreTile]uint64, q *Query, colsOf [][]uint64, off, n int, c swar, multi bool) []uint64 {
	var cols [4][]uint64
	e, o, te, to := acc[0][:n], acc[1][:n], acc[2][:n], acc[3][:n]
	fill(e, c.bE)
	fill(o, c.bO)
	if multi {
		clear(te)
		clear(to)
	}
	i, ops := 0, 0
	for gi, g := range q.groups {
		for k, cnt := range [2]int{g.npos, g.nneg} {
			sub := k == 1
			for cnt > 0 {
				b := min(cnt, 4)
				if ops+b > c.maxOps {
					normalise(e, o, c)
					ops = 0
				}
				for t := range b {
					cols[t] = colsOf[q.cols[i+t]][off : off+n]
				}
				switch {
				case b == 4 && !sub:
					add4(e, o, cols[0], cols[1], cols[2], cols[3], c.mE, c.mO)
				case b == 4:
					sub4(e, o, cols[0], cols[1], cols[2], cols[3], c.mE, c.mO)
				default:
					for t := range b {
						if sub {
							sub1(e, o, cols[t], c.mE, c.mO)
						} else {
							add1(e, o, cols[t], c.mE, c.mO)
						}
					}
				}
				i, cnt, ops = i+b, cnt-b, ops+b
			}
		}
		if multi { // Horner: T += (m_g - m_next) * (sum of groups so far)
			next := 0
			if gi+1 < len(q.groups) {
				next = q.groups[gi+1].mag
			}
			horner(te, to, e, o, uint64(g.mag-next), c)
			ops = 0
		}
	}
	if multi {
		e, o = te, to
	}
	for t := range e {
		e[t] = e[t]&c.mE | o[t]&c.mO
	}
	return e
}

func fill(a []uint64, v uint64) {
	for i := range a {
		a[i] = v
	}
}

// normalise reduces every slot to its lane value mod 2^k plus the bias.
func normalise(e, o []uint64, c swar) {
	o = o[:len(e)]
	for t := range e {
		e[t] = e[t]&c.mE | c.bE
		o[t] = o[t]&c.mO | c.bO
	}
}

// horner adds f times the lane values of (e, o) to (te, to) and
// normalises both; f <= 127 times a lane value < 2^k stays in its slot.
func horner(te, to, e, o []uint64, f uint64, c swar) {
	o, te, to = o[:len(e)], te[:len(e)], to[:len(e)]
	for t := range e {
		re, ro := e[t]&c.mE, o[t]&c.mO
		te[t] = te[t]&c.mE + f*re
		to[t] = to[t]&c.mO + f*ro
		e[t], o[t] = re|c.bE, ro|c.bO
	}
}

func add4(e, o, a, b, c, d []uint64, mE, mO uint64) {
	o, a, b, c, d = o[:len(e)], a[:len(e)], b[:len(e)], c[:len(e)], d[:len(e)]
	for t := range e {
		x0, x1, x2, x3 := a[t], b[t], c[t], d[t]
		e[t] += x0&mE + x1&mE + x2&mE + x3&mE
		o[t] += x0&mO + x1&mO + x2&mO + x3&mO
	}
}

func sub4(e, o, a, b, c, d []uint64, mE, mO uint64) {
	o, a, b, c, d = o[:len(e)], a[:len(e)], b[:len(e)], c[:len(e)], d[:len(e)]
	for t := range e {
		x0, x1, x2, x3 := a[t], b[t], c[t], d[t]
		e[t] -= x0&mE + x1&mE + x2&mE + x3&mE
		o[t] -= x0&mO + x1&mO + x2&mO + x3&mO
	}
}

func add1(e, o, a []uint64, mE, mO uint64) {
	o, a = o[:len(e)], a[:len(e)]
	for t := range e {
		e[t] += a[t] & mE
		o[t] += a[t] & mO
	}
}

func sub1(e, o, a []uint64, mE, mO uint64) {
	o, a = o[:len(e)], a[:len(e)]
	for t := range e {
		e[t] -= a[t] & mE
		o[t] -= a[t] & mO
	}
}
