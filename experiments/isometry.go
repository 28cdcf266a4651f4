// Package experiments holds the paper's measurements and ours: the
// isometry of T_a (App. B/C), the communication tables (2PCFace, MPCFace,
// IDFace over BGV and Paillier, blind and replicated mode, hidden probes),
// the accuracy evaluation, and
// the benchmarks of local clusters of every mode against the float32 and
// plaintext baselines (experiments/wan across a WAN, experiments/hers the
// HERS baseline). Randomness here generates synthetic data only, never a
// share, so it is a seeded PRNG for reproducible figures.
package experiments

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/idface/idface/template"
)

// IsometryRow is the distortion eps = |<T_a x, T_a y>/a - c| over random unit
// pairs with cosine exactly c.
type IsometryRow struct {
	Cos     float64 `json:"cos"`
	MeanEps float64 `json:"mean_eps"`
	MaxEps  float64 `json:"max_eps"`
}

// SweepRow is the mean distortion over all cosines for one a.
type SweepRow struct {
	Alpha   int     `json:"alpha"`
	MeanEps float64 `json:"mean_eps"`
}

// Cosines returns the grid of the paper's figure: -1 to 1 in steps of 0.05.
func Cosines() []float64 {
	cs := make([]float64, 41)
	for i := range cs {
		cs[i] = math.Round((-1+0.05*float64(i))*100) / 100
	}
	return cs
}

// PairWithCosine returns random unit vectors x, y in R^d with <x, y> = c:
// y = c x + sqrt(1-c^2) u for a random unit u orthogonal to x.
func PairWithCosine(r *rand.Rand, d int, c float64) (x, y []float64) {
	x = unit(r, d)
	u := make([]float64, d)
	for {
		var p float64
		for j := range u {
			u[j] = r.NormFloat64()
			p += u[j] * x[j]
		}
		var n float64
		for j := range u {
			u[j] -= p * x[j]
			n += u[j] * u[j]
		}
		if n > 1e-12 {
			n = math.Sqrt(n)
			for j := range u {
				u[j] /= n
			}
			break
		}
	}
	s := math.Sqrt(max(0, 1-c*c))
	y = make([]float64, d)
	for j := range y {
		y[j] = c*x[j] + s*u[j]
	}
	return x, y
}

func unit(r *rand.Rand, d int) []float64 {
	for {
		x := make([]float64, d)
		var n float64
		for j := range x {
			x[j] = r.NormFloat64()
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

// order returns the coordinates by |x_j| descending, lower index first on
// ties (T_a's order: T_a selects the first a), and the signs (0 counts +).
func order(x []float64) ([]int, []int8) {
	idx := make([]int, len(x))
	sign := make([]int8, len(x))
	for j := range idx {
		idx[j] = j
		sign[j] = 1
		if x[j] < 0 {
			sign[j] = -1
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(math.Abs(x[b]), math.Abs(x[a])) })
	return idx, sign
}

// prefixDots returns ip[a-1] = <T_a x, T_a y> for every a in 1..d in O(d):
// growing a by one adds one coordinate to each support.
func prefixDots(x, y []float64) []int {
	ox, sx := order(x)
	oy, sy := order(y)
	d := len(x)
	inX, inY := make([]bool, d), make([]bool, d)
	ip := make([]int, d)
	s := 0
	for a := 0; a < d; a++ {
		jx, jy := ox[a], oy[a]
		inX[jx] = true
		if inY[jx] {
			s += int(sx[jx] * sy[jx])
		}
		inY[jy] = true
		if inX[jy] { // counted once: when the second of the two supports gains it
			s += int(sx[jy] * sy[jy])
		}
		ip[a] = s
	}
	return ip
}

type pairStats struct {
	cos float64
	ips [][]int // per pair, prefixDots
}

// run draws `pairs` pairs for every cosine on all cores; worker i's stream
// depends only on (seed, i), so the output is reproducible.
func run(d, pairs int, seed uint64) []pairStats {
	cs := Cosines()
	out := make([]pairStats, len(cs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, c := range cs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			st := pairStats{cos: c}
			for range pairs {
				x, y := PairWithCosine(r, d, c)
				st.ips = append(st.ips, prefixDots(x, y))
			}
			out[i] = st
		})
	}
	wg.Wait()
	return out
}

func checkArgs(d, pairs int) error {
	if d < 2 || d > template.MaxDim {
		return fmt.Errorf("experiments: dimension %d out of range 2..%d", d, template.MaxDim)
	}
	if pairs < 1 || pairs > 1_000_000 {
		return fmt.Errorf("experiments: %d pairs per cosine, want 1..1000000", pairs)
	}
	return nil
}

// Isometry measures eps for T_alpha at every cosine of the grid.
func Isometry(d, alpha, pairs int, seed uint64) ([]IsometryRow, error) {
	if err := checkArgs(d, pairs); err != nil {
		return nil, err
	}
	if alpha < 1 || alpha > d {
		return nil, fmt.Errorf("experiments: alpha = %d, want 1..%d", alpha, d)
	}
	var rows []IsometryRow
	for _, st := range run(d, pairs, seed) {
		row := IsometryRow{Cos: st.cos}
		for _, ip := range st.ips {
			e := math.Abs(float64(ip[alpha-1])/float64(alpha) - st.cos)
			row.MeanEps += e
			row.MaxEps = max(row.MaxEps, e)
		}
		row.MeanEps /= float64(len(st.ips))
		rows = append(rows, row)
	}
	return rows, nil
}

// SweepAlpha returns the mean eps over all cosines for every a in 1..d.
func SweepAlpha(d, pairs int, seed uint64) ([]SweepRow, error) {
	if err := checkArgs(d, pairs); err != nil {
		return nil, err
	}
	sum := make([]float64, d)
	n := 0
	for _, st := range run(d, pairs, seed) {
		for _, ip := range st.ips {
			for a := 1; a <= d; a++ {
				sum[a-1] += math.Abs(float64(ip[a-1])/float64(a) - st.cos)
			}
			n++
		}
	}
	rows := make([]SweepRow, d)
	for a := range rows {
		rows[a] = SweepRow{Alpha: a + 1, MeanEps: sum[a] / float64(n)}
	}
	return rows, nil
}
