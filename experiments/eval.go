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

// EvalResult holds the accuracy of one score function on a labelled set.
type EvalResult struct {
	Scores     string  `json:"scores"` // "float" or "ternary"
	Alpha      int     `json:"alpha,omitempty"`
	Beta       int     `json:"beta,omitempty"`
	Accuracy   float64 `json:"accuracy"` // verification, balanced pairs, best threshold
	TAR1e3     float64 `json:"tar_at_far_1e-3"`
	TAR1e4     float64 `json:"tar_at_far_1e-4"`
	EER        float64 `json:"eer"`
	Rank1      float64 `json:"rank1"`             // open-set identification, mated probes
	TPIR1e2    float64 `json:"tpir_at_fpir_1e-2"` // at the threshold giving that FPIR
	TPIR1e3    float64 `json:"tpir_at_fpir_1e-3"` //
	Genuine    int     `json:"genuine_pairs"`     //
	Impostor   int     `json:"impostor_pairs"`    //
	Mated      int     `json:"mated_probes"`      //
	NonMated   int     `json:"non_mated_probes"`  //
	GallerySz  int     `json:"gallery"`           //
	Thresholds float64 `json:"threshold_at_far_1e-3"`
	// Multi-level rows (Scores "levels", docs/BLIND-NOTES.md): the gallery and query
	// transforms as "L:a1,...,aL".
	GalleryLevels string `json:"gallery_levels,omitempty"`
	QueryLevels   string `json:"query_levels,omitempty"`
}

// scorer scores a gallery row against a probe.
type scorer func(g, p int) float64

// Evaluate computes verification and open-set identification metrics for
// float cosines and for the ternary scores <T_alpha(x), T_beta(y)> of every
// beta. Verification uses every genuine pair and up to maxImpostor random
// impostor pairs. Identification enrolls the first sample of the first half
// of the people; mated probes are their other samples, non-mated probes all
// samples of the other half.
func Evaluate(xs [][]float32, labels []int, alpha int, betas []int, maxImpostor int, seed uint64) ([]EvalResult, error) {
	ev, err := newEvalSet(xs, labels, maxImpostor, seed)
	if err != nil {
		return nil, err
	}
	unit, gen, imp, gallery, mated, nonMated := ev.unit, ev.gen, ev.imp, ev.gallery, ev.mated, ev.nonMated
	floatScore := func(a, b int) float64 {
		var s float32
		for j := range unit[a] {
			s += unit[a][j] * unit[b][j]
		}
		return float64(s)
	}
	out := []EvalResult{metrics("float", 0, 0, floatScore, gen, imp, gallery, mated, nonMated, labels)}
	za := make([]template.Ternary, len(xs))
	for i, x := range xs {
		var err error
		if za[i], err = template.Transform(x, alpha); err != nil {
			return nil, fmt.Errorf("template %d: %w", i, err)
		}
	}
	for _, beta := range betas {
		zb := make([]template.Ternary, len(xs))
		for i, x := range xs {
			var err error
			if zb[i], err = template.Transform(x, beta); err != nil {
				return nil, fmt.Errorf("template %d: %w", i, err)
			}
		}
		ts := func(g, p int) float64 { return float64(za[g].Dot(zb[p])) }
		out = append(out, metrics("ternary", alpha, beta, ts, gen, imp, gallery, mated, nonMated, labels))
	}
	return out, nil
}

// evalSet is a labelled set ready for scoring: unit templates, the
// verification pairs and the open-set split.
type evalSet struct {
	unit                     [][]float32
	gen, imp                 []pair
	gallery, mated, nonMated []int
	labels                   []int
}

func newEvalSet(xs [][]float32, labels []int, maxImpostor int, seed uint64) (*evalSet, error) {
	if len(xs) != len(labels) || len(xs) < 4 {
		return nil, fmt.Errorf("experiments: %d templates, %d labels", len(xs), len(labels))
	}
	d := len(xs[0])
	unit := make([][]float32, len(xs))
	for i, x := range xs {
		if len(x) != d {
			return nil, fmt.Errorf("%w: template %d", template.ErrDimension, i)
		}
		var n float64
		for _, v := range x {
			n += float64(v) * float64(v)
		}
		if n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, fmt.Errorf("experiments: template %d is zero or not finite", i)
		}
		n = math.Sqrt(n)
		unit[i] = make([]float32, d)
		for j, v := range x {
			unit[i][j] = float32(float64(v) / n)
		}
	}
	ev := &evalSet{unit: unit, labels: labels}
	ev.gen, ev.imp = pairs(labels, maxImpostor, seed)
	ev.gallery, ev.mated, ev.nonMated = openSet(labels)
	if len(ev.gen) == 0 || len(ev.mated) == 0 || len(ev.nonMated) == 0 {
		return nil, fmt.Errorf("experiments: need several samples per person and at least two people")
	}
	return ev, nil
}

