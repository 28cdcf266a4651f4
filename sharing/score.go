package sharing

import (
	"container/heap"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// Match is a scored row: Score is the integer ternary score <x_row, y>.
type Match struct {
	Row   int
	Score int
}

// Better orders matches: higher score first, lower row on ties. Every mode
// breaks ties this way, so results are identical across modes and runs.
func Better(a, b Match) bool { return a.Score > b.Score || (a.Score == b.Score && a.Row < b.Row) }

// maxPlanes bounds the counter planes: counts go up to 2*MaxDim = 2^13.
const maxPlanes = 14

// Scorer keeps the k best rows of a query whose gathered blocks arrive in
// row order. Counting is bit-sliced: for each 64-row word the XOR of the
// parties' 2*beta columns is summed into vertical counters with carry-save
// adders (Harley-Seal), the counters are compared with the current cut in
// bit-sliced form, and only rows that beat it are turned into integers.
// A Scorer is not safe for concurrent use; ScoreParallel runs several.
type Scorer struct {
	beta, n int
	k       int
	nhi     int // counter planes above the four Harley-Seal planes
	cut     int // a row is a candidate only if its count exceeds cut
	top     matchHeap
	x       []uint64
	ptrs    []*uint64 // the AVX2 kernel's column pointers, party by party
}

// NewScorer returns a scorer for queries of weight beta keeping the k best
// rows whose score is at least floor (use -beta to keep any).
func NewScorer(beta, k, floor int) (*Scorer, error) {
	if beta < 1 || 2*beta > 1<<(maxPlanes-1) {
		return nil, fmt.Errorf("sharing: beta = %d out of range", beta)
	}
	if k < 1 {
		return nil, fmt.Errorf("sharing: top-k with k = %d, want >= 1", k)
	}
	n := 2 * beta
	return &Scorer{
		beta: beta, n: n, k: k,
		nhi: max(bits.Len(uint(n))-4, 0),
		cut: max(floor+beta-1, -1),
		top: make(matchHeap, 0, k),
		x:   make([]uint64, tile*n),
	}, nil
}

// tile is the number of 64-row words of every column transposed at a time:
// 512-byte runs per column let the prefetcher stream up to 2*682 columns.
const tile = 64

// Add scores one block of rows. cols[p][i] is party p's selected column i
// (Selection order) over the block's row words; all columns have the same
// length nw. gw0 is the block's first row word in the global row order and
// live the live bitset of its words. The scorer XORs the parties' columns,
// complements the subtracting ones, and counts.
func (s *Scorer) Add(cols [][][]uint64, gw0 int, live []uint64) error {
	if len(cols) == 0 {
		return fmt.Errorf("sharing: no parties to score")
	}
	nw := -1
	for p, cs := range cols {
		if len(cs) != s.n {
			return fmt.Errorf("sharing: party %d sent %d columns, want 2*beta = %d", p, len(cs), s.n)
		}
		for _, c := range cs {
			if nw < 0 {
				nw = len(c)
			}
			if len(c) != nw {
				return fmt.Errorf("sharing: party %d sent columns of %d and %d words", p, nw, len(c))
			}
		}
	}
	if len(live) < nw {
		return fmt.Errorf("sharing: live bitset has %d words, want %d", len(live), nw)
	}
	var planes [maxPlanes]uint64
	n, x := s.n, s.x
	start := 0
	if countAVX2 && nw >= 4 {
		start = s.addAVX2(cols, gw0, live, nw)
	}
	for w := start; w < nw; w += tile {
		tw := min(tile, nw-w)
		// Transpose a tile of tw words of every column into x (word-major),
		// XORing the parties and complementing the subtracting columns.
		for i := range n {
			var inv uint64
			if i >= s.beta {
				inv = ^uint64(0)
			}
			a := cols[0][i][w : w+tw]
			switch len(cols) {
			case 1:
				for t, v := range a {
					x[t*n+i] = v ^ inv
				}
			case 2:
				b := cols[1][i][w : w+tw]
				for t, v := range a {
					x[t*n+i] = v ^ b[t] ^ inv
				}
			default:
				for t, v := range a {
					for _, q := range cols[1:] {
						v ^= q[i][w+t]
					}
					x[t*n+i] = v ^ inv
				}
			}
		}
		for t := range tw {
			lv := live[w+t]
			if lv == 0 {
				continue
			}
			np := s.count(x[t*n:(t+1)*n], &planes)
			s.candidates(planes[:np], lv, gw0+w+t)
		}
	}
	return nil
}

//go:generate sh -c "cd additive/asm && go run . -kernel count -out ../../count_amd64.s -stubs ../../count_stub_amd64.go -pkg sharing"

// addAVX2 scores the block's whole groups of four row words with the AVX2
// kernel, which XORs and counts the columns in place (no transpose), and
// returns the first word it left to the pure-Go path.
func (s *Scorer) addAVX2(cols [][][]uint64, gw0 int, live []uint64, nw int) int {
	s.ptrs = s.ptrs[:0]
	for _, cs := range cols {
		for _, c := range cs {
			s.ptrs = append(s.ptrs, &c[0])
		}
	}
	var planes4 [4 * maxPlanes]uint64
	var planes [maxPlanes]uint64
	np := 4 + s.nhi
	w4 := nw &^ 3
	for w := 0; w < w4; w += 4 {
		if live[w]|live[w+1]|live[w+2]|live[w+3] == 0 {
			continue
		}
		count4(s.ptrs, len(cols), s.n, s.beta, w, &planes4, s.nhi)
		for j := range 4 {
			lv := live[w+j]
			if lv == 0 {
				continue
			}
			for b := range np {
				planes[b] = planes4[4*b+j]
			}
			s.candidates(planes[:np], lv, gw0+w+j)
		}
	}
	clear(s.ptrs) // the block's columns are not the scorer's to keep
	return w4
}

// candidates offers the rows of one word (global row word gw) whose count,
// in planes, beats the cut.
func (s *Scorer) candidates(planes []uint64, lv uint64, gw int) {
	mask := greater(planes, s.cut) & lv
	for ; mask != 0; mask &= mask - 1 {
		r := bits.TrailingZeros64(mask)
		c := 0
		for b := range planes {
			c |= int(planes[b]>>uint(r)&1) << uint(b)
		}
		s.offer(Match{Row: gw*64 + r, Score: c - s.beta})
	}
}

func csa(a, b, c uint64) (hi, lo uint64) {
	u := a ^ b
	return a&b | u&c, u ^ c
}

// count sums the bit vectors x into planes (LSB first) and returns the
// number of planes used.
func (s *Scorer) count(x []uint64, planes *[maxPlanes]uint64) int {
	var ones, twos, fours, eights, twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens uint64
	hi := planes[4 : 4+s.nhi]
	clear(hi)
	i := 0
	for ; i+16 <= len(x); i += 16 {
		y := x[i : i+16 : i+16]
		twosA, ones = csa(ones, y[0], y[1])
		twosB, ones = csa(ones, y[2], y[3])
		foursA, twos = csa(twos, twosA, twosB)
		twosA, ones = csa(ones, y[4], y[5])
		twosB, ones = csa(ones, y[6], y[7])
		foursB, twos = csa(twos, twosA, twosB)
		eightsA, fours = csa(fours, foursA, foursB)
		twosA, ones = csa(ones, y[8], y[9])
		twosB, ones = csa(ones, y[10], y[11])
		foursA, twos = csa(twos, twosA, twosB)
		twosA, ones = csa(ones, y[12], y[13])
		twosB, ones = csa(ones, y[14], y[15])
		foursB, twos = csa(twos, twosA, twosB)
		eightsB, fours = csa(fours, foursA, foursB)
		sixteens, eights = csa(eights, eightsA, eightsB)
		// Ripple the sixteens into the upper planes; a fixed trip count
		// keeps it branch-free.
		c := sixteens
		for b := range hi {
			hi[b], c = hi[b]^c, hi[b]&c
		}
	}
	planes[0], planes[1], planes[2], planes[3] = ones, twos, fours, eights
	np := 4 + s.nhi
	for ; i < len(x); i++ { // the n mod 16 remaining columns
		c := x[i]
		for b := 0; b < np && c != 0; b++ {
			planes[b], c = planes[b]^c, planes[b]&c
		}
	}
	return np
}

// greater returns the rows whose bit-sliced count exceeds k.
func greater(planes []uint64, k int) uint64 {
	if k < 0 {
		return ^uint64(0)
	}
	if k>>uint(len(planes)) != 0 {
		return 0
	}
	var gt uint64
	eq := ^uint64(0)
	for b := len(planes) - 1; b >= 0; b-- {
		if k>>uint(b)&1 == 1 {
			eq &= planes[b]
		} else {
			gt |= eq & planes[b]
			eq &^= planes[b]
		}
	}
	return gt
}

func (s *Scorer) offer(m Match) {
	if len(s.top) < s.k {
		heap.Push(&s.top, m)
	} else if Better(m, s.top[0]) {
		s.top[0] = m
		heap.Fix(&s.top, 0)
	} else {
		return
	}
	if len(s.top) == s.k {
		s.cut = max(s.cut, s.top[0].Score+s.beta)
	}
}

// Result returns the k best rows seen, best first.
func (s *Scorer) Result() []Match {
	out := slices.Clone([]Match(s.top))
	slices.SortFunc(out, CompareMatches)
	return out
}

// Reset clears the scorer for a new query with the same parameters.
func (s *Scorer) Reset(floor int) {
	s.top = s.top[:0]
	s.cut = max(floor+s.beta-1, -1)
}

// CompareMatches is Better as a sort order (slices.SortFunc).
func CompareMatches(a, b Match) int {
	switch {
	case Better(a, b):
		return -1
	case Better(b, a):
		return 1
	}
	return 0
}

// Merge combines top-k lists of disjoint row ranges into the overall top k.
func Merge(k int, lists ...[]Match) []Match {
	var all []Match
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortFunc(all, CompareMatches)
	return all[:min(k, len(all))]
}

// ScoreParallel scores the columns of whole row ranges (cols[p][i] as in
// Scorer.Add, row words from 0) on `workers` goroutines (GOMAXPROCS when
// workers <= 0), splitting the words evenly.
func ScoreParallel(cols [][][]uint64, live []uint64, beta, k, floor, workers int) ([]Match, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if len(cols) == 0 || len(cols[0]) != 2*beta {
		return nil, fmt.Errorf("sharing: columns do not match beta = %d", beta)
	}
	nw := len(cols[0][0])
	workers = max(min(workers, nw/tile), 1)
	results := make([][]Match, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for g := range workers {
		lo, hi := nw*g/workers, nw*(g+1)/workers
		wg.Go(func() {
			sc, err := NewScorer(beta, k, floor)
			if err != nil {
				errs[g] = err
				return
			}
			errs[g] = sc.Add(SliceWords(cols, lo, hi), lo, live[lo:min(hi, len(live))])
			results[g] = sc.Result()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return Merge(k, results...), nil
}

// SliceWords returns the parties' columns restricted to words [lo, hi).
func SliceWords(cols [][][]uint64, lo, hi int) [][][]uint64 {
	out := make([][][]uint64, len(cols))
	for p, cs := range cols {
		out[p] = make([][]uint64, len(cs))
		for i, c := range cs {
			if hi > len(c) {
				hi = len(c)
			}
			out[p][i] = c[min(lo, hi):hi]
		}
	}
	return out
}

// matchHeap is a min-heap with the worst match on top.
type matchHeap []Match

func (h matchHeap) Len() int           { return len(h) }
func (h matchHeap) Less(i, j int) bool { return Better(h[j], h[i]) }
func (h matchHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *matchHeap) Push(x any)        { *h = append(*h, x.(Match)) }
func (h *matchHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	*h = old[:len(old)-1]
	return m
}
