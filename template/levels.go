package template

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxLevels bounds L: the coefficients of a multi-level vector are int8.
const MaxLevels = 127

// ErrLevels reports a malformed or out-of-range multi-level spec.
var ErrLevels = errors.New("template: bad levels")

// Levels are the counts a_1..a_L of a multi-level transform (docs/BLIND-NOTES.md "Ring and multi-level transforms"): the
// a_1 coordinates of largest |x_j| become sign(x_j)*L, the next a_2 become
// sign(x_j)*(L-1), ..., the a_L after them sign(x_j)*1, the rest 0. One
// level with a_1 = a is the paper's T_a. The zero value is invalid.
type Levels struct {
	Counts []int // a_1..a_L; len(Counts) is L
}

// TernaryLevels is T_a as levels: "1:a".
func TernaryLevels(a int) Levels { return Levels{Counts: []int{a}} }

// ParseLevels reads the CLI form "L:a1,a2,...,aL", e.g. "4:40,80,120,101"
// or the paper's T_341 as "1:341". It checks the counts but not the
// dimension (see Validate).
func ParseLevels(s string) (Levels, error) {
	head, tail, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Levels{}, fmt.Errorf("%w: %q: want L:a1,...,aL (e.g. 1:341 or 4:40,80,120,101)", ErrLevels, s)
	}
	L, err := strconv.Atoi(strings.TrimSpace(head))
	if err != nil || L < 1 || L > MaxLevels {
		return Levels{}, fmt.Errorf("%w: %q: L = %q, want 1..%d", ErrLevels, s, head, MaxLevels)
	}
	fields := strings.Split(tail, ",")
	if len(fields) != L {
		return Levels{}, fmt.Errorf("%w: %q: L = %d but %d counts", ErrLevels, s, L, len(fields))
	}
	lv := Levels{Counts: make([]int, L)}
	for i, f := range fields {
		if lv.Counts[i], err = strconv.Atoi(strings.TrimSpace(f)); err != nil {
			return Levels{}, fmt.Errorf("%w: %q: count %d is %q, not an integer", ErrLevels, s, i+1, f)
		}
	}
	return lv, lv.check()
}

// check validates the counts alone.
func (lv Levels) check() error {
	if len(lv.Counts) < 1 || len(lv.Counts) > MaxLevels {
		return fmt.Errorf("%w: L = %d, want 1..%d", ErrLevels, len(lv.Counts), MaxLevels)
	}
	for i, a := range lv.Counts {
		if a < 1 || a > MaxDim {
			return fmt.Errorf("%w: a_%d = %d, want 1..%d", ErrLevels, i+1, a, MaxDim)
		}
	}
	return nil
}

// Validate checks the levels for dimension d: 1 <= L <= MaxLevels, every
// count positive, and their sum at most d.
func (lv Levels) Validate(d int) error {
	if d < 1 || d > MaxDim {
		return fmt.Errorf("%w: d = %d, want 1..%d", ErrDimension, d, MaxDim)
	}
	if err := lv.check(); err != nil {
		return err
	}
	if n := lv.Support(); n > d {
		return fmt.Errorf("%w: %s selects %d coordinates, more than d = %d", ErrLevels, lv, n, d)
	}
	return nil
}

// L returns the number of levels (the largest magnitude).
func (lv Levels) L() int { return len(lv.Counts) }

// Support returns the number of nonzero outputs, sum of a_l.
func (lv Levels) Support() int {
	n := 0
	for _, a := range lv.Counts {
		n += a
	}
	return n
}

// NormSq returns ||v||^2 = sum_l (L-l+1)^2 a_l, the same for every output.
// (The blind-mode design (docs/BLIND-NOTES.md) writes sum l^2 a_l, which indexes the levels the other way.)
func (lv Levels) NormSq() int {
	n, L := 0, len(lv.Counts)
	for i, a := range lv.Counts {
		m := L - i
		n += m * m * a
	}
	return n
}

// String returns the CLI form "L:a1,...,aL".
func (lv Levels) String() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(lv.Counts)))
	for i, a := range lv.Counts {
		if i == 0 {
			b.WriteByte(':')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(a))
	}
	return b.String()
}

// MarshalText and UnmarshalText use the CLI form, so configs and JSON can
// carry levels as "4:40,80,120,101".
func (lv Levels) MarshalText() ([]byte, error) { return []byte(lv.String()), lv.check() }

