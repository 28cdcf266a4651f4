package baseline

import (
	"fmt"
	"github.com/idface/idface/harness/testutil"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/template"
)

func randVec(r *rand.Rand, d int) []float32 {
	x := make([]float32, d)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func TestFloatSearchMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{128, 512, 7} {
		db, _ := NewFloatDB(d, 0)
		var rows [][]float32
		for range 3000 {
			x := randVec(r, d)
			rows = append(rows, x)
			if err := db.Add(x); err != nil {
				t.Fatal(err)
			}
		}
		q := rows[1234]
		got, err := db.Search(q, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Row != 1234 || math.Abs(float64(got[0].Cosine)-1) > 1e-5 {
			t.Fatalf("d=%d: genuine not first: %v", d, got)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Cosine > got[i-1].Cosine {
				t.Fatalf("not sorted: %v", got)
			}
		}
		// The second best must be the naive second best.
		best, second := -2.0, -2.0
		qn, _ := Norm(q, d)
		for i, x := range rows {
			if i == 1234 {
				continue
			}
			xn, _ := Norm(x, d)
			var s float64
			for j := range x {
				s += float64(x[j]) * float64(q[j])
			}
			s /= xn * qn
			if s > best {
				best, second = s, best
			} else if s > second {
				second = s
			}
		}
		if math.Abs(float64(got[1].Cosine)-best) > 1e-5 || math.Abs(float64(got[2].Cosine)-second) > 1e-5 {
			t.Fatalf("d=%d: got %v, want %v %v", d, got, best, second)
		}
	}
}

func TestFloatErrors(t *testing.T) {
	db, _ := NewFloatDB(4, 0)
	if db.Add([]float32{1, 2, 3}) == nil || db.Add([]float32{0, 0, 0, 0}) == nil ||
		db.Add([]float32{float32(math.NaN()), 0, 0, 1}) == nil {
		t.Fatal("bad template accepted")
	}
}

func TestTernarySearch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	db, _ := NewTernaryDB(512, 0)
	var zs []template.Ternary
	for range 777 {
		z, _ := template.Transform(randVec(r, 512), 341)
		zs = append(zs, z)
		db.Add(z)
	}
	y, _ := template.Transform(randVec(r, 512), 63)
	got, err := db.Search(y, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if zs[m.Row].Dot(y) != m.Score {
			t.Fatalf("row %d: score %d, want %d", m.Row, m.Score, zs[m.Row].Dot(y))
		}
		if i > 0 && m.Score > got[i-1].Score {
			t.Fatal("not sorted")
		}
	}
	for i, z := range zs {
		if z.Dot(y) > got[0].Score || (z.Dot(y) == got[0].Score && i < got[0].Row) {
			t.Fatalf("row %d beats the reported best", i)
		}
	}
}

// BenchmarkFloatSearch is the non-protected reference: 1,000,000 x 512
// float32 (2 GB) scanned on all cores for the best cosine.
func BenchmarkFloatSearch(b *testing.B) {
	rows := testutil.BenchRows(b)
	r := rand.New(rand.NewPCG(5, 6))
	db, _ := NewFloatDB(512, rows)
	db.data = db.data[:rows*512]
	for i := range db.data {
		db.data[i] = float32(r.NormFloat64()) / 22.6
	}
	q := randVec(r, 512)
	b.Run(fmt.Sprintf("rows=%d/d=512", rows), func(b *testing.B) {
		b.SetBytes(int64(len(db.data) * 4))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := db.Search(q, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkTernarySearch(b *testing.B) {
	rows := testutil.BenchRows(b)
	r := rand.New(rand.NewPCG(7, 8))
	db, _ := NewTernaryDB(512, rows)
	z, _ := template.Transform(randVec(r, 512), 341)
	for range rows {
		db.Add(z)
	}
	for _, beta := range []int{63, 127, 341} {
		y, _ := template.Transform(randVec(r, 512), beta)
		b.Run(fmt.Sprintf("rows=%d/beta=%d", rows, beta), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.Search(y, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
