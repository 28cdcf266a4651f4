package template

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func randVec(r *rand.Rand, d int) []float64 {
	x := make([]float64, d)
	for j := range x {
		x[j] = r.NormFloat64()
	}
	return x
}

// tiedVec draws coordinates from a handful of values (ties everywhere),
// zeros and -0 included.
func tiedVec(r *rand.Rand, d int) []float64 {
	vals := []float64{0, math.Copysign(0, -1), 0.5, -0.5, 1, -1, 2}
	x := make([]float64, d)
	for j := range x {
		x[j] = vals[r.IntN(len(vals))]
	}
	x[r.IntN(d)] = 3 // never all zero
	return x
}

func TestLevelsOneIsTernary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{8, 128, 512} {
		for _, a := range []int{1, d / 8, DefaultAlpha(d), d} {
			for _, kind := range []string{"normal", "ties"} {
				t.Run(fmt.Sprintf("d=%d/a=%d/%s", d, a, kind), func(t *testing.T) {
					lv := TernaryLevels(a)
					tr, err := NewLevelTransformer(d, lv)
					if err != nil {
						t.Fatal(err)
					}
					got := make([]int8, d)
					for range 50 {
						x := randVec(r, d)
						if kind == "ties" {
							x = tiedVec(r, d)
						}
						if err := ApplyLevels(tr, x, got); err != nil {
							t.Fatal(err)
						}
						want, err := Transform(x, a)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got, want.Int8()) {
							t.Fatalf("levels 1:%d differ from T_a on %v", a, x)
						}
					}
				})
			}
		}
	}
}

func TestLevelsConstantNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, spec := range []string{"1:341", "2:100,241", "4:40,80,120,101", "4:32,64,96,149", "3:1,1,1", "8:8,8,8,8,8,8,8,8"} {
		lv, err := ParseLevels(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []int{lv.Support(), 512} {
			t.Run(fmt.Sprintf("levels=%s/d=%d", spec, d), func(t *testing.T) {
				tr, err := NewLevelTransformer(d, lv)
				if err != nil {
					t.Fatal(err)
				}
				v := make([]int8, d)
				for i := range 100 {
					x := randVec(r, d)
					if i%2 == 1 {
						x = tiedVec(r, d)
					}
					if err := ApplyLevels(tr, x, v); err != nil {
						t.Fatal(err)
					}
					if n := DotInt8(v, v); n != lv.NormSq() {
						t.Fatalf("||v||^2 = %d, want %d", n, lv.NormSq())
					}
					// Every level holds exactly its count.
					hist := make([]int, lv.L()+1)
					for _, c := range v {
						hist[max(c, -c)]++
					}
					for l, a := range lv.Counts {
						if hist[lv.L()-l] != a {
							t.Fatalf("magnitude %d on %d coordinates, want %d", lv.L()-l, hist[lv.L()-l], a)
						}
					}
					// In the order (|x_j| descending, j ascending) magnitudes never
					// increase; signs follow x (zero counts as positive).
					order := make([]int, d)
					for j := range order {
						order[j] = j
						if v[j] != 0 && (x[j] < 0) != (v[j] < 0) {
							t.Fatalf("coordinate %d: sign of %v became %d", j, x[j], v[j])
						}
					}
					slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(abs(x[b]), abs(x[a])) })
					for i := 1; i < d; i++ {
						if abs8(v[order[i]]) > abs8(v[order[i-1]]) {
							t.Fatalf("coordinate %d (|x| = %v) has magnitude %d above coordinate %d's %d", order[i], x[order[i]], v[order[i]], order[i-1], v[order[i-1]])
						}
					}
				}
			})
		}
	}
}

func abs(v float64) float64 { return max(v, -v) }
func abs8(v int8) int8      { return max(v, -v) }