func (lv *Levels) UnmarshalText(b []byte) error {
	v, err := ParseLevels(string(b))
	if err != nil {
		return err
	}
	*lv = v
	return nil
}

// MaxAbsScore bounds |<G(x), Q(y)>| over all inputs: by the rearrangement
// inequality the largest magnitudes of the two vectors meet on the same
// coordinates, so the bound is the sum of the products of the two
// magnitude lists sorted in decreasing order (min(alpha, beta) for two
// ternary transforms). Inputs reach it, so a ring that holds it as a signed
// value never wraps a score.
func MaxAbsScore(g, q Levels) int {
	s := 0
	gi, qi := 0, 0                     // current level of g and q
	gl, ql := count(g, 0), count(q, 0) // coordinates left at that level
	for gi < len(g.Counts) && qi < len(q.Counts) {
		n := min(gl, ql)
		s += n * (len(g.Counts) - gi) * (len(q.Counts) - qi)
		if gl -= n; gl == 0 {
			gi++
			gl = count(g, gi)
		}
		if ql -= n; ql == 0 {
			qi++
			ql = count(q, qi)
		}
	}
	return s
}

func count(lv Levels, i int) int {
	if i < len(lv.Counts) {
		return lv.Counts[i]
	}
	return 0
}

// LevelsScoreThreshold is ScoreThreshold for multi-level vectors: a score s
// is accepted when s > tau*||G||*||Q||. With one level each it equals
// ScoreThreshold(tau, alpha, beta) bit for bit.
func LevelsScoreThreshold(tau float64, g, q Levels) float64 {
	return tau * math.Sqrt(float64(g.NormSq())*float64(q.NormSq()))
}

// LevelsMinAcceptScore is the least integer score accepted under the cosine
// threshold tau, the least s with s > tau*||G||*||Q|| (the convention of
// MinAcceptScore, to which it reduces for one level each).
func LevelsMinAcceptScore(tau float64, g, q Levels) int {
	return int(math.Floor(LevelsScoreThreshold(tau, g, q))) + 1
}

// LevelsCosine is the cosine estimate s/(||G||*||Q||) of an integer score.
func LevelsCosine(score int, g, q Levels) float64 {
	return float64(score) / math.Sqrt(float64(g.NormSq())*float64(q.NormSq()))
}

// LevelTransformer applies a multi-level transform for a fixed (d, levels)
// without allocating per call. It is not safe for concurrent use.
type LevelTransformer struct {
	d         int
	lv        Levels
	cuts      []int // a_1, a_1+a_2, ...: the top-c_l sets are nested
	t         []uint64
	ties      []int
	key, cand []uint64
}

// NewLevelTransformer returns a transformer for dimension d and levels lv.
func NewLevelTransformer(d int, lv Levels) (*LevelTransformer, error) {
	if err := lv.Validate(d); err != nil {
		return nil, err
	}
	L := lv.L()
	tr := &LevelTransformer{d: d, lv: Levels{Counts: append([]int(nil), lv.Counts...)},
		cuts: make([]int, L), t: make([]uint64, L), ties: make([]int, L),
		key: make([]uint64, d), cand: make([]uint64, d)}
	c := 0
	for i, a := range lv.Counts {
		c += a
		tr.cuts[i] = c
	}
	return tr, nil
}

// Dim returns d.
func (tr *LevelTransformer) Dim() int { return tr.d }

// TransformLevels is a convenience wrapper: the levels transform of x.
func TransformLevels[F Float](x []F, lv Levels) ([]int8, error) {
	tr, err := NewLevelTransformer(len(x), lv)
	if err != nil {
		return nil, err
	}
	out := make([]int8, len(x))
	return out, ApplyLevels(tr, x, out)
}

