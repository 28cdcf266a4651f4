// Package baseline holds the non-protected searches every protected mode is
// measured against in the same run: float32 brute-force cosine search (what
// a gate without protection does) and the plaintext ternary search (T_alpha
// rows and T_beta queries in the clear, through the same column store and
// scorer as the shared modes).
package baseline

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// FloatMatch is a row of the float database with its cosine to the query.
type FloatMatch struct {
	Row    int
	Cosine float32
}

// FloatDB is an N x d row-major float32 matrix of unit templates.
type FloatDB struct {
	dim  int
	data []float32
}

// NewFloatDB returns an empty database for dimension d.
func NewFloatDB(d, capacity int) (*FloatDB, error) {
	if d < 1 || d > template.MaxDim {
		return nil, fmt.Errorf("%w: d = %d", template.ErrDimension, d)
	}
	return &FloatDB{dim: d, data: make([]float32, 0, d*capacity)}, nil
}

// Rows returns the number of templates held.
func (db *FloatDB) Rows() int { return len(db.data) / db.dim }

// Add appends x normalised to unit length.
func (db *FloatDB) Add(x []float32) error {
	n, err := Norm(x, db.dim)
	if err != nil {
		return err
	}
	for _, v := range x {
		db.data = append(db.data, float32(float64(v)/n))
	}
	return nil
}

// Norm checks x (length d, finite, nonzero) and returns its Euclidean norm.
func Norm(x []float32, d int) (float64, error) {
	if len(x) != d {
		return 0, fmt.Errorf("%w: got %d values, want %d", template.ErrDimension, len(x), d)
	}
	var s float64
	for j, v := range x {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%w (coordinate %d)", template.ErrNotFinite, j)
		}
		s += f * f
	}
	if s == 0 {
		return 0, template.ErrZero
	}
	return math.Sqrt(s), nil
}

// Search returns the k rows of highest cosine with q (normalised here), best
// first, lower row on ties, scanning the matrix on all cores.
func (db *FloatDB) Search(q []float32, k int) ([]FloatMatch, error) {
	n, err := Norm(q, db.dim)
	if err != nil {
		return nil, err
	}
	qn := make([]float32, db.dim)
	for j, v := range q {
		qn[j] = float32(float64(v) / n)
	}
	rows := db.Rows()
	workers := max(min(runtime.GOMAXPROCS(0), rows/1024), 1)
	parts := make([][]FloatMatch, workers)
	var wg sync.WaitGroup
	for g := range workers {
		lo, hi := rows*g/workers, rows*(g+1)/workers
		wg.Go(func() { parts[g] = db.scan(qn, lo, hi, k) })
	}
	wg.Wait()
	var all []FloatMatch
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.SortFunc(all, cmpFloat)
	return all[:min(k, len(all))], nil
}

func cmpFloat(a, b FloatMatch) int {
	switch {
	case a.Cosine > b.Cosine || (a.Cosine == b.Cosine && a.Row < b.Row):
		return -1
	case a.Cosine < b.Cosine || a.Row > b.Row:
		return 1
	}
	return 0
}

// scan keeps the k best of rows [lo, hi) in a small sorted slice: k is 1 or
// a short candidate list, and almost every row fails the first comparison.
func (db *FloatDB) scan(q []float32, lo, hi, k int) []FloatMatch {
	top := make([]FloatMatch, 0, k+1)
	worst := float32(math.Inf(-1))
	d := db.dim
	for r := lo; r < hi; r++ {
		c := Dot(db.data[r*d:(r+1)*d], q)
		if len(top) == k && c <= worst {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, c, func(m FloatMatch, c float32) int {
			if m.Cosine >= c {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, i, FloatMatch{Row: r, Cosine: c})
		if len(top) > k {
			top = top[:k]
		}
		if len(top) == k {
			worst = top[k-1].Cosine
		}
	}
	return top
}

// Dot is the float32 inner product with eight independent accumulators, so
// the additions pipeline instead of waiting on one another.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// TernaryDB is the plaintext ternary search: T_alpha rows in a one-party
// column store, queried with T_beta through the same gather and scorer as
// 2PCFace, so it isolates the cost of protection.
type TernaryDB struct {
	store *sharing.Store
	cols  [][]uint64
}

// NewTernaryDB returns an empty plaintext ternary database.
func NewTernaryDB(d, capacity int) (*TernaryDB, error) {
	s, err := sharing.NewStore(d, capacity)
	if err != nil {
		return nil, err
	}
	return &TernaryDB{store: s}, nil
}

// Rows returns the number of rows held.
func (db *TernaryDB) Rows() int { return db.store.Rows() }

// Add appends an enrolled ternary template z = T_alpha(x).
func (db *TernaryDB) Add(z template.Ternary) error {
	_, err := db.store.Append(sharing.Share{Plus: z.Plus, Minus: z.Minus})
	return err
}

// Search returns the k best rows for the query y = T_beta(q).
func (db *TernaryDB) Search(y template.Ternary, k int) ([]sharing.Match, error) {
	sel := sharing.NewSelection(y)
	W := db.store.Words()
	var best []sharing.Match
	for w0 := 0; w0 < W; w0 = sharing.ChunkEnd(w0) {
		w1 := min(W, sharing.ChunkEnd(w0))
		cols, err := db.store.Columns(sel, w0, w1, db.cols)
		if err != nil {
			return nil, err
		}
		db.cols = cols
		m, err := sharing.ScoreParallel([][][]uint64{cols}, db.store.LiveWords(w0, w1), sel.Beta, k, -sel.Beta, 0)
		if err != nil {
			return nil, err
		}
		for i := range m {
			m[i].Row += w0 * 64
		}
		best = sharing.Merge(k, best, m)
	}
	return best, nil
}

// NewFloatDBFrom wraps an existing row-major N x d matrix (normalising its
// rows in place) without copying it.
func NewFloatDBFrom(d int, data []float32) (*FloatDB, error) {
	if d < 1 || d > template.MaxDim || len(data)%d != 0 {
		return nil, fmt.Errorf("%w: %d values for d = %d", template.ErrDimension, len(data), d)
	}
	for r := 0; r < len(data)/d; r++ {
		row := data[r*d : (r+1)*d]
		n, err := Norm(row, d)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", r, err)
		}
		for j := range row {
			row[j] = float32(float64(row[j]) / n)
		}
	}
	return &FloatDB{dim: d, data: data}, nil
}
