package experiments

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/idface/idface/template"
)

// Calibration is the threshold a target false-positive identification
// rate (FPIR) calls for, measured with a cluster's transform on labelled
// templates in an open-set split: the first template of the first half
// of the people (in label order) is enrolled; the other templates of
// those people are mated searches, every template of the other half a
// non-mated search. A search returns the best-scoring gallery row when
// its score reaches the threshold (ties to the earlier row, as in the
// cluster). FPIR is the share of non-mated searches that return a row;
// TPIR the share of mated searches that return the right one.
type Calibration struct {
	Pair       LevelPair
	TargetFPIR float64
	// Rows is the number of ids the threshold is for (CalibrateFor);
	// GalleryIDs unless planned.
	Rows int
	// Threshold is the least accepted integer score <G(x), Q(y)>: the
	// least one whose FPIR is at most TargetFPIR (with a planned Rows:
	// whose FPIR times Rows/GalleryIDs is, FPIR growing about linearly
	// with the ids enrolled).
	Threshold  int
	FPIR, TPIR float64 // at Threshold
	// Rank1 is the share of mated searches whose best row is the right
	// one, whatever the threshold.
	Rank1                       float64
	GalleryIDs, Mated, NonMated int
	// Curve is FPIR and TPIR at thresholds from the lowest non-mated best
	// score to the highest mated one (at most 400 points).
	Curve []CalibrationPoint
	// BestMated and BestNonMated are every search's best score: what a
	// cluster's score statistics (idface stats) count per window, for a
	// plot of drift. Not written to the calibration file.
	BestMated, BestNonMated []int `json:"-"`
}

// CalibrationPoint is FPIR and TPIR at one threshold.
type CalibrationPoint struct {
	Threshold int     `json:"threshold"`
	FPIR      float64 `json:"fpir"`
	TPIR      float64 `json:"tpir"`
}

// Calibrate finds the least integer threshold whose FPIR is at most
// target on xs (labels give each template's person).
func Calibrate(xs [][]float32, labels []int, lp LevelPair, target float64) (*Calibration, error) {
	return CalibrateFor(xs, labels, lp, target, 0)
}

// CalibrateFor is Calibrate for a gallery of rows ids (0: the split's):
// the split enrolls fewer (or more) people than the cluster will, and
// FPIR grows about linearly with the ids enrolled, so the FPIR measured
// on the split must be at most target times GalleryIDs/rows.
func CalibrateFor(xs [][]float32, labels []int, lp LevelPair, target float64, rows int) (*Calibration, error) {
	if !(target > 0 && target < 1) {
		return nil, fmt.Errorf("target FPIR %v: want a rate between 0 and 1, such as 1e-3", target)
	}
	if rows < 0 {
		return nil, fmt.Errorf("a gallery of %d ids: want the number of ids the cluster will hold", rows)
	}
	if len(xs) != len(labels) || len(xs) == 0 {
		return nil, fmt.Errorf("experiments: %d templates, %d labels", len(xs), len(labels))
	}
	gallery, mated, nonMated := openSet(labels)
	if len(mated) == 0 || len(nonMated) == 0 {
		return nil, fmt.Errorf("calibration needs at least two people, and two or more templates of the first half of them (in label order): "+
			"this split enrolls %d people and has %d mated and %d non-mated searches", len(gallery), len(mated), len(nonMated))
	}
	d := len(xs[0])
	g, err := transformAll(xs, d, lp.Gallery)
	if err != nil {
		return nil, fmt.Errorf("gallery levels %s: %w", lp.Gallery, err)
	}
	qs, err := transformAll(xs, d, lp.Query)
	if err != nil {
		return nil, fmt.Errorf("query levels %s: %w", lp.Query, err)
	}
	q := newSparseSet(qs)
	probes := append(append([]int(nil), mated...), nonMated...)
	best := make([]int, len(probes)) // best score
	hit := make([]bool, len(probes)) // best row is the probe's person
	w := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for k := range w {
		wg.Go(func() {
			for i := len(probes) * k / w; i < len(probes)*(k+1)/w; i++ {
				p, bi, bs := probes[i], -1, math.MinInt
				for _, r := range gallery {
					if s := q.dot(p, g[r]); s > bs {
						bi, bs = r, s
					}
				}
				best[i], hit[i] = bs, labels[bi] == labels[p]
			}
		})
	}
	wg.Wait()
	if rows == 0 {
		rows = len(gallery)
	}
	c := &Calibration{Pair: lp, TargetFPIR: target, Rows: rows, GalleryIDs: len(gallery), Mated: len(mated), NonMated: len(nonMated)}
	ms, ns := best[:len(mated)], slices.Clone(best[len(mated):])
	c.BestMated, c.BestNonMated = ms, best[len(mated):]
	slices.Sort(ns)
	slices.Reverse(ns)
	// At most floor(target*N) non-mated searches may reach the threshold
	// (target scaled to the split's gallery).
	k := int(math.Floor(c.SplitTarget() * float64(len(ns))))
	c.Threshold = ns[min(k, len(ns)-1)] + 1
	at := func(t int) CalibrationPoint {
		pt := CalibrationPoint{Threshold: t}
		for _, s := range ns {
			if s < t {
				break
			}
			pt.FPIR++
		}
		for i, s := range ms {
			if hit[i] && s >= t {
				pt.TPIR++
			}
		}
		pt.FPIR /= float64(len(ns))
		pt.TPIR /= float64(len(ms))
		return pt
	}
	pt := at(c.Threshold)
	c.FPIR, c.TPIR = pt.FPIR, pt.TPIR
	for _, h := range hit[:len(mated)] {
		if h {
			c.Rank1++
		}
	}
	c.Rank1 /= float64(len(mated))
	lo, hi := ns[len(ns)-1], slices.Max(ms)+1
	step := max(1, (hi-lo)/400)
	for t := lo; t <= hi; t += step {
		c.Curve = append(c.Curve, at(t))
	}
	return c, nil
}