func TestLevelsTies(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		spec string
		want []int8
	}{
		{[]float64{1, 1, 1, 1}, "2:1,2", []int8{2, 1, 1, 0}},
		{[]float64{-1, 1, -1, 1}, "2:2,1", []int8{-2, 2, -1, 0}},
		{[]float64{0, 3, 0, math.Copysign(0, -1)}, "3:1,1,1", []int8{2, 3, 1, 0}}, // zeros: lower index, positive
		{[]float64{0.1, -5, 2, 2, 0.3}, "3:1,2,1", []int8{0, -3, 2, 2, 1}},
	} {
		t.Run(fmt.Sprintf("levels=%s/x=%v", c.spec, c.x), func(t *testing.T) {
			lv, err := ParseLevels(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := TransformLevels(c.x, lv)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestLevelsErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"", "want L:a1"},
		{"341", "want L:a1"},
		{"0:1", "L ="},
		{"128:1", "L ="},
		{"x:1", "L ="},
		{"2:1", "L = 2 but 1 counts"},
		{"1:1,2", "L = 1 but 2 counts"},
		{"2:1,", "count 2"},
		{"2:1,a", "count 2"},
		{"2:0,3", "a_1 = 0"},
		{"2:3,-1", "a_2 = -1"},
		{"1:99999", "a_1 = 99999"},
	} {
		t.Run(fmt.Sprintf("spec=%q", c.spec), func(t *testing.T) {
			_, err := ParseLevels(c.spec)
			if err == nil || !errors.Is(err, ErrLevels) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "template: ") {
				t.Fatalf("error %v, want ErrLevels mentioning %q", err, c.want)
			}
		})
	}
	lv, _ := ParseLevels("2:300,300")
	if err := lv.Validate(512); err == nil || !strings.Contains(err.Error(), "600 coordinates") {
		t.Fatalf("sum > d: %v", err)
	}
	if _, err := NewLevelTransformer(512, Levels{}); err == nil {
		t.Fatal("zero Levels accepted")
	}
	tr, _ := NewLevelTransformer(4, TernaryLevels(2))
	for name, x := range map[string][]float64{"zero": {0, 0, 0, 0}, "nan": {1, 2, nan(), 0}, "short": {1, 2}} {
		if err := ApplyLevels(tr, x, make([]int8, 4)); err == nil {
			t.Errorf("%s input accepted", name)
		}
	}
	if err := ApplyLevels(tr, []float64{1, 2, 3, 4}, make([]int8, 3)); err == nil {
		t.Error("short output accepted")
	}
}

func nan() float64 { var z float64; return z / z }

func TestLevelsStringRoundTrip(t *testing.T) {
	for _, spec := range []string{"1:341", "4:40,80,120,101", " 2: 3 , 4 "} {
		lv, err := ParseLevels(spec)
		if err != nil {
			t.Fatal(err)
		}
		b, err := lv.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Levels
		if err := back.UnmarshalText(b); err != nil || !slices.Equal(back.Counts, lv.Counts) {
			t.Fatalf("%q -> %q -> %v (%v)", spec, b, back, err)
		}
	}
}

func TestMaxAbsScore(t *testing.T) {
	for _, c := range []struct {
		g, q string
		want int
	}{
		{"1:341", "1:63", 63},
		{"1:341", "1:127", 127},
		{"1:341", "1:341", 341},
		{"1:63", "1:341", 63},
		{"4:32,64,96,149", "1:63", 32*4 + 31*3},
		{"2:40,301", "1:63", 40*2 + 23},
		{"2:63,278", "1:63", 126},
		{"4:40,80,120,101", "2:10,20", 10*4*2 + 20*4},
		{"4:9,26,77,229", "1:63", 9*4 + 26*3 + 28*2},     // the d = 512 pick: k = 16
		{"4:2,6,19,58", "1:16", 2*4 + 6*3 + 8*2},         // the d = 128 pick: k = 8
		{"4:2,6,19,58", "1:85", 2*4 + 6*3 + 19*2 + 58*1}, // still k = 8
	} {
		t.Run(fmt.Sprintf("g=%s/q=%s", c.g, c.q), func(t *testing.T) {
			g, _ := ParseLevels(c.g)
			q, _ := ParseLevels(c.q)
			if got := MaxAbsScore(g, q); got != c.want {
				t.Fatalf("MaxAbsScore = %d, want %d", got, c.want)
			}
			// Reached by a template against itself with distinct magnitudes.
			x := make([]float64, 512)
			for j := range x {
				x[j] = float64(512 - j)
			}
			gv, _ := TransformLevels(x, g)
			qv, _ := TransformLevels(x, q)
			if s := DotInt8(gv, qv); s != c.want {
				t.Fatalf("aligned score %d, want the bound %d", s, c.want)
			}
		})
	}
}

