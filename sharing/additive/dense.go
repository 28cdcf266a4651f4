package additive

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// DenseTerm is one term of a dense score: a store and the ring vector
// (d entries) its rows are multiplied by. A hidden-probe holder scores two
// terms, its two shares of the gallery against shares of the query.
type DenseTerm[E Elem] struct {
	S *Store[E]
	Y []E
}

// denseFlush is how many masked products a slot takes before it is
// reduced: each is < 2^k, the slot is 2k bits wide.
func denseFlush[E Elem]() int { return 1<<elemBits[E]() - 1 }

//go:generate sh -c "cd asm && go run . -out ../dense_amd64.s -stubs ../dense_stub_amd64.go -pkg additive"

// ScoreDense computes out[i-r0] = sum_t <row i of terms[t].S, terms[t].Y>
// mod 2^k for every row in [r0, r1), on `workers` goroutines (GOMAXPROCS
// when <= 0). Unlike ScoreShares, whose query is a small public vector,
// here every coefficient is a uniform ring element, so every column of
// every store is read: the kernel is bound by memory bandwidth, and each
// tile of rows is read once for all terms (docs/HIDDEN-PROBES.md). The
// stores must have the same rows; deleted rows score zero.
func ScoreDense[E Elem](out []E, terms []DenseTerm[E], r0, r1, workers int) error {
	if err := checkDense(out, terms, r0, r1); err != nil {
		return err
	}
	outs, all := [][]E{out}, [][]DenseTerm[E]{terms}
	parallelTiles[E](r0, r1, workers, func(a, b int) { scoreDense(outs, all, r0, a, b) })
	return nil
}

// MaxDenseBatch is the most probes ScoreDenseBatch scores in one pass.
const MaxDenseBatch = 32

// ScoreDenseBatch is ScoreDense for up to MaxDenseBatch probes over the
// same stores: out[q][i-r0] = sum_t <row i of terms[q][t].S,
// terms[q][t].Y>. Each tile of rows comes from memory once for all the
// probes, so a batch is bound by compute, not by memory bandwidth. The
// tiles are ScoreDense's (8 MiB of a holder's two stores at d = 512,
// k = 8: they stay in the last-level cache while the probes read them);
// tiles of 32 to 256 words, sized for L2, ran 1.3-3x slower on the AVX2
// kernel, whose calls then do too little each.
func ScoreDenseBatch[E Elem](out [][]E, terms [][]DenseTerm[E], r0, r1, workers int) error {
	if len(out) != len(terms) || len(terms) < 1 || len(terms) > MaxDenseBatch {
		return fmt.Errorf("sharing: a dense batch of %d probes with %d outputs, want 1..%d of each", len(terms), len(out), MaxDenseBatch)
	}
	for q := range terms {
		if err := checkDense(out[q], terms[q], r0, r1); err != nil {
			return fmt.Errorf("probe %d of the batch: %w", q, err)
		}
		if len(terms[q]) != len(terms[0]) {
			return fmt.Errorf("sharing: probe %d of the batch has %d terms, probe 0 %d", q, len(terms[q]), len(terms[0]))
		}
		for t := range terms[q] {
			if terms[q][t].S != terms[0][t].S {
				return fmt.Errorf("sharing: probe %d of the batch scores another store in term %d", q, t)
			}
		}
	}
	parallelTiles[E](r0, r1, workers, func(a, b int) { scoreDense(out, terms, r0, a, b) })
	return nil
}

// checkDense checks one probe's terms and output for rows [r0, r1).
func checkDense[E Elem](out []E, terms []DenseTerm[E], r0, r1 int) error {
	if len(terms) == 0 || terms[0].S == nil {
		return fmt.Errorf("sharing: a dense score needs at least one term with a store")
	}
	s0 := terms[0].S
	for _, t := range terms {
		switch {
		case t.S == nil || t.S.dim != s0.dim || len(t.Y) != s0.dim:
			return fmt.Errorf("%w: dense score terms must all have d = %d", template.ErrDimension, s0.dim)
		case t.S.rows != s0.rows:
			return fmt.Errorf("sharing: dense score over stores of %d and %d rows", s0.rows, t.S.rows)
		}
	}
	switch {
	case r0 < 0 || r1 < r0 || r1 > s0.rows:
		return fmt.Errorf("%w: rows [%d, %d) of %d", sharing.ErrRow, r0, r1, s0.rows)
	case len(out) < r1-r0:
		return fmt.Errorf("sharing: score buffer holds %d entries, want %d", len(out), r1-r0)
	}
	return nil
}

