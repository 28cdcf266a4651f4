package sharing

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idface/idface/harness/testutil"
)

func TestPutRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 63, 64, 65, 300, ChunkWords*64 + 70} {
		for _, r0 := range []int{0, 5} {
			a, _ := NewStore(130, 0)
			b, _ := NewStore(130, 0)
			for i := range r0 { // rows before r0, so a batch starts mid-word
				sh := NewShare(130)
				sh.Plus[0] = uint64(i + 1)
				a.Put(i, sh, true)
				b.Put(i, sh, true)
			}
			shares := make([]Share, n)
			for i := range shares {
				z := testutil.RandTernary(r, 130, 87)
				shares[i] = Share{Plus: z.Plus, Minus: z.Minus}
				if err := a.Put(r0+i, shares[i], true); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.PutRows(r0, shares); err != nil {
				t.Fatal(err)
			}
			if a.Rows() != b.Rows() || a.Live() != b.Live() {
				t.Fatalf("n = %d: rows %d/%d, live %d/%d", n, a.Rows(), b.Rows(), a.Live(), b.Live())
			}
			for row := range a.Rows() {
				x, _ := a.Row(row)
				y, _ := b.Row(row)
				if !slices.Equal(x.Plus, y.Plus) || !slices.Equal(x.Minus, y.Minus) {
					t.Fatalf("n = %d, r0 = %d: row %d differs", n, r0, row)
				}
			}
		}
	}
}

// BenchmarkPutRows compares bulk and row-by-row enrollment into the
// column store (8,192 rows of d = 512, a bulk batch).
func BenchmarkPutRows(b *testing.B) {
	const d, n = 512, 8192
	r := rand.New(rand.NewPCG(1, 2))
	shares := make([]Share, n)
	for i := range shares {
		z := testutil.RandTernary(r, d, 341)
		shares[i] = Share{Plus: z.Plus, Minus: z.Minus}
	}
	b.Run("row_by_row", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ := NewStore(d, n)
			for i, sh := range shares {
				s.Put(i, sh, true)
			}
		}
	})
	b.Run("PutRows", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ := NewStore(d, n)
			s.PutRows(0, shares)
		}
	})
}
