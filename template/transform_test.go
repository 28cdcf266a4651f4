package template

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refTransform is the definition of T_a written as plainly as possible: sort
// indices by |x_j| descending, lower index first on ties, take the first a.
func refTransform(x []float64, a int) []int8 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return math.Abs(x[idx[i]]) > math.Abs(x[idx[j]]) })
	out := make([]int8, len(x))
	for _, j := range idx[:a] {
		if x[j] < 0 {
			out[j] = -1
		} else {
			out[j] = 1
		}
	}
	return out
}

func randUnit(r *rand.Rand, d int) []float64 {
	x := make([]float64, d)
	var n float64
	for i := range x {
		x[i] = r.NormFloat64()
		n += x[i] * x[i]
	}
	n = math.Sqrt(n)
	for i := range x {
		x[i] /= n
	}
	return x
}

func TestTransformMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{128, 192, 256, 512} {
		for _, a := range []int{1, 2, 63, d / 3, DefaultAlpha(d), d - 1, d} {
			if a > d {
				continue
			}
			t.Run(fmt.Sprintf("d=%d/a=%d", d, a), func(t *testing.T) {
				for trial := 0; trial < 50; trial++ {
					x := randUnit(r, d)
					if trial%5 == 0 { // force ties and exact zeros
						for j := range x {
							x[j] = math.Round(x[j]*8) / 8
						}
						x[0] = 1
					}
					got, err := Transform(x, a)
					if err != nil {
						t.Fatal(err)
					}
					want := refTransform(x, a)
					if g := got.Int8(); fmt.Sprint(g) != fmt.Sprint(want) {
						t.Fatalf("trial %d: T_a differs from the definition", trial)
					}
					if err := got.Validate(a); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

func TestTransformTiesLowerIndexWins(t *testing.T) {
	x := []float32{0.5, -0.5, 0.5, -0.5, 0.1}
	got, err := Transform(x, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int8{1, -1, 1, 0, 0}; fmt.Sprint(got.Int8()) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got.Int8(), want)
	}
	// Fewer nonzeros than a: zeros are taken in index order as +1.
	got, err = Transform([]float64{0, -2, 0, 0}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int8{1, -1, 1, 0}; fmt.Sprint(got.Int8()) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got.Int8(), want)
	}
}

func TestTransformScaleInvariantAndPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100; i++ {
		x := randUnit(r, 512)
		x32 := make([]float32, len(x))
		scaled := make([]float32, len(x))
		for j := range x {
			x32[j] = float32(x[j])
			scaled[j] = x32[j] * 64 // exact in binary floating point
		}
		a, _ := Transform(x32, 341)
		b, _ := Transform(scaled, 341)
		if a.Dot(b) != 341 {
			t.Fatal("scaling the input changed T_a")
		}
	}
}

func TestTransformErrors(t *testing.T) {
	tr, err := NewTransformer(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	out := NewTernary(4)
	cases := []struct {
		name string
		x    []float64
		want error
	}{
		{"wrong dimension", []float64{1, 2, 3}, ErrDimension},
		{"NaN", []float64{1, math.NaN(), 0, 0}, ErrNotFinite},
		{"Inf", []float64{1, math.Inf(-1), 0, 0}, ErrNotFinite},
		{"zero", []float64{0, 0, 0, 0}, ErrZero},
	}
	for _, c := range cases {
		if err := Apply(tr, c.x, out); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	for _, a := range []int{0, -1, 5} {
		if _, err := NewTransformer(4, a); !errors.Is(err, ErrWeight) {
			t.Errorf("a = %d: got %v, want ErrWeight", a, err)
		}
	}
	if _, err := NewTransformer(0, 1); !errors.Is(err, ErrDimension) {
		t.Errorf("d = 0: got %v", err)
	}
}

func TestTernaryValidate(t *testing.T) {
	z, _ := Transform([]float64{1, -1, 0.5, 0}, 2)
	if err := z.Validate(2); err != nil {
		t.Fatal(err)
	}
	bad := NewTernary(4)
	bad.Plus[0], bad.Minus[0] = 1, 1
	if bad.Validate(-1) == nil {
		t.Error("overlapping signs accepted")
	}
	bad = NewTernary(4)
	bad.Plus[0] = 1 << 10
	if bad.Validate(-1) == nil {
		t.Error("bit past the dimension accepted")
	}
	if z.Validate(3) == nil {
		t.Error("wrong weight accepted")
	}
}

func TestThreshold(t *testing.T) {
	for _, c := range []struct {
		tau         float64
		alpha, beta int
		min         int
	}{
		{0.3, 341, 63, 44}, // 0.3*sqrt(21483) = 43.97
		{0.3, 341, 341, 103},
		{0, 341, 341, 1},
		{-0.1, 100, 100, -9},
		{0.5, 4, 4, 3}, // threshold exactly 2: s must exceed it
	} {
		got := MinAcceptScore(c.tau, c.alpha, c.beta)
		if got != c.min {
			t.Errorf("MinAcceptScore(%v, %d, %d) = %d, want %d", c.tau, c.alpha, c.beta, got, c.min)
		}
		if float64(got) <= ScoreThreshold(c.tau, c.alpha, c.beta) || float64(got-1) > ScoreThreshold(c.tau, c.alpha, c.beta) {
			t.Errorf("MinAcceptScore inconsistent with ScoreThreshold")
		}
	}
	if c := Cosine(341, 341, 341); c != 1 {
		t.Errorf("Cosine(341,341,341) = %v", c)
	}
}

func BenchmarkTransform(b *testing.B) {
	for _, d := range []int{128, 512} {
		b.Run(fmt.Sprintf("d=%d/a=%d", d, DefaultAlpha(d)), func(b *testing.B) {
			r := rand.New(rand.NewPCG(5, 6))
			xs := make([][]float32, 256)
			for i := range xs {
				v := randUnit(r, d)
				xs[i] = make([]float32, d)
				for j := range v {
					xs[i][j] = float32(v[j])
				}
			}
			tr, _ := NewTransformer(d, DefaultAlpha(d))
			out := NewTernary(d)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := Apply(tr, xs[i&255], out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "templates/s")
		})
	}
}