// LevelPair is a (gallery, query) pair of multi-level transforms
// (docs/BLIND-NOTES.md); Gallery 1:alpha with Query 1:beta is the paper's ternary scoring.
// A zero Gallery (no levels) keeps the gallery in float, <x/|x|, Q(y)>:
// the ceiling any gallery transform can reach with that query.
type LevelPair struct {
	Gallery, Query template.Levels
}

// EvaluateLevels computes the metrics of Evaluate for the scores
// <G(x), Q(y)> of every pair, G applied to the enrolled side and Q to the
// probe side, on the same pairs and split as Evaluate (same maxImpostor
// and seed give the same pairs). It returns one row per pair, Scores
// "levels"; for G = T_alpha, Q = T_beta it equals Evaluate's ternary row.
func EvaluateLevels(xs [][]float32, labels []int, lp []LevelPair, maxImpostor int, seed uint64) ([]EvalResult, error) {
	ev, err := newEvalSet(xs, labels, maxImpostor, seed)
	if err != nil {
		return nil, err
	}
	d := len(xs[0])
	dense := map[string][][]int8{}
	sparse := map[string]*sparseSet{}
	var out []EvalResult
	for _, pq := range lp {
		gk, qk := pq.Gallery.String(), pq.Query.String()
		floatGallery := pq.Gallery.L() == 0
		if floatGallery {
			gk = "float"
		} else if dense[gk] == nil {
			if dense[gk], err = transformAll(xs, d, pq.Gallery); err != nil {
				return nil, fmt.Errorf("gallery levels %s: %w", gk, err)
			}
		}
		if sparse[qk] == nil {
			q, err := transformAll(xs, d, pq.Query)
			if err != nil {
				return nil, fmt.Errorf("query levels %s: %w", qk, err)
			}
			sparse[qk] = newSparseSet(q)
		}
		g, q := dense[gk], sparse[qk]
		f := func(a, b int) float64 { return float64(q.dot(b, g[a])) }
		if floatGallery {
			f = func(a, b int) float64 { return q.dotFloat(b, ev.unit[a]) }
		}
		r := metrics("levels", 0, 0, f, ev.gen, ev.imp, ev.gallery, ev.mated, ev.nonMated, labels)
		r.GalleryLevels, r.QueryLevels = gk, qk
		out = append(out, r)
	}
	return out, nil
}

func transformAll(xs [][]float32, d int, lv template.Levels) ([][]int8, error) {
	tr, err := template.NewLevelTransformer(d, lv)
	if err != nil {
		return nil, err
	}
	out := make([][]int8, len(xs))
	for i, x := range xs {
		out[i] = make([]int8, d)
		if err := template.ApplyLevels(tr, x, out[i]); err != nil {
			return nil, fmt.Errorf("template %d: %w", i, err)
		}
	}
	return out, nil
}

// sparseSet holds query vectors by their nonzeros: a score costs beta
// multiply-adds, not d.
type sparseSet struct {
	start []int
	pos   []int32
	coef  []int8
}

func newSparseSet(vs [][]int8) *sparseSet {
	s := &sparseSet{start: []int{0}}
	for _, v := range vs {
		for j, c := range v {
			if c != 0 {
				s.pos = append(s.pos, int32(j))
				s.coef = append(s.coef, c)
			}
		}
		s.start = append(s.start, len(s.pos))
	}
	return s
}

func (s *sparseSet) dotFloat(i int, g []float32) float64 {
	sum := 0.0
	for t := s.start[i]; t < s.start[i+1]; t++ {
		sum += float64(s.coef[t]) * float64(g[s.pos[t]])
	}
	return sum
}

func (s *sparseSet) dot(i int, g []int8) int {
	sum := 0
	for t := s.start[i]; t < s.start[i+1]; t++ {
		sum += int(s.coef[t]) * int(g[s.pos[t]])
	}
	return sum
}

type pair struct{ a, b int }

func pairs(labels []int, maxImp int, seed uint64) (gen, imp []pair) {
	n := len(labels)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if labels[a] == labels[b] {
				gen = append(gen, pair{a, b})
			}
		}
	}
	total := n * (n - 1) / 2
	if total-len(gen) <= maxImp {
		for a := 0; a < n; a++ {
			for b := a + 1; b < n; b++ {
				if labels[a] != labels[b] {
					imp = append(imp, pair{a, b})
				}
			}
		}
		return gen, imp
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for len(imp) < maxImp {
		a, b := r.IntN(n), r.IntN(n)
		if a != b && labels[a] != labels[b] {
			imp = append(imp, pair{min(a, b), max(a, b)})
		}
	}
	return gen, imp
}