// SplitTarget is the FPIR the split's gallery may show for TargetFPIR
// to hold with Rows ids enrolled (at most 1).
func (c *Calibration) SplitTarget() float64 {
	if c.Rows <= 0 {
		return c.TargetFPIR
	}
	return min(1, c.TargetFPIR*float64(c.GalleryIDs)/float64(c.Rows))
}

// Tau is the cosine threshold that gives c.Threshold with the cluster's
// rule (template.LevelsMinAcceptScore, which is template.MinAcceptScore
// for one level each): the least accepted score is Threshold exactly.
func (c *Calibration) Tau() (float64, error) {
	g, q := c.Pair.Gallery, c.Pair.Query
	norm := math.Sqrt(float64(g.NormSq()) * float64(q.NormSq()))
	tau := (float64(c.Threshold) - 0.5) / norm
	for range 4 { // (T - 0.5)/norm lies mid-interval; rounding never moves it far
		switch got := template.LevelsMinAcceptScore(tau, g, q); {
		case got < c.Threshold:
			tau = math.Nextafter(tau, math.Inf(1))
		case got > c.Threshold:
			tau = math.Nextafter(tau, math.Inf(-1))
		}
	}
	if template.LevelsMinAcceptScore(tau, g, q) != c.Threshold || tau < -1 || tau > 1 {
		return 0, fmt.Errorf("no cosine threshold gives score >= %d with gallery %s and query %s", c.Threshold, g, q)
	}
	return tau, nil
}

// ThreeFoldLevels spreads alpha coordinates over L levels whose counts
// grow threefold (L = 4, alpha = 341: "4:9,26,77,229"), the gallery
// transform docs/BLIND-NOTES.md found most robust for blind mode.
func ThreeFoldLevels(alpha, L int) template.Levels {
	w, sum := make([]float64, L), 0.0
	for i := range w {
		w[i] = math.Pow(3, float64(i))
		sum += w[i]
	}
	lv := template.Levels{Counts: make([]int, L)}
	left := alpha
	for i := range L - 1 {
		lv.Counts[i] = max(1, int(math.Round(float64(alpha)*w[i]/sum)))
		left -= lv.Counts[i]
	}
	lv.Counts[L-1] = max(1, left)
	return lv
}
