package experiments

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Synthetic is a labelled set of unit templates: Samples[i] belongs to
// person Labels[i].
type Synthetic struct {
	Dim     int
	Samples [][]float32
	Labels  []int
}

// NewSynthetic places `people` centres uniformly on the unit sphere in R^d
// and draws `samples` templates per person as
//
//	x = sqrt(rho)*c + sqrt(1-rho)*u,  u a random unit vector orthogonal to c,
//
// so two samples of one person have cosine rho on average (the intra-class
// cosine) and samples of different people have cosine near 0 (spread
// 1/sqrt(d)). Seeded: the same arguments give the same templates.
func NewSynthetic(people, samples, d int, rho float64, seed uint64) (*Synthetic, error) {
	if people < 1 || samples < 1 || people*samples > 50_000_000 {
		return nil, fmt.Errorf("experiments: %d people x %d samples", people, samples)
	}
	if d < 2 {
		return nil, fmt.Errorf("experiments: dimension %d", d)
	}
	if rho < 0 || rho > 1 {
		return nil, fmt.Errorf("experiments: intra-class cosine %v outside [0, 1]", rho)
	}
	r := rand.New(rand.NewPCG(seed, 0x1dface))
	s := &Synthetic{Dim: d}
	a, b := math.Sqrt(rho), math.Sqrt(1-rho)
	for p := range people {
		c := unit(r, d)
		for range samples {
			_, u := PairWithCosine(r, d, 0) // u: unit, orthogonal to a fresh vector
			var dot float64
			for j := range u {
				dot += u[j] * c[j]
			}
			var n float64
			for j := range u { // make u orthogonal to c
				u[j] -= dot * c[j]
				n += u[j] * u[j]
			}
			n = math.Sqrt(n)
			x := make([]float32, d)
			for j := range x {
				x[j] = float32(a*c[j] + b*u[j]/n)
			}
			s.Samples = append(s.Samples, x)
			s.Labels = append(s.Labels, p)
		}
	}
	return s, nil
}