func openSet(labels []int) (gallery, mated, nonMated []int) {
	people := slices.Compact(slices.Sorted(slices.Values(labels)))
	enrolled := map[int]bool{}
	for _, p := range people[:len(people)/2] {
		enrolled[p] = true
	}
	first := map[int]bool{}
	for i, l := range labels {
		switch {
		case enrolled[l] && !first[l]:
			first[l] = true
			gallery = append(gallery, i)
		case enrolled[l]:
			mated = append(mated, i)
		default:
			nonMated = append(nonMated, i)
		}
	}
	return
}

// parallel scores pairs on all cores.
func parallel(ps []pair, f scorer) []float64 {
	out := make([]float64, len(ps))
	w := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for g := range w {
		wg.Go(func() {
			for i := len(ps) * g / w; i < len(ps)*(g+1)/w; i++ {
				out[i] = f(ps[i].a, ps[i].b)
			}
		})
	}
	wg.Wait()
	return out
}

func metrics(kind string, alpha, beta int, f scorer, gen, imp []pair, gallery, mated, nonMated, labels []int) EvalResult {
	r := EvalResult{Scores: kind, Alpha: alpha, Beta: beta, Genuine: len(gen), Impostor: len(imp),
		Mated: len(mated), NonMated: len(nonMated), GallerySz: len(gallery)}
	gs, is := parallel(gen, f), parallel(imp, f)
	slices.Sort(gs)
	slices.Sort(is)
	// Accept when score > threshold. far(t) and frr(t) over candidate thresholds.
	above := func(s []float64, t float64) int { // how many > t
		i, _ := slices.BinarySearchFunc(s, t, func(v, t float64) int {
			if v <= t {
				return -1
			}
			return 1
		})
		return len(s) - i
	}
	atFAR := func(far float64) (float64, float64) {
		k := int(math.Floor(far * float64(len(is)))) // impostors allowed above
		t := is[len(is)-1-min(k, len(is)-1)]
		if k >= len(is) {
			t = math.Inf(-1)
		}
		return float64(above(gs, t)) / float64(len(gs)), t
	}
	r.TAR1e3, r.Thresholds = atFAR(1e-3)
	r.TAR1e4, _ = atFAR(1e-4)
	cands := append(append([]float64{math.Inf(-1)}, gs...), is...)
	slices.Sort(cands)
	cands = slices.Compact(cands)
	best, eer, gap := 0.0, 1.0, 2.0
	for _, t := range cands {
		tar := float64(above(gs, t)) / float64(len(gs))
		far := float64(above(is, t)) / float64(len(is))
		// Balanced accuracy: as many impostor as genuine pairs (LFW style).
		best = max(best, (tar+1-far)/2)
		if g := math.Abs((1 - tar) - far); g < gap {
			gap, eer = g, ((1-tar)+far)/2
		}
	}
	r.Accuracy, r.EER = best, eer
	// Open-set identification.
	top := func(p int) (int, float64) {
		bi, bs := -1, math.Inf(-1)
		for _, g := range gallery {
			if s := f(g, p); s > bs {
				bi, bs = g, s
			}
		}
		return bi, bs
	}
	type res struct {
		ok    bool
		score float64
	}
	run := func(probes []int) []res {
		out := make([]res, len(probes))
		w := runtime.GOMAXPROCS(0)
		var wg sync.WaitGroup
		for g := range w {
			wg.Go(func() {
				for i := len(probes) * g / w; i < len(probes)*(g+1)/w; i++ {
					bi, bs := top(probes[i])
					out[i] = res{labels[bi] == labels[probes[i]], bs}
				}
			})
		}
		wg.Wait()
		return out
	}
	mr, nr := run(mated), run(nonMated)
	ns := make([]float64, len(nr))
	for i, x := range nr {
		ns[i] = x.score
	}
	slices.SortFunc(ns, cmp.Compare)
	hits := 0
	for _, x := range mr {
		if x.ok {
			hits++
		}
	}
	r.Rank1 = float64(hits) / float64(len(mr))
	tpir := func(fpir float64) float64 {
		k := int(math.Floor(fpir * float64(len(ns))))
		t := math.Inf(-1)
		if k < len(ns) {
			t = ns[len(ns)-1-k]
		}
		n := 0
		for _, x := range mr {
			if x.ok && x.score > t {
				n++
			}
		}
		return float64(n) / float64(len(mr))
	}
	r.TPIR1e2, r.TPIR1e3 = tpir(1e-2), tpir(1e-3)
	return r
}
