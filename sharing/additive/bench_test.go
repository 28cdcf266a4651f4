package additive

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/harness/testutil"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// randomAdditiveStore fills a store's chunks with random words directly:
// the layout and statistics of real shares, built in a fraction of a
// second at 10^6 rows (benchmark data, not shares).
func randomAdditiveStore[E Elem](b *testing.B, d, rows int) *Store[E] {
	s, err := NewStore[E](d, rows)
	if err != nil {
		b.Fatal(err)
	}
	s.ensure(rows - 1)
	r := rand.New(rand.NewPCG(9, 9))
	for _, chunk := range s.chunks {
		for _, c := range chunk {
			for i := range c {
				c[i] = r.Uint64()
			}
		}
	}
	s.rows = rows
	for i := range rows {
		s.live.Set(i, true)
	}
	return s
}

func benchScoreShares[E Elem](b *testing.B, rows int) {
	s := randomAdditiveStore[E](b, 512, rows)
	out := make([]E, rows)
	r := rand.New(rand.NewPCG(1, 2))
	type query struct {
		name string
		beta int
		L    int
	}
	for _, qc := range []query{{"beta=63", 63, 1}, {"beta=127", 127, 1}, {"beta=341", 341, 1}, {"query=4-level/beta=63", 63, 4}} {
		pos, coef := randQuery(r, 512, qc.beta, qc.L)
		q, err := NewQuery(512, pos, coef)
		if err != nil {
			b.Fatal(err)
		}
		for _, workers := range []int{1, 0} {
			name := fmt.Sprintf("rows=%d/k=%d/%s/workers=%d", rows, elemBits[E](), qc.name, workers)
			if workers == 0 {
				name = fmt.Sprintf("rows=%d/k=%d/%s/workers=all", rows, elemBits[E](), qc.name)
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(rows * qc.beta * elemBits[E]() / 8)) // columns read
				b.ReportAllocs()
				for b.Loop() {
					if err := s.ScoreSharesParallel(out, q, 0, rows, workers); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkScoreShares is one share holder's work per query over a whole
// store: sum of the selected columns (SWAR) for every row.
func BenchmarkScoreShares(b *testing.B) {
	rows := testutil.BenchRows(b)
	benchScoreShares[uint8](b, rows)
	benchScoreShares[uint16](b, rows)
}

func benchGenAdditive[E Elem](b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	v := randInt8(r, 512, 1)
	for _, mu := range []int{2, 3} {
		b.Run(fmt.Sprintf("k=%d/d=512/mu=%d", elemBits[E](), mu), func(b *testing.B) {
			stream, _ := sharing.NewStream(nil)
			dst := make([][]E, mu)
			for i := range dst {
				dst[i] = make([]E, 512)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := GenShare(dst, v, stream); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "templates/s")
		})
	}
	b.Run(fmt.Sprintf("k=%d/d=512/mu=2/seeded", elemBits[E]()), func(b *testing.B) {
		seeds := make([]Seed, 1)
		last := make([]E, 512)
		b.ReportAllocs()
		for b.Loop() {
			if err := GenSeededShares(seeds, last, v, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "templates/s")
	})
}

func BenchmarkGenAdditive(b *testing.B) {
	benchGenAdditive[uint8](b)
	benchGenAdditive[uint16](b)
}

func BenchmarkExpandShare(b *testing.B) {
	seed, _ := NewSeed(nil)
	dst := make([]uint8, 512)
	b.SetBytes(512)
	b.ReportAllocs()
	for b.Loop() {
		if err := ExpandShare(dst, &seed); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdditiveAppend(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	sh := make([][]uint8, 2)
	sh[0], sh[1] = make([]uint8, 512), make([]uint8, 512)
	GenShare(sh, randInt8(r, 512, 1), nil)
	s, _ := NewStore[uint8](512, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Append(sh[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func benchPermuteMask[E Elem](b *testing.B, rows int) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]E, rows)
	for i := range src {
		src[i] = E(r.Uint32())
	}
	dst := make([]E, rows)
	for _, c := range [][2]int{{0, 2}, {1, 3}} {
		h, mu := c[0], c[1]
		for _, workers := range []int{1, 0} {
			b.Run(fmt.Sprintf("rows=%d/k=%d/mu=%d/holder=%d/workers=%d", rows, elemBits[E](), mu, h, workers), func(b *testing.B) {
				p := &Permuter{Workers: workers}
				seed, _ := NewSeed(nil)
				b.SetBytes(int64(rows * elemBits[E]() / 8))
				b.ReportAllocs()
				for b.Loop() {
					if err := PermuteMask(p, dst, src, nil, &seed, h, mu); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
	// A holder passes its live rows: every one (a gallery without
	// deletions, the common case) or 90% at random.
	for _, pct := range []int{100, 90} {
		b.Run(fmt.Sprintf("rows=%d/k=%d/mu=2/holder=0/live=%d%%", rows, elemBits[E](), pct), func(b *testing.B) {
			live := make([]uint64, template.Words(rows))
			for i := range rows {
				if r.IntN(100) < pct {
					live[i>>6] |= 1 << uint(i&63)
				}
			}
			p := &Permuter{}
			seed, _ := NewSeed(nil)
			b.SetBytes(int64(rows * elemBits[E]() / 8))
			b.ReportAllocs()
			for b.Loop() {
				if err := PermuteMask(p, dst, src, live, &seed, 0, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPermuteMask is a share holder's permute-and-mask step over a
// whole store's score shares, at BenchRows and 4x BenchRows rows (10^6
// and 4x10^6 by default).
func BenchmarkPermuteMask(b *testing.B) {
	rows := testutil.BenchRows(b)
	benchPermuteMask[uint8](b, rows)
	benchPermuteMask[uint8](b, 4*rows)
	benchPermuteMask[uint16](b, rows)
}

// BenchmarkPermuteMaskPair is a replicated holder's step: two vectors,
// one evaluation of the permutation.
func BenchmarkPermuteMaskPair(b *testing.B) {
	rows := testutil.BenchRows(b)
	r := rand.New(rand.NewPCG(3, 4))
	srcA, srcB, dstA, dstB := make([]uint8, rows), make([]uint8, rows), make([]uint8, rows), make([]uint8, rows)
	for i := range srcA {
		srcA[i], srcB[i] = uint8(r.Uint32()), uint8(r.Uint32())
	}
	for _, workers := range []int{1, 0} {
		b.Run(fmt.Sprintf("rows=%d/k=8/mu=3/workers=%d", rows, workers), func(b *testing.B) {
			p := &Permuter{Workers: workers}
			seed, _ := NewSeed(nil)
			b.SetBytes(int64(2 * rows))
			b.ReportAllocs()
			for b.Loop() {
				if err := PermuteMaskPair(p, dstA, dstB, srcA, srcB, nil, &seed, 1, 2, 3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnpermute is the entry mapping the decider's top-K positions
// back to rows: the Feistel at K points, whatever the number of rows.
func BenchmarkUnpermute(b *testing.B) {
	rows := testutil.BenchRows(b)
	r := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{rows, 4 * rows} {
		for _, k := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("rows=%d/K=%d", n, k), func(b *testing.B) {
				pos := make([]int, k)
				for i := range pos {
					pos[i] = r.IntN(n)
				}
				out := make([]int, k)
				var p Permuter
				seed, _ := NewSeed(nil)
				b.ReportAllocs()
				for b.Loop() {
					if err := p.Unpermute(out, pos, &seed, n); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func benchDecide[E Elem](b *testing.B, rows int) {
	r := rand.New(rand.NewPCG(6, 6))
	// Impostor-like scores (beta = 63 ternary: sd about 6.5) and one
	// genuine; masked shares are uniform, their sum is the score.
	for _, mu := range []int{2, 3} {
		shares := make([][]E, mu)
		for k := range shares {
			shares[k] = make([]E, rows)
		}
		for i := range rows {
			s := E(int(r.NormFloat64() * 6.5))
			if i == rows/2 {
				s = 50
			}
			for k := range mu - 1 {
				shares[k][i] = E(r.Uint32())
				s -= shares[k][i]
			}
			shares[mu-1][i] = s
		}
		// A rejected query (no score reaches 60) and its best score for the
		// statistics: Decide then a second pass for the best, as before
		// DecideBest, against DecideBest's one pass.
		for _, onePass := range []bool{false, true} {
			b.Run(fmt.Sprintf("rows=%d/k=%d/mu=%d/rejected/best/one-pass=%v", rows, elemBits[E](), mu, onePass), func(b *testing.B) {
				b.SetBytes(int64(mu * rows * elemBits[E]() / 8))
				b.ReportAllocs()
				for b.Loop() {
					if onePass {
						if _, _, ok, err := DecideBest(1, 60, 0, shares...); err != nil || !ok {
							b.Fatal(err)
						}
						continue
					}
					if top, err := Decide(1, 60, 0, shares...); err != nil || len(top) > 0 {
						b.Fatal(err)
					}
					if _, err := Decide(1, DeadScore[E]()+1, 0, shares...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		for _, c := range []struct {
			name   string
			k, thr int
		}{{"K=1/threshold=29", 1, 29}, {"K=10/threshold=min", 10, DeadScore[E]() + 1}} {
			for _, workers := range []int{1, 0} {
				b.Run(fmt.Sprintf("rows=%d/k=%d/mu=%d/%s/workers=%d", rows, elemBits[E](), mu, c.name, workers), func(b *testing.B) {
					b.SetBytes(int64(mu * rows * elemBits[E]() / 8))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := Decide(c.k, c.thr, workers, shares...); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkDecide is the decider's work per query: add the mu vectors and
// keep the top K above the threshold.
func BenchmarkDecide(b *testing.B) {
	rows := testutil.BenchRows(b)
	benchDecide[uint8](b, rows)
	benchDecide[uint16](b, rows)
}

func BenchmarkSumShares(b *testing.B) {
	rows := testutil.BenchRows(b)
	a, c, dst := make([]uint8, rows), make([]uint8, rows), make([]uint8, rows)
	b.Run(fmt.Sprintf("rows=%d/k=8/mu=2", rows), func(b *testing.B) {
		b.SetBytes(int64(2 * rows))
		b.ReportAllocs()
		for b.Loop() {
			if err := SumShares(dst, a, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScoreSharesBatch is a holder's pass for Q concurrent T_63
// queries at once (ScoreSharesBatch) beside the Q queries one after
// another (ScoreSharesParallel), both cores: what a holder gains by
// merging the passes its callers ask for at one time.
func BenchmarkScoreSharesBatch(b *testing.B) {
	rows := testutil.BenchRows(b)
	s := randomAdditiveStore[uint8](b, 512, rows)
	r := rand.New(rand.NewPCG(3, 4))
	for _, nq := range []int{1, 2, 4, 8} {
		qs, outs := make([]*Query, nq), make([][]uint8, nq)
		for i := range qs {
			pos, coef := randQuery(r, 512, 63, 1)
			q, err := NewQuery(512, pos, coef)
			if err != nil {
				b.Fatal(err)
			}
			qs[i], outs[i] = q, make([]uint8, rows)
		}
		for _, batched := range []bool{false, true} {
			b.Run(fmt.Sprintf("rows=%d/k=8/beta=63/queries=%d/batched=%v", rows, nq, batched), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if batched {
						if err := s.ScoreSharesBatch(outs, qs, 0, rows, 0); err != nil {
							b.Fatal(err)
						}
						continue
					}
					for i, q := range qs {
						if err := s.ScoreSharesParallel(outs[i], q, 0, rows, 0); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(nq*b.N)/b.Elapsed().Seconds(), "queries/s")
			})
		}
	}
}
