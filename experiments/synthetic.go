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

// SyntheticOptions configures NewSyntheticWith. With Gamma = 0 and Rotate
// false it draws exactly NewSynthetic's people.
type SyntheticOptions struct {
	People, Samples, Dim int
	Intra                float64 // intra-class cosine rho
	Seed                 uint64

	// Gamma > 0 makes the people anisotropic, as real face features are
	// (their variances decay): coordinate j of every centre has standard
	// deviation proportional to (j+1)^-Gamma, so some coordinates are
	// systematically larger than others and the magnitudes that T_alpha
	// discards carry identity. Within-class variation stays isotropic, so
	// the cosine remains the right score (with anisotropic noise too, the
	// float cosine loses to any whitening score, T_alpha included, unlike
	// on real features).
	Gamma float64
	// Rotate applies one seeded random rotation to every template, so the
	// decaying spectrum lies along random directions rather than the axes
	// (per-coordinate magnitudes then look alike again).
	Rotate bool
}

// NewSyntheticWith draws labelled templates as NewSynthetic does,
//
//	x = sqrt(rho)*c + sqrt(1-rho)*u,  u a unit vector orthogonal to c,
//
// but with the centre c drawn from N(0, diag(sigma^2)), sigma_j =
// (j+1)^-Gamma, before normalisation (u stays uniform), and x optionally
// rotated. Seeded.
func NewSyntheticWith(o SyntheticOptions) (*Synthetic, error) {
	if o.Gamma < 0 || o.Gamma > 4 || math.IsNaN(o.Gamma) {
		return nil, fmt.Errorf("experiments: anisotropy gamma %v outside [0, 4]", o.Gamma)
	}
	if o.Gamma == 0 && !o.Rotate {
		return NewSynthetic(o.People, o.Samples, o.Dim, o.Intra, o.Seed)
	}
	if o.People < 1 || o.Samples < 1 || o.People*o.Samples > 50_000_000 {
		return nil, fmt.Errorf("experiments: %d people x %d samples", o.People, o.Samples)
	}
	d := o.Dim
	if d < 2 || d > 4096 {
		return nil, fmt.Errorf("experiments: dimension %d", d)
	}
	if o.Intra < 0 || o.Intra > 1 {
		return nil, fmt.Errorf("experiments: intra-class cosine %v outside [0, 1]", o.Intra)
	}
	r := rand.New(rand.NewPCG(o.Seed, 0xa415))
	sigma := make([]float64, d)
	for j := range sigma {
		sigma[j] = math.Pow(float64(j+1), -o.Gamma)
	}
	draw := func() []float64 { // unit vector from N(0, diag(sigma^2))
		for {
			x := make([]float64, d)
			var n float64
			for j := range x {
				x[j] = sigma[j] * r.NormFloat64()
				n += x[j] * x[j]
			}
			if n > 0 {
				n = math.Sqrt(n)
				for j := range x {
					x[j] /= n
				}
				return x
			}
		}
	}
	var rot [][]float64
	if o.Rotate {
		rot = randomRotation(r, d)
	}
	s := &Synthetic{Dim: d}
	a, b := math.Sqrt(o.Intra), math.Sqrt(1-o.Intra)
	x := make([]float64, d)
	for p := range o.People {
		c := draw()
		for range o.Samples {
			u := unit(r, d)
			var dot, n float64
			for j := range u {
				dot += u[j] * c[j]
			}
			for j := range u {
				u[j] -= dot * c[j]
				n += u[j] * u[j]
			}
			n = math.Sqrt(n)
			for j := range x {
				x[j] = a*c[j] + b*u[j]/n
			}
			out := make([]float32, d)
			if rot == nil {
				for j := range out {
					out[j] = float32(x[j])
				}
			} else {
				for i, row := range rot {
					var v float64
					for j, q := range row {
						v += q * x[j]
					}
					out[i] = float32(v)
				}
			}
			s.Samples = append(s.Samples, out)
			s.Labels = append(s.Labels, p)
		}
	}
	return s, nil
}

// randomRotation returns a random orthogonal d x d matrix: Gram-Schmidt
// on Gaussian rows (re-orthogonalised once for accuracy).
func randomRotation(r *rand.Rand, d int) [][]float64 {
	q := make([][]float64, d)
	for i := range q {
		v := make([]float64, d)
		for {
			for j := range v {
				v[j] = r.NormFloat64()
			}
			for range 2 {
				for _, u := range q[:i] {
					var p float64
					for j := range v {
						p += v[j] * u[j]
					}
					for j := range v {
						v[j] -= p * u[j]
					}
				}
			}
			var n float64
			for _, x := range v {
				n += x * x
			}
			if n > 1e-12 {
				n = math.Sqrt(n)
				for j := range v {
					v[j] /= n
				}
				break
			}
		}
		q[i] = v
	}
	return q
}