// ApplyLevels writes the levels transform of x into dst (d entries). The
// order is that of Apply: larger |x_j| first, ties to the lower index, and
// a selected zero coordinate counts as positive; with one level the output
// is exactly T_a(x). x must be finite and nonzero.
func ApplyLevels[F Float](tr *LevelTransformer, x []F, dst []int8) error {
	if len(x) != tr.d || len(dst) != tr.d {
		return fmt.Errorf("%w: got %d values and %d outputs, want %d", ErrDimension, len(x), len(dst), tr.d)
	}
	any, err := magnitudeKeys(x, tr.key)
	if err != nil {
		return err
	}
	// The top-c_l sets are nested, so a coordinate's magnitude is the number
	// of cuts it falls in: in all L for the a_1 largest, in one for level L.
	for l, c := range tr.cuts {
		t, above := kthLargest(tr.key, tr.cand, c, any)
		tr.t[l], tr.ties[l] = t, c-above
	}
	for j, k := range tr.key {
		m := int8(0)
		for l, t := range tr.t {
			switch {
			case k > t:
				m++
			case k == t && tr.ties[l] > 0: // ties go to the lower index
				tr.ties[l]--
				m++
			}
		}
		if math.Float64bits(float64(x[j]))>>63 == 1 && k != 0 { // -0 counts as +
			m = -m
		}
		dst[j] = m
	}
	return nil
}

// DotInt8 returns <a, b> for two coefficient vectors of equal length.
func DotInt8(a, b []int8) int {
	b = b[:len(a)]
	s := 0
	for j, v := range a {
		s += int(v) * int(b[j])
	}
	return s
}

// CheckLevels reports whether the nonzero coefficients coef are exactly
// the form lv gives: a_1 of magnitude L, a_2 of magnitude L-1, and so on
// (a helper refuses a query of another form).
func CheckLevels(coef []int8, lv Levels) error {
	if err := lv.check(); err != nil {
		return err
	}
	L := lv.L()
	got := make([]int, L)
	for _, c := range coef {
		m := int(c)
		if m < 0 {
			m = -m
		}
		if m < 1 || m > L {
			return fmt.Errorf("template: coefficient %d outside a %d-level form", c, L)
		}
		got[L-m]++
	}
	for l, a := range lv.Counts {
		if got[l] != a {
			return fmt.Errorf("template: %d coefficients of magnitude %d, the form %s has %d", got[l], L-l, lv, a)
		}
	}
	return nil
}

// QuantisedLevels is a dense L-level transform of d coordinates: every
// coordinate gets a magnitude 1..L by rank, the counts those of a
// Gaussian coordinate quantised in L equal bins of width 3/L standard
// deviations (the top bin open), so that Q(q) is q quantised to
// log2(2L+1) bits with the scale set per vector by rank. L = 7 is a 4-bit
// query; for d = 512, "7:5,11,28,57,99,142,170". Each count is at least 1.
func QuantisedLevels(d, L int) (Levels, error) {
	if L < 1 || L > MaxLevels || d < L {
		return Levels{}, fmt.Errorf("%w: %d levels over d = %d", ErrLevels, L, d)
	}
	w := 3 / float64(L)
	cdf := func(x float64) float64 { return math.Erf(x / math.Sqrt2) } // P(|N(0,1)| < x)
	counts := make([]int, L)
	frac := make([]float64, L)
	sum := 0
	for i := range counts { // counts[0] is the top magnitude L
		m := L - i
		hi := 1.0
		if m < L {
			hi = cdf(float64(m) * w)
		}
		x := (hi - cdf(float64(m-1)*w)) * float64(d)
		counts[i] = max(1, int(x))
		frac[i] = x - float64(int(x))
		sum += counts[i]
	}
	for sum < d { // the largest remainders get the rows left over
		best := 0
		for i := range frac {
			if frac[i] > frac[best] {
				best = i
			}
		}
		counts[best]++
		frac[best] = -1
		sum++
	}
	for sum > d { // (the minimum of 1 overshot) the largest level gives way
		best := 0
		for i := range counts {
			if counts[i] > counts[best] {
				best = i
			}
		}
		counts[best]--
		sum--
	}
	lv := Levels{Counts: counts}
	return lv, lv.Validate(d)
}

// FourLevelGallery is the 4-level gallery transform of support alpha that
// blind mode's measurements chose (docs/BLIND-NOTES.md): "4:32,64,96,149" for
// alpha = 341, the counts scaled with alpha otherwise.
func FourLevelGallery(alpha int) (Levels, error) {
	if alpha < 4 {
		return Levels{}, fmt.Errorf("%w: 4 levels over a support of %d", ErrLevels, alpha)
	}
	c := []int{max(1, alpha*32/341), max(1, alpha*64/341), max(1, alpha*96/341)}
	return Levels{Counts: append(c, alpha-c[0]-c[1]-c[2])}, nil
}
