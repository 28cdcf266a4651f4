package template

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Sentinel errors callers can test with errors.Is.
var (
	ErrDimension = errors.New("template: wrong dimension")
	ErrNotFinite = errors.New("template: NaN or Inf in template")
	ErrZero      = errors.New("template: zero vector cannot be normalized")
	ErrWeight    = errors.New("template: number of nonzeros out of range")
)

// MaxDim bounds the template dimension accepted anywhere in idface. It keeps
// every count (2*beta <= 2*MaxDim) inside the bit-sliced counters.
const MaxDim = 4096

// Words returns the number of 64-bit words of a bitset over d positions.
func Words(d int) int { return (d + 63) / 64 }

// DefaultAlpha is floor(2d/3): it maximises |Z^d_a| = C(d,a)*2^a and, per the
// paper's experiment, minimises the mean distortion (341 for d = 512).
func DefaultAlpha(d int) int { return 2 * d / 3 }

// Ternary is a vector in Z^d_a = {-1,0,1}^d split by sign: bit j of Plus is
// set where the entry is +1, bit j of Minus where it is -1. The two bitsets
// are disjoint and have Words(Dim) words each; bits at or past Dim are zero.
type Ternary struct {
	Dim   int
	Plus  []uint64
	Minus []uint64
}

// NewTernary returns an all-zero ternary vector of dimension d.
func NewTernary(d int) Ternary {
	w := Words(d)
	buf := make([]uint64, 2*w)
	return Ternary{Dim: d, Plus: buf[:w:w], Minus: buf[w:]}
}

// Weight returns the number of nonzero entries.
func (t Ternary) Weight() int {
	n := 0
	for i := range t.Plus {
		n += bits.OnesCount64(t.Plus[i]) + bits.OnesCount64(t.Minus[i])
	}
	return n
}

// At returns entry j (-1, 0 or +1).
func (t Ternary) At(j int) int8 {
	w, b := j>>6, uint(j&63)
	return int8(t.Plus[w]>>b&1) - int8(t.Minus[w]>>b&1)
}

// Int8 returns the vector as d entries in {-1, 0, 1}.
func (t Ternary) Int8() []int8 {
	out := make([]int8, t.Dim)
	for j := range out {
		out[j] = t.At(j)
	}
	return out
}

// Dot returns <t, u> = HW(t+&u+) + HW(t-&u-) - HW(t+&u-) - HW(t-&u+).
func (t Ternary) Dot(u Ternary) int {
	s := 0
	for i := range t.Plus {
		s += bits.OnesCount64(t.Plus[i]&u.Plus[i]) + bits.OnesCount64(t.Minus[i]&u.Minus[i])
		s -= bits.OnesCount64(t.Plus[i]&u.Minus[i]) + bits.OnesCount64(t.Minus[i]&u.Plus[i])
	}
	return s
}

// Validate checks the invariants of a ternary vector received from outside:
// the word counts, disjoint signs, no bits past Dim, and the given weight
// (pass weight < 0 to skip that check).
func (t Ternary) Validate(weight int) error {
	if t.Dim < 1 || t.Dim > MaxDim {
		return fmt.Errorf("%w: d = %d, want 1..%d", ErrDimension, t.Dim, MaxDim)
	}
	w := Words(t.Dim)
	if len(t.Plus) != w || len(t.Minus) != w {
		return fmt.Errorf("%w: %d/%d words for d = %d, want %d", ErrDimension, len(t.Plus), len(t.Minus), t.Dim, w)
	}
	for i := range t.Plus {
		if t.Plus[i]&t.Minus[i] != 0 {
			return errors.New("template: a position is both +1 and -1")
		}
	}
	if r := t.Dim & 63; r != 0 && (t.Plus[w-1]|t.Minus[w-1])>>uint(r) != 0 {
		return errors.New("template: bits set past the dimension")
	}
	if weight >= 0 && t.Weight() != weight {
		return fmt.Errorf("%w: %d nonzeros, want %d", ErrWeight, t.Weight(), weight)
	}
	return nil
}

// Float is the element type of templates read from face pipelines.
type Float interface{ ~float32 | ~float64 }

// Transformer applies T_a for a fixed (d, a) without allocating per call.
// It is not safe for concurrent use; make one per goroutine.
type Transformer struct {
	d, a      int
	key, cand []uint64
}

// NewTransformer returns a Transformer for dimension d and a nonzeros.
func NewTransformer(d, a int) (*Transformer, error) {
	if d < 1 || d > MaxDim {
		return nil, fmt.Errorf("%w: d = %d, want 1..%d", ErrDimension, d, MaxDim)
	}
	if a < 1 || a > d {
		return nil, fmt.Errorf("%w: a = %d, want 1..%d (d = %d)", ErrWeight, a, d, d)
	}
	return &Transformer{d: d, a: a, key: make([]uint64, d), cand: make([]uint64, d)}, nil
}

