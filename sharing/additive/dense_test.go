package additive

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idface/idface/harness/testutil"
)

// naiveDense is the definition: sum over terms of <row i, y> mod 2^k.
func naiveDense[E Elem](rows [][][]E, ys [][]E, i int) E {
	var s E
	for t, y := range ys {
		for j, c := range y {
			s += c * rows[t][i][j]
		}
	}
	return s
}

func testScoreDense[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		d, rows, terms int
		pattern        string
	}{
		{512, 1000, 2, "random"},
		{512, 300, 2, "max"}, // every product (2^k-1)^2: more than a slot takes unreduced
		{512, 300, 3, "half"},
		{130, 777, 1, "random"},  // d not a multiple of 4
		{32, 70000, 2, "random"}, // crosses a chunk
		{8, 9, 2, "random"},
	} {
		name := fmt.Sprintf("k=%d/d=%d/rows=%d/terms=%d/%s", elemBits[E](), c.d, c.rows, c.terms, c.pattern)
		t.Run(name, func(t *testing.T) {
			terms := make([]DenseTerm[E], c.terms)
			rows := make([][][]E, c.terms)
			ys := make([][]E, c.terms)
			for i := range terms {
				s, all := fillStore[E](t, r, c.d, c.rows, c.pattern)
				y := make([]E, c.d)
				for j := range y {
					y[j] = E(r.Uint32())
					if c.pattern == "max" {
						y[j] = ^E(0)
					}
				}
				terms[i], rows[i], ys[i] = DenseTerm[E]{S: s, Y: y}, all, y
			}
			for _, rg := range [][2]int{{0, c.rows}, {3, c.rows - 2}, {c.rows / 3, c.rows/3 + 1}} {
				r0, r1 := max(rg[0], 0), max(min(rg[1], c.rows), max(rg[0], 0))
				for _, workers := range []int{1, 3} {
					out := make([]E, r1-r0+1)
					if err := ScoreDense(out, terms, r0, r1, workers); err != nil {
						t.Fatal(err)
					}
					for i := r0; i < r1; i++ {
						if want := naiveDense(rows, ys, i); out[i-r0] != want {
							t.Fatalf("rows [%d, %d) row %d, %d workers: %d, want %d", r0, r1, i, workers, out[i-r0], want)
						}
					}
					if out[r1-r0] != 0 {
						t.Fatal("wrote past r1")
					}
				}
			}
		})
	}
}

// TestScoreDense checks the dense kernel against the definition on random
// stores and coefficients, at the extremes of the ring, across chunks and
// on sub-ranges, in both rings.
func TestScoreDense(t *testing.T) {
	testScoreDense[uint8](t)
	testScoreDense[uint16](t)
}

func TestScoreDenseErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	a, _ := fillStore[uint8](t, r, 16, 10, "random")
	b, _ := fillStore[uint8](t, r, 16, 11, "random")
	c, _ := fillStore[uint8](t, r, 8, 10, "random")
	y := make([]uint8, 16)
	out := make([]uint8, 10)
	for name, terms := range map[string][]DenseTerm[uint8]{
		"none":      nil,
		"rows":      {{a, y}, {b, y}},
		"dimension": {{a, y}, {c, y}},
		"short y":   {{a, y[:8]}},
		"nil store": {{nil, y}},
	} {
		if err := ScoreDense(out, terms, 0, 10, 1); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := ScoreDense(out, []DenseTerm[uint8]{{a, y}}, 0, 11, 1); err == nil {
		t.Error("rows past the store accepted")
	}
	if err := ScoreDense(out[:5], []DenseTerm[uint8]{{a, y}}, 0, 10, 1); err == nil {
		t.Error("short output accepted")
	}
}

// BenchmarkScoreDense is a hidden-probe holder's work per query: its two
// shares of every row against dense query shares (two terms, 2d bytes
// per row at k = 8), beside the floor: a plain sequential read of the
// same bytes in the same run.
func BenchmarkScoreDense(b *testing.B) {
	rows := testutil.BenchRows(b)
	benchScoreDense[uint8](b, rows)
	benchScoreDense[uint16](b, rows)
}

