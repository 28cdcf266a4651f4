package experiments

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/template"
)

func TestPairWithCosine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range Cosines() {
		x, y := PairWithCosine(r, 512, c)
		var xy, yy float64
		for j := range x {
			xy += x[j] * y[j]
			yy += y[j] * y[j]
		}
		if math.Abs(xy-c) > 1e-9 || math.Abs(yy-1) > 1e-9 {
			t.Fatalf("c = %v: <x,y> = %v, |y|^2 = %v", c, xy, yy)
		}
	}
}

// The incremental prefix dots must equal the transform itself at every a.
func TestPrefixDotsMatchTransform(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for trial := 0; trial < 20; trial++ {
		x, y := PairWithCosine(r, 128, []float64{0.6, 1, -1, 0}[trial%4])
		ip := prefixDots(x, y)
		for a := 1; a <= 128; a++ {
			tx, _ := template.Transform(x, a)
			ty, _ := template.Transform(y, a)
			if tx.Dot(ty) != ip[a-1] {
				t.Fatalf("a = %d: prefix %d, transform %d", a, ip[a-1], tx.Dot(ty))
			}
		}
	}
}

// The paper's shape: for d = 512, a = 341 the distortion peaks near
// |c| = 0.7 at about 0.11 and vanishes at c = 0 and |c| = 1.
func TestIsometryShape(t *testing.T) {
	rows, err := Isometry(512, 341, 40, 7)
	if err != nil {
		t.Fatal(err)
	}
	peak := rows[0]
	for _, r := range rows {
		if r.MeanEps > peak.MeanEps {
			peak = r
		}
	}
	if math.Abs(math.Abs(peak.Cos)-0.7) > 0.151 || peak.MeanEps < 0.08 || peak.MeanEps > 0.14 {
		t.Fatalf("peak %+v, want about 0.111 near |c| = 0.7", peak)
	}
	if mid := rows[20]; mid.Cos != 0 || mid.MeanEps > 0.03 {
		t.Fatalf("at c = 0: %+v", mid)
	}
	if rows[40].MaxEps != 0 || rows[0].MaxEps != 0 {
		t.Fatalf("identical or opposite vectors distorted: %+v %+v", rows[0], rows[40])
	}
}

func TestSweepMinimumNearTwoThirds(t *testing.T) {
	rows, err := SweepAlpha(512, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	best := rows[0]
	for _, r := range rows {
		if r.MeanEps < best.MeanEps {
			best = r
		}
	}
	if best.Alpha < 300 || best.Alpha > 400 {
		t.Fatalf("minimum at alpha = %d (%v), want near 341", best.Alpha, best.MeanEps)
	}
}