// scoreDense runs the kernel over rows [a, b) for every probe q (outs[q]
// holds rows from base), in tiles of at most scoreTile words that never cross
// a chunk, each tile scored for every probe before the next is read: the
// AVX2 kernel (dense_amd64.s) on whole 32-byte groups, else the pure-Go
// one. There each column word is split into even and odd lanes in 2k-bit
// slots; a lane times a coefficient is < 2^(2k), so it stays in its slot,
// and only its low k bits (the product mod 2^k) are added, so a slot
// takes 2^k - 1 products before it must be reduced.
func scoreDense[E Elem](outs [][]E, terms [][]DenseTerm[E], base, a, b int) {
	if a == b {
		return
	}
	var acc [2][scoreTile]uint64
	var lanes16 [8 * scoreTile]uint16 // the AVX2 kernel's accumulators
	k := uint(elemBits[E]())
	m := swarOf[E]().mE
	nl, cw := lanes[E](), chunkWords[E]()
	flush := denseFlush[E]()
	for w := a / nl; w*nl < b; {
		chunk, off := w/cw, w%cw
		n := min(scoreTile, cw-off, (b-1)/nl+1-w)
		e, o := acc[0][:n], acc[1][:n]
		res := unsafe.Slice((*E)(unsafe.Pointer(&e[0])), n*nl)
		lo, hi := max(a, w*nl), min(b, (w+n)*nl)
		for q, out := range outs {
			if denseAVX2 && off%4 == 0 && n%4 == 0 { // whole 32-byte groups
				avx2Tile(wordBytes(e), terms[q], chunk, off, n, lanes16[:])
			} else {
				swarTile(e, o, terms[q], chunk, off, n, m, k, flush)
			}
			// e now holds rows (w..w+n)*nl in memory order: copy the part
			// in [a, b) (a memmove, any alignment, any byte order).
			copy(out[lo-base:hi-base], res[lo-w*nl:hi-w*nl])
		}
		w += n
	}
}

// swarTile is the pure-Go kernel of one tile: n words at word offset off
// of chunk, the result in e (the tile's rows in memory order).
func swarTile[E Elem](e, o []uint64, terms []DenseTerm[E], chunk, off, n int, m uint64, k uint, flush int) {
	clear(e)
	clear(o)
	adds := 0
	for _, t := range terms {
		cols := t.S.chunks[chunk]
		j := 0
		for ; j+4 <= len(t.Y); j += 4 {
			if adds+4 > flush {
				reduce(e, o, m)
				adds = 0
			}
			mac4(e, o, cols[j][off:off+n], cols[j+1][off:off+n], cols[j+2][off:off+n], cols[j+3][off:off+n],
				uint64(t.Y[j]), uint64(t.Y[j+1]), uint64(t.Y[j+2]), uint64(t.Y[j+3]), m, k)
			adds += 4
		}
		for ; j < len(t.Y); j++ {
			if adds+1 > flush {
				reduce(e, o, m)
				adds = 0
			}
			mac1(e, o, cols[j][off:off+n], uint64(t.Y[j]), m, k)
			adds++
		}
	}
	for t := range e {
		e[t] = e[t]&m | (o[t]&m)<<k
	}
}

// wordBytes views column words as their bytes (rows in memory order).
func wordBytes(w []uint64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w)) }

func reduce(e, o []uint64, m uint64) {
	o = o[:len(e)]
	for t := range e {
		e[t] &= m
		o[t] &= m
	}
}

// mac4 adds four columns' masked lane products: ((x & m) * c) & m is
// every even lane times c mod 2^k, in place.
func mac4(e, o, a, b, c, d []uint64, ca, cb, cc, cd, m uint64, k uint) {
	o, a, b, c, d = o[:len(e)], a[:len(e)], b[:len(e)], c[:len(e)], d[:len(e)]
	for t := range e {
		x0, x1, x2, x3 := a[t], b[t], c[t], d[t]
		e[t] += (x0&m*ca)&m + (x1&m*cb)&m + (x2&m*cc)&m + (x3&m*cd)&m
		o[t] += (x0>>k&m*ca)&m + (x1>>k&m*cb)&m + (x2>>k&m*cc)&m + (x3>>k&m*cd)&m
	}
}

func mac1(e, o, a []uint64, c, m uint64, k uint) {
	o, a = o[:len(e)], a[:len(e)]
	for t := range e {
		x := a[t]
		e[t] += (x & m * c) & m
		o[t] += (x >> k & m * c) & m
	}
}

// readAll is the memory-bandwidth floor of ScoreDense: a plain sequential
// read (an XOR) of every column word of the stores, split across workers
// as ScoreDense splits its rows. Benchmarks and `idface bench` compare the
// kernel with it.
func readAll[E Elem](stores []*Store[E], workers int) uint64 {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	sums := make([]uint64, workers)
	for g := range workers {
		wg.Go(func() {
			var x uint64
			for _, s := range stores {
				for c := g; c < len(s.chunks); c += workers {
					for _, col := range s.chunks[c] {
						for _, v := range col {
							x ^= v
						}
					}
				}
			}
			sums[g] = x
		})
	}
	wg.Wait()
	var x uint64
	for _, v := range sums {
		x ^= v
	}
	return x
}