// Dim returns d; Weight returns a.
func (tr *Transformer) Dim() int    { return tr.d }
func (tr *Transformer) Weight() int { return tr.a }

// Transform is a convenience wrapper: T_a(x) with d = len(x).
func Transform[F Float](x []F, a int) (Ternary, error) {
	tr, err := NewTransformer(len(x), a)
	if err != nil {
		return Ternary{}, err
	}
	out := NewTernary(len(x))
	return out, Apply(tr, x, out)
}

// Apply computes T_a(x) into dst (which must have dimension d): the a
// coordinates of largest |x_j| become sign(x_j), all others 0. Ties in |x_j|
// go to the lower index, so every party and every run agree. A coordinate
// equal to zero that must be selected (x has fewer than a nonzeros) becomes
// +1, keeping exactly a nonzeros.
//
// T_a is invariant under positive scaling, so the selection runs on x as
// given: T_a(x) = T_a(x/|x|) exactly, without the rounding a normalisation
// could introduce. x must be finite and nonzero.
func Apply[F Float](tr *Transformer, x []F, dst Ternary) error {
	if len(x) != tr.d {
		return fmt.Errorf("%w: got %d values, want %d", ErrDimension, len(x), tr.d)
	}
	if dst.Dim != tr.d || len(dst.Plus) != Words(tr.d) || len(dst.Minus) != Words(tr.d) {
		return fmt.Errorf("%w: output has dimension %d, want %d", ErrDimension, dst.Dim, tr.d)
	}
	any, err := magnitudeKeys(x, tr.key)
	if err != nil {
		return err
	}
	t, above := kthLargest(tr.key, tr.cand, tr.a, any)
	// Everything strictly above t is selected; the remaining slots go to the
	// coordinates equal to t in index order. Branch-free but for the ties:
	// the selection and the signs are random, so branches would mispredict.
	ties := tr.a - above
	clear(dst.Plus)
	clear(dst.Minus)
	for j, k := range tr.key {
		sel := (t - k) >> 63 // keys are < 2^63, so this is k > t
		if k == t && ties > 0 {
			sel = 1
			ties--
		}
		neg := math.Float64bits(float64(x[j])) >> 63 & ((0 - k) >> 63) // -0 counts as +
		s := uint(j & 63)
		dst.Plus[j>>6] |= (sel &^ neg) << s
		dst.Minus[j>>6] |= (sel & neg) << s
	}
	return nil
}

// kthLargest returns the k-th largest (1-based) of keys and how many keys are
// strictly larger. It is an MSB-first radix select over 8-bit digits: each
// pass histograms the remaining candidates, keeps the bucket holding the k-th
// and drops the rest. Branch-light, so far faster than quickselect here.
func kthLargest(keys, buf []uint64, k int, or uint64) (kth uint64, above int) {
	cand := keys
	need := k // rank of the answer within cand, from the top
	// Bits above the highest set bit of any key are zero everywhere: start
	// at the top byte that can differ.
	for shift := max(bits.Len64(or)-8, 0); ; shift = max(shift-8, 0) {
		var hist [256]int32
		for _, v := range cand {
			hist[byte(v>>uint(shift))]++
		}
		b := 255
		for ; ; b-- {
			if n := int(hist[b]); n >= need {
				break
			} else {
				need -= n
				above += n
			}
		}
		n := 0
		for _, v := range cand {
			if byte(v>>uint(shift)) == byte(b) {
				buf[n] = v
				n++
			}
		}
		cand = buf[:n]
		if shift == 0 || need == 1 || need == n {
			break
		}
	}
	// Within cand the answer has rank need from the top.
	kth = cand[0]
	switch {
	case need == 1:
		for _, v := range cand {
			kth = max(kth, v)
		}
	case need == len(cand):
		for _, v := range cand {
			kth = min(kth, v)
		}
	}
	for _, v := range cand {
		if v > kth {
			above++
		}
	}
	return kth, above
}

// magnitudeKeys writes |x_j| as an integer key into key (for non-negative
// floats the IEEE bit pattern orders like the value, so the selection is
// a radix select) and returns the OR of the keys; it refuses a value that
// is not finite, and x that is all zeros.
func magnitudeKeys[F Float](x []F, key []uint64) (uint64, error) {
	const signMask, infBits = 1<<63 - 1, 0x7FF0000000000000
	var any uint64
	for j, v := range x {
		k := math.Float64bits(float64(v)) & signMask
		if k >= infBits {
			return 0, fmt.Errorf("%w (coordinate %d)", ErrNotFinite, j)
		}
		any |= k
		key[j] = k
	}
	if any == 0 {
		return 0, ErrZero
	}
	return any, nil
}
