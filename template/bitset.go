package template

import (
	"fmt"

	"github.com/bits-and-blooms/bitset"
)

// Sets returns z+ and z- as bitsets of length Dim (views of t's words, not
// copies): the natural public form of the split for callers that test,
// count or iterate positions. Hot paths (sharing, scoring) keep the raw
// words; see docs/DESIGN-NOTES.md "Bitsets".
func (t Ternary) Sets() (plus, minus *bitset.BitSet) {
	return bitset.FromWithLength(uint(t.Dim), t.Plus), bitset.FromWithLength(uint(t.Dim), t.Minus)
}

// FromSets builds a ternary vector of dimension d from z+ and z- (copied),
// which must be disjoint and lie below d.
func FromSets(d int, plus, minus *bitset.BitSet) (Ternary, error) {
	if d < 1 || d > MaxDim {
		return Ternary{}, fmt.Errorf("%w: d = %d", ErrDimension, d)
	}
	t := NewTernary(d)
	for i, b := range []*bitset.BitSet{plus, minus} {
		dst := t.Plus
		if i == 1 {
			dst = t.Minus
		}
		for j := range b.EachSet() {
			if j >= uint(d) {
				return Ternary{}, fmt.Errorf("template: position %d outside d = %d", j, d)
			}
			dst[j>>6] |= 1 << (j & 63)
		}
	}
	if plus.IntersectionCardinality(minus) != 0 {
		return Ternary{}, fmt.Errorf("template: z+ and z- overlap")
	}
	return t, nil
}
