package additive

import (
	"fmt"

	"github.com/idface/idface/template"
)

// PermuteMaskPair is PermuteMask for two score-share vectors of one query
// (a replicated holder's two shares): dstA[pi(i)] = srcA[i] + m_a[pi(i)]
// and dstB[pi(i)] = srcB[i] + m_b[pi(i)], as two PermuteMask calls give,
// but with one evaluation of pi: each chunk of positions is mapped to its
// rows once and both vectors are gathered and masked from it. Deleted
// rows enter as DeadScore in the vector of holder 0.
func PermuteMaskPair[E Elem](p *Permuter, dstA, dstB, srcA, srcB []E, live []uint64, seed *Seed, a, b, mu int) error {
	n := len(srcA)
	switch {
	case len(srcB) != n || len(dstA) != n || len(dstB) != n || n > maxPermRows:
		return fmt.Errorf("sharing: permute %d and %d score shares into %d and %d", n, len(srcB), len(dstA), len(dstB))
	case mu < 2 || a < 0 || a >= mu || b < 0 || b >= mu:
		return fmt.Errorf("sharing: holders %d and %d of mu = %d", a, b, mu)
	case live != nil && len(live) < template.Words(n):
		return fmt.Errorf("sharing: live bitset has %d words, want %d", len(live), template.Words(n))
	case n > 0 && (aliases(dstA, srcA, srcB) || aliases(dstB, srcA, srcB) || &dstA[0] == &dstB[0]):
		return fmt.Errorf("sharing: permute in place: the destinations must differ from the sources and from each other")
	}
	return permuteMasked(p, seed, live, mu, nil, masked[E]{dstA, srcA, a}, masked[E]{dstB, srcB, b})
}

func aliases[E Elem](dst []E, srcs ...[]E) bool {
	for _, s := range srcs {
		if &dst[0] == &s[0] {
			return true
		}
	}
	return false
}