func benchScoreDense[E Elem](b *testing.B, rows int) {
	const d = 512
	s0 := randomAdditiveStore[E](b, d, rows)
	s1 := randomAdditiveStore[E](b, d, rows)
	r := rand.New(rand.NewPCG(3, 4))
	terms := []DenseTerm[E]{{S: s0, Y: make([]E, d)}, {S: s1, Y: make([]E, d)}}
	for _, t := range terms {
		for j := range t.Y {
			t.Y[j] = E(r.Uint32())
		}
	}
	out := make([]E, rows)
	bytes := int64(2 * rows * d * elemBits[E]() / 8)
	for _, workers := range []int{1, 0} {
		w := fmt.Sprint(workers)
		if workers == 0 {
			w = "all"
		}
		b.Run(fmt.Sprintf("rows=%d/k=%d/terms=2/workers=%s", rows, elemBits[E](), w), func(b *testing.B) {
			b.SetBytes(bytes)
			b.ReportAllocs()
			for b.Loop() {
				if err := ScoreDense(out, terms, 0, rows, workers); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("rows=%d/k=%d/floor/workers=%s", rows, elemBits[E](), w), func(b *testing.B) {
			b.SetBytes(bytes)
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				sink += readAll([]*Store[E]{s0, s1}, workers)
			}
			if sink == 1 {
				b.Log(sink)
			}
		})
	}
}

// TestDenseKernelsAgree runs the AVX2 tile kernel (where this build and
// CPU have it) and the pure-Go one on the same random tiles, coefficients
// at the extremes and zero included: every path gives the same bytes.
// IDFACE_PUREGO=1 or -tags purego makes ScoreDense use the pure-Go path.
func TestDenseKernelsAgree(t *testing.T) {
	if !denseAVX2 {
		t.Skip("no AVX2 kernel in this build or on this CPU: ScoreDense runs the pure-Go kernel, which TestScoreDense checks")
	}
	kernelsAgree[uint8](t)
	kernelsAgree[uint16](t)
}

func kernelsAgree[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	top := E(1)<<(elemBits[E]()-1) | (E(1)<<(elemBits[E]()-1) - 1)
	for _, c := range []struct{ d, rows, terms int }{{512, 3 * ChunkRows / 2, 2}, {37, 9000, 3}, {4, 4096, 1}} {
		terms := make([]DenseTerm[E], c.terms)
		for i := range terms {
			s, _ := fillStore[E](t, r, c.d, c.rows, "random")
			y := make([]E, c.d)
			for j := range y {
				switch r.IntN(4) {
				case 0:
					y[j] = 0
				case 1:
					y[j] = top
				default:
					y[j] = E(r.Uint32())
				}
			}
			terms[i] = DenseTerm[E]{S: s, Y: y}
		}
		cw := chunkWords[E]()
		words := (c.rows + lanes[E]() - 1) / lanes[E]()
		for range 20 {
			off := 4 * r.IntN(min(words, cw)/4)
			chunk := 0
			if words > cw && r.IntN(2) == 0 {
				chunk, off = 1, 4*r.IntN((words-cw)/4)
			}
			n := 4 * (1 + r.IntN(min(scoreTile, cw-off, words-chunk*cw-off)/4))
			e, o := make([]uint64, n), make([]uint64, n)
			sw := swarOf[E]()
			swarTile(e, o, terms, chunk, off, n, sw.mE, uint(elemBits[E]()), denseFlush[E]())
			got := make([]uint64, n)
			avx2Tile(wordBytes(got), terms, chunk, off, n, make([]uint16, 8*scoreTile))
			for i := range e {
				if got[i] != e[i] {
					t.Fatalf("k %d, d %d, chunk %d, words [%d, %d): word %d AVX2 %#x, pure Go %#x", elemBits[E](), c.d, chunk, off, off+n, i, got[i], e[i])
				}
			}
		}
	}
}

// TestScoreDenseBatch: a batch of probes over the same stores gives each
// probe exactly what ScoreDense gives it, in both rings, on sub-ranges,
// across chunks, with any number of workers; malformed batches are
// refused.
func TestScoreDenseBatch(t *testing.T) {
	testScoreDenseBatch[uint8](t)
	testScoreDenseBatch[uint16](t)
}

func testScoreDenseBatch[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	top := E(1)<<(elemBits[E]()-1) | (E(1)<<(elemBits[E]()-1) - 1)
	for _, c := range []struct{ d, rows, probes int }{{64, 70000, 5}, {512, 3000, MaxDenseBatch}, {13, 777, 1}, {37, 9000, 2}, {37, 9000, 3}, {21, 5000, 7}} {
		a, _ := fillStore[E](t, r, c.d, c.rows, "random")
		b, _ := fillStore[E](t, r, c.d, c.rows, "random")
		terms := make([][]DenseTerm[E], c.probes)
		for q := range terms {
			for _, s := range []*Store[E]{a, b} {
				y := make([]E, c.d)
				for j := range y {
					// Column 1 is 0 in every probe (skipped by the batched
					// kernel); the extremes of a signed byte come often.
					switch {
					case j == 1:
					case r.IntN(4) == 0:
						y[j] = []E{0, 1 << (elemBits[E]() - 1), top}[r.IntN(3)]
					default:
						y[j] = E(r.Uint32())
					}
				}
				terms[q] = append(terms[q], DenseTerm[E]{S: s, Y: y})
			}
		}
		for _, rg := range [][2]int{{0, c.rows}, {5, c.rows - 3}} {
			for _, workers := range []int{1, 3} {
				out := make([][]E, c.probes)
				for q := range out {
					out[q] = make([]E, rg[1]-rg[0])
				}
				if err := ScoreDenseBatch(out, terms, rg[0], rg[1], workers); err != nil {
					t.Fatal(err)
				}
				for q := range out {
					want := make([]E, rg[1]-rg[0])
					if err := ScoreDense(want, terms[q], rg[0], rg[1], 1); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(out[q], want) {
						t.Fatalf("k %d, d %d, rows [%d, %d), probe %d of %d: the batch differs from ScoreDense", elemBits[E](), c.d, rg[0], rg[1], q, c.probes)
					}
				}
			}
		}
		other, _ := fillStore[E](t, r, c.d, c.rows, "random")
		bad := slices.Clone(terms)
		bad[0] = []DenseTerm[E]{{S: other, Y: terms[0][0].Y}, terms[0][1]}
		out := make([][]E, len(bad))
		for q := range out {
			out[q] = make([]E, c.rows)
		}
		if err := ScoreDenseBatch(out, bad, 0, c.rows, 1); err == nil && c.probes > 1 {
			t.Fatal("a batch over two different stores accepted")
		}
		if err := ScoreDenseBatch(out[:len(out)-1], terms, 0, c.rows, 1); err == nil {
			t.Fatal("a batch with an output missing accepted")
		}
	}
	if err := ScoreDenseBatch[E](nil, nil, 0, 0, 1); err == nil {
		t.Fatal("an empty batch accepted")
	}
}

// BenchmarkScoreDenseBatch is a hidden-probe holder's work for a batch of
// probes: each tile of its two shares read once for all of them. probes/s
// against BenchmarkScoreDense's single-probe rate is the gain of
// batching at the entry.
func BenchmarkScoreDenseBatch(b *testing.B) {
	rows := testutil.BenchRows(b)
	benchScoreDenseBatch[uint8](b, rows)
	benchScoreDenseBatch[uint16](b, rows)
}

func benchScoreDenseBatch[E Elem](b *testing.B, rows int) {
	const d = 512
	s0 := randomAdditiveStore[E](b, d, rows)
	s1 := randomAdditiveStore[E](b, d, rows)
	r := rand.New(rand.NewPCG(5, 6))
	for _, probes := range []int{1, 8, MaxDenseBatch} {
		terms := make([][]DenseTerm[E], probes)
		out := make([][]E, probes)
		for q := range terms {
			for _, s := range []*Store[E]{s0, s1} {
				y := make([]E, d)
				for j := range y {
					y[j] = E(r.Uint32())
				}
				terms[q] = append(terms[q], DenseTerm[E]{S: s, Y: y})
			}
			out[q] = make([]E, rows)
		}
		b.Run(fmt.Sprintf("rows=%d/k=%d/probes=%d/workers=all", rows, elemBits[E](), probes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ScoreDenseBatch(out, terms, 0, rows, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(probes)*float64(b.N)/b.Elapsed().Seconds(), "probes/s")
		})
	}
}