func TestLevelsThresholdReducesToTernary(t *testing.T) {
	for _, ab := range [][2]int{{341, 63}, {341, 127}, {341, 341}, {85, 21}, {512, 512}} {
		for _, tau := range []float64{-1, -0.3, 0, 0.1, 0.2, 0.25, 0.3, 1 / 3.0, 0.5, 0.99, 1} {
			g, q := TernaryLevels(ab[0]), TernaryLevels(ab[1])
			if got, want := LevelsMinAcceptScore(tau, g, q), MinAcceptScore(tau, ab[0], ab[1]); got != want {
				t.Errorf("alpha=%d/beta=%d/tau=%v: %d, want %d", ab[0], ab[1], tau, got, want)
			}
		}
	}
	g, _ := ParseLevels("4:40,80,120,101")
	q := TernaryLevels(63)
	for _, tau := range []float64{0, 0.2, 0.35} {
		s := LevelsMinAcceptScore(tau, g, q)
		if !(LevelsCosine(s, g, q) > tau) || LevelsCosine(s-1, g, q) > tau {
			t.Errorf("tau=%v: least accepted score %d is not the least s with cos > tau", tau, s)
		}
	}
}

func FuzzParseLevels(f *testing.F) {
	for _, s := range []string{"1:341", "4:40,80,120,101", "2:1,", ":", "3:1,2,3,4", "1:-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lv, err := ParseLevels(s)
		if err != nil {
			return
		}
		back, err := ParseLevels(lv.String())
		if err != nil || !slices.Equal(back.Counts, lv.Counts) || back.String() != lv.String() {
			t.Fatalf("%q -> %q does not parse back (%v)", s, lv.String(), err)
		}
		if lv.NormSq() < lv.Support() || lv.Validate(MaxDim) != nil && lv.Support() <= MaxDim {
			t.Fatalf("%q: inconsistent levels", s)
		}
	})
}

func BenchmarkLevels(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 512)
	for j := range x {
		x[j] = float32(r.NormFloat64())
	}
	for _, spec := range []string{"1:341", "2:63,278", "4:32,64,96,149"} {
		b.Run("levels="+spec, func(b *testing.B) {
			lv, _ := ParseLevels(spec)
			tr, _ := NewLevelTransformer(512, lv)
			out := make([]int8, 512)
			b.ReportAllocs()
			for b.Loop() {
				if err := ApplyLevels(tr, x, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQuantisedLevels: the dense default query of hidden-probe clusters
// covers every coordinate, each level at least once, and for d = 512 is
// the 4-bit query the measurements chose.
func TestQuantisedLevels(t *testing.T) {
	lv, err := QuantisedLevels(512, 7)
	if err != nil || lv.String() != "7:5,11,28,57,99,142,170" {
		t.Fatalf("QuantisedLevels(512, 7) = %v, %v", lv, err)
	}
	for _, d := range []int{7, 8, 64, 128, 511, 512, 1024, 4096} {
		for _, L := range []int{1, 3, 7, 15} {
			if L > d {
				continue
			}
			lv, err := QuantisedLevels(d, L)
			if err != nil || lv.Support() != d || lv.L() != L {
				t.Fatalf("d %d, L %d: %v (%v)", d, L, lv, err)
			}
			for _, c := range lv.Counts {
				if c < 1 {
					t.Fatalf("d %d, L %d: %v", d, L, lv)
				}
			}
		}
	}
	if _, err := QuantisedLevels(3, 7); err == nil {
		t.Fatal("7 levels over 3 coordinates")
	}
}

func TestFourLevelGallery(t *testing.T) {
	for _, a := range []int{4, 5, 42, 85, 341, 682, 2730} {
		lv, err := FourLevelGallery(a)
		if err != nil || lv.Support() != a || lv.L() != 4 || slices.Min(lv.Counts) < 1 {
			t.Fatalf("alpha %d: %v (%v)", a, lv, err)
		}
	}
	if lv, _ := FourLevelGallery(341); lv.String() != "4:32,64,96,149" {
		t.Fatalf("alpha 341: %v", lv)
	}
}
