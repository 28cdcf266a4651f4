package template

import (
	"errors"
	"fmt"
	"math/bits"
)

// Encoder packs m ternary templates into one plaintext value per position
// (paper Alg. "Encode"/"Decode"): X+ = sum_{i<m} p^i x_i+, X- likewise.
// For a query y the homomorphic sums
//
//	ct+ = IP(y+, C+) + IP(y-, C-),  ct- = IP(y+, C-) + IP(y-, C+)
//
// hold in digit i the values <x_i+,y+> + <x_i-,y-> and <x_i+,y-> + <x_i-,y+>.
// Each is at most min(alpha, beta) < p, so digits never carry, and
// s_i = digit_i(ct+) - digit_i(ct-) = <x_i, y> exactly.
type Encoder struct {
	Alpha, Beta int
	LogP        int    // p = 2^LogP, the least power of two > min(alpha, beta)
	P           uint64 // the digit base
	M           int    // templates per value: floor(slotBits / LogP)
}

// LogBase returns log2 of the digit base p for (alpha, beta): the least
// power of two strictly greater than min(alpha, beta) (64, 128, 512 for
// beta = 63, 127, 341 as in the paper).
func LogBase(alpha, beta int) int { return bits.Len(uint(min(alpha, beta))) }

// PackingFactor is m = floor(slotBits / log2 p): how many templates share one
// plaintext value with slotBits usable bits (8/7/5 for CKKS's 50 bits at
// beta = 63/127/341; 341/292/227 for a 2048-bit Paillier plaintext).
func PackingFactor(alpha, beta, slotBits int) int { return slotBits / LogBase(alpha, beta) }

// NewEncoder returns the encoder for (alpha, beta) over values of slotBits
// usable bits (at most 64: the value type is uint64).
func NewEncoder(alpha, beta, slotBits int) (Encoder, error) {
	if alpha < 1 || beta < 1 || alpha > MaxDim || beta > MaxDim {
		return Encoder{}, fmt.Errorf("%w: alpha = %d, beta = %d", ErrWeight, alpha, beta)
	}
	if slotBits < 1 || slotBits > 64 {
		return Encoder{}, fmt.Errorf("template: %d usable slot bits, want 1..64", slotBits)
	}
	lp := LogBase(alpha, beta)
	m := slotBits / lp
	if m < 1 {
		return Encoder{}, fmt.Errorf("template: %d slot bits hold no digit of %d bits", slotBits, lp)
	}
	return Encoder{Alpha: alpha, Beta: beta, LogP: lp, P: 1 << uint(lp), M: m}, nil
}

// ValueBits is the number of bits an encoded value or a decoded sum can
// occupy: m digits of LogP bits.
func (e Encoder) ValueBits() int { return e.M * e.LogP }

// Encode writes, for every position j < d, X+_j = sum_i p^i x_i+[j] into
// plus[j] and X-_j into minus[j]. rows holds at most M templates; row i
// becomes digit i.
func (e Encoder) Encode(rows []Ternary, plus, minus []uint64) error {
	if len(rows) > e.M {
		return fmt.Errorf("template: %d rows exceed the packing factor m = %d", len(rows), e.M)
	}
	if len(rows) == 0 {
		return errors.New("template: nothing to encode")
	}
	d := rows[0].Dim
	if len(plus) < d || len(minus) < d {
		return fmt.Errorf("%w: output holds %d values, want %d", ErrDimension, min(len(plus), len(minus)), d)
	}
	clear(plus[:d])
	clear(minus[:d])
	for i, r := range rows {
		if r.Dim != d {
			return fmt.Errorf("%w: row %d has d = %d, want %d", ErrDimension, i, r.Dim, d)
		}
		shift := uint(i * e.LogP)
		for w := range r.Plus {
			for b := r.Plus[w]; b != 0; b &= b - 1 {
				plus[w*64+bits.TrailingZeros64(b)] |= 1 << shift
			}
			for b := r.Minus[w]; b != 0; b &= b - 1 {
				minus[w*64+bits.TrailingZeros64(b)] |= 1 << shift
			}
		}
	}
	return nil
}

// Decode splits ctPlus and ctMinus into M digits and writes
// digit_i(ctPlus) - digit_i(ctMinus) into scores[i].
func (e Encoder) Decode(ctPlus, ctMinus uint64, scores []int) {
	mask := e.P - 1
	for i := 0; i < e.M && i < len(scores); i++ {
		scores[i] = int(ctPlus&mask) - int(ctMinus&mask)
		ctPlus >>= uint(e.LogP)
		ctMinus >>= uint(e.LogP)
	}
}
