package sharing

import (
	"fmt"
	"github.com/idface/idface/harness/testutil"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/template"
)

// randomStore fills a store's columns with random bits directly: the same
// memory layout and statistics as real shares, built in milliseconds.
func randomStore(b *testing.B, d, rows int) *Store {
	s, err := NewStore(d, rows)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	s.ensure(template.Words(rows) - 1)
	for _, chunk := range s.chunks {
		for _, c := range chunk {
			for i := range c {
				c[i] = r.Uint64()
			}
		}
	}
	s.rows = rows
	for r := range rows {
		s.live.Set(r, true)
	}
	return s
}

func BenchmarkGather(b *testing.B) {
	rows := testutil.BenchRows(b)
	s := randomStore(b, 512, rows)
	r := rand.New(rand.NewPCG(1, 2))
	for _, beta := range []int{63, 127, 341} {
		b.Run(fmt.Sprintf("rows=%d/beta=%d", rows, beta), func(b *testing.B) {
			sel := NewSelection(testutil.RandTernary(r, 512, beta))
			dst := make([]uint64, s.Words()*2*beta)
			b.SetBytes(int64(len(dst) * 8))
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Gather(dst, sel, 0, s.Words()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScore measures the entry's work for mu = 2 over a whole database
// of gathered columns on all cores: XOR, bit-sliced count, best row.
func BenchmarkScore(b *testing.B) {
	rows := testutil.BenchRows(b)
	W := template.Words(rows)
	live := make([]uint64, W)
	for i := range live {
		live[i] = ^uint64(0)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, beta := range []int{63, 127, 341} {
		for _, mu := range []int{2, 3} {
			b.Run(fmt.Sprintf("rows=%d/beta=%d/mu=%d", rows, beta, mu), func(b *testing.B) {
				cols := make([][][]uint64, mu)
				for p := range cols {
					block := make([]uint64, W*2*beta)
					for i := range block {
						block[i] = r.Uint64()
					}
					cols[p] = BlockColumns(block, 2*beta, nil)
				}
				b.SetBytes(int64(mu * W * 2 * beta * 8))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := ScoreParallel(cols, live, beta, 1, -beta, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkGenShare(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	z := testutil.RandTernary(r, 512, 341)
	for _, mu := range []int{2, 3} {
		b.Run(fmt.Sprintf("d=512/mu=%d", mu), func(b *testing.B) {
			stream, _ := NewStream(nil)
			dst := make([]Share, mu)
			for i := range dst {
				dst[i] = NewShare(512)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := GenShareInto(dst, z, stream); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "templates/s")
		})
	}
}

func BenchmarkAppend(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	sh, _ := GenShare(testutil.RandTernary(r, 512, 341), 2, nil)
	s, _ := NewStore(512, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Append(sh[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
