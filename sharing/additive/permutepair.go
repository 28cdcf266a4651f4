package additive

import (
	"fmt"
	"unsafe"

	"github.com/idface/idface/template"
)

// PermuteMaskPair is PermuteMask for two score-share vectors of one query
// (a replicated holder's two shares): dstA[pi(i)] = srcA[i] + m_a[pi(i)]
// and dstB[pi(i)] = srcB[i] + m_b[pi(i)], as two PermuteMask calls give,
// but with one layout and one shuffle: the two vectors travel packed as
// pairs (k-bit halves of a 2k-bit element) and are split while each
// worker adds the masks. Deleted rows enter as DeadScore in the half of
// holder 0.
func PermuteMaskPair[E Elem](p *Permuter, dstA, dstB, srcA, srcB []E, live []uint64, seed *Seed, a, b, mu int) error {
	n := len(srcA)
	switch {
	case len(srcB) != n || len(dstA) != n || len(dstB) != n || n > maxPermRows:
		return fmt.Errorf("sharing: permute %d and %d score shares into %d and %d", n, len(srcB), len(dstA), len(dstB))
	case mu < 2 || a < 0 || a >= mu || b < 0 || b >= mu:
		return fmt.Errorf("sharing: holders %d and %d of mu = %d", a, b, mu)
	case live != nil && len(live) < template.Words(n):
		return fmt.Errorf("sharing: live bitset has %d words, want %d", len(live), template.Words(n))
	}
	switch sa := any(srcA).(type) {
	case []uint8:
		return permutePair[uint8, uint16](p, any(dstA).([]uint8), any(dstB).([]uint8), sa, any(srcB).([]uint8), live, seed, a, b, mu)
	case []uint16:
		return permutePair[uint16, uint32](p, any(dstA).([]uint16), any(dstB).([]uint16), sa, any(srcB).([]uint16), live, seed, a, b, mu)
	}
	return fmt.Errorf("sharing: a ring of %d bits", elemBits[E]())
}

// permutePair packs (srcA[i], srcB[i]) into one T, permutes the pairs
// once, and unpacks them into dstA and dstB before the masks.
func permutePair[E uint8 | uint16, T uint16 | uint32](p *Permuter, dstA, dstB, srcA, srcB []E, live []uint64, seed *Seed, a, b, mu int) error {
	ks, err := newKeystream(seed)
	if err != nil {
		return err
	}
	n := len(srcA)
	shift := elemBits[E]()
	p.pairs = grow(p.pairs, (n*2*shift+63)/64+1)
	dst := unsafe.Slice((*T)(unsafe.Pointer(&p.pairs[0])), n) // T is 2 or 4 bytes; words are aligned for it
	var dead T
	if a == 0 {
		dead |= T(E(DeadScore[E]()))
	}
	if b == 0 {
		dead |= T(E(DeadScore[E]())) << shift
	}
	p.layout(ks, n)
	// scatter, packing on the way: pair i enters its bucket in row order.
	B := 1 << p.bbits
	p.parallel(func(w int) {
		r0, r1 := p.rowRange(w)
		cur := p.cur[w*B : (w+1)*B]
		for i := r0; i < r1; i++ {
			v := T(srcA[i]) | T(srcB[i])<<shift
			if live != nil && live[i>>6]>>uint(i&63)&1 == 0 {
				v = dead
			}
			bk := p.bucket(i)
			dst[cur[bk]] = v
			cur[bk]++
		}
	})
	shuffleAll(p, dst, ks, func(pw *permWorker, p0, p1 int) {
		for i, v := range dst[p0:p1] {
			dstA[p0+i], dstB[p0+i] = E(v), E(v>>shift)
		}
		addMask(pw, dstA, ks, a, mu, p0, p1)
		addMask(pw, dstB, ks, b, mu, p0, p1)
	})
	return nil
}
