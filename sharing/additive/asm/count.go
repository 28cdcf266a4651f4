package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// count4 is the 2PC/MPC scorer's counting kernel (sharing.Scorer): for
// four row words (256 rows) it XORs the mu parties' words of each of the n
// selected columns, complements the subtracting ones (column >= beta), and
// sums the n bit vectors into bit-sliced counters with Harley-Seal
// carry-save adders, four words to a register: the pure-Go count after
// its transpose, without the transpose.
func count4() {
	TEXT("count4AVX2", NOSPLIT, "func(ptrs **uint64, mu, n, beta, off int, planes *uint64, nhi int)")
	Pragma("noescape")
	Doc(
		"count4AVX2 sums, for the four words at word offset off of every",
		"column, the XOR of the mu parties' words (ptrs[p*n+i] is party p's",
		"column i), complemented for columns i >= beta, into bit-sliced counters:",
		"planes[4*b+j] is bit b of the counts of word off+j, for b < 4+nhi.",
	)
	ptrs := Load(Param("ptrs"), GP64())
	mu := Load(Param("mu"), GP64())
	n := Load(Param("n"), GP64())
	beta := Load(Param("beta"), GP64())
	off := Load(Param("off"), GP64())
	planes := Load(Param("planes"), GP64())
	nhi := Load(Param("nhi"), GP64())
	SHLQ(U8(3), off) // bytes

	ones, twos, fours, eights := YMM(), YMM(), YMM(), YMM()
	for _, r := range []VecVirtual{ones, twos, fours, eights} {
		VPXOR(r, r, r)
	}
	// The planes above eights start at zero.
	{
		z := YMM()
		VPXOR(z, z, z)
		j, addr := GP64(), GP64()
		XORQ(j, j)
		LEAQ(Mem{Base: planes, Disp: 128}, addr)
		Label("zero")
		CMPQ(j, nhi)
		JAE(LabelRef("zerodone"))
		VMOVDQU(z, Mem{Base: addr})
		ADDQ(U8(32), addr)
		INCQ(j)
		JMP(LabelRef("zero"))
		Label("zerodone")
	}

	labels := 0
	// load sets y to column c's words: the parties' XOR, complemented
	// when c >= beta.
	load := func(y VecVirtual, c Register) {
		labels++
		l := fmt.Sprint(labels)
		p := GP64()
		MOVQ(Mem{Base: ptrs, Index: c, Scale: 8}, p)
		VMOVDQU(Mem{Base: p, Index: off, Scale: 1}, y)
		k, q := GP64(), GP64()
		MOVQ(U32(1), k)
		MOVQ(c, q)
		Label("party" + l)
		CMPQ(k, mu)
		JAE(LabelRef("partydone" + l))
		ADDQ(n, q)
		MOVQ(Mem{Base: ptrs, Index: q, Scale: 8}, p)
		VPXOR(Mem{Base: p, Index: off, Scale: 1}, y, y)
		INCQ(k)
		JMP(LabelRef("party" + l))
		Label("partydone" + l)
		CMPQ(c, beta)
		JB(LabelRef("kept" + l))
		t := YMM()
		VPCMPEQB(t, t, t)
		VPXOR(t, y, y)
		Label("kept" + l)
	}
	// csa is (hi, a) = (carry, sum) of a + b + c, bitwise; b and c are
	// clobbered.
	csa := func(hi, a, b, c VecVirtual) {
		VPAND(b, a, hi) // a & b
		VPXOR(b, a, b)  // u = a ^ b
		VPXOR(c, b, a)  // sum = u ^ c
		VPAND(c, b, b)  // u & c
		VPOR(b, hi, hi) // carry = a&b | u&c
	}

	i := GP64()
	XORQ(i, i)
	Label("sixteen")
	end := GP64()
	MOVQ(i, end)
	ADDQ(U8(16), end)
	CMPQ(end, n)
	JA(LabelRef("rest"))
	c := GP64()
	pair := func(hi VecVirtual, k int) { // hi, ones = csa(ones, y[k], y[k+1])
		y0, y1 := YMM(), YMM()
		LEAQ(Mem{Base: i, Disp: k}, c)
		load(y0, c)
		LEAQ(Mem{Base: i, Disp: k + 1}, c)
		load(y1, c)
		csa(hi, ones, y0, y1)
	}
	twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens := YMM(), YMM(), YMM(), YMM(), YMM(), YMM(), YMM()
	pair(twosA, 0)
	pair(twosB, 2)
	csa(foursA, twos, twosA, twosB)
	pair(twosA, 4)
	pair(twosB, 6)
	csa(foursB, twos, twosA, twosB)
	csa(eightsA, fours, foursA, foursB)
	pair(twosA, 8)
	pair(twosB, 10)
	csa(foursA, twos, twosA, twosB)
	pair(twosA, 12)
	pair(twosB, 14)
	csa(foursB, twos, twosA, twosB)
	csa(eightsB, fours, foursA, foursB)
	csa(sixteens, eights, eightsA, eightsB)
	// Ripple the sixteens into the planes above eights.
	addr := GP64()
	LEAQ(Mem{Base: planes, Disp: 128}, addr)
	ripple("ripple", sixteens, addr, nhi)
	MOVQ(end, i)
	JMP(LabelRef("sixteen"))

	// The n mod 16 remaining columns ripple through every plane.
	Label("rest")
	VMOVDQU(ones, Mem{Base: planes})
	VMOVDQU(twos, Mem{Base: planes, Disp: 32})
	VMOVDQU(fours, Mem{Base: planes, Disp: 64})
	VMOVDQU(eights, Mem{Base: planes, Disp: 96})
	np := GP64()
	MOVQ(nhi, np)
	ADDQ(U8(4), np)
	Label("col")
	CMPQ(i, n)
	JAE(LabelRef("done"))
	y := YMM()
	load(y, i)
	MOVQ(planes, addr)
	ripple("carry", y, addr, np)
	INCQ(i)
	JMP(LabelRef("col"))
	Label("done")
	VZEROUPPER()
	RET()
}

// ripple adds the bits of c into count planes of 32 bytes from address
// first on, count of them: each plane keeps the sum bit, c carries on (a
// ripple-carry adder, bit-sliced). first and c are clobbered.
func ripple(name string, c VecVirtual, first, count Register) {
	j := GP64()
	XORQ(j, j)
	Label(name)
	CMPQ(j, count)
	JAE(LabelRef(name + "done"))
	h, t := YMM(), YMM()
	VMOVDQU(Mem{Base: first}, h)
	VPXOR(c, h, t)
	VMOVDQU(t, Mem{Base: first})
	VPAND(h, c, c)
	ADDQ(U8(32), first)
	INCQ(j)
	JMP(LabelRef(name))
	Label(name + "done")
}
