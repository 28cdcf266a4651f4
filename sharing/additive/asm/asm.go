// Command asm generates the AVX2 kernels with avo: sharing/additive's
// (dense_amd64.s, dense_stub_amd64.go: amd64 only by its name; run `go
// generate ./sharing/additive`, or `cd sharing/additive/asm && go run .
// -out ../dense_amd64.s -stubs ../dense_stub_amd64.go -pkg additive`) and,
// with -kernel count, sharing's 2PC/MPC scorer (count_amd64.s,
// count_stub_amd64.go; `go generate ./sharing`). It is its own module so
// that avo is not a dependency of idface.
package main

import (
	"flag"
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	kernel := flag.String("kernel", "dense", "which kernels: dense (package additive) or count (package sharing: the 2PC/MPC scorer)")
	flag.Parse()
	ConstraintExpr("!purego")
	if *kernel == "count" {
		count4()
		Generate()
		return
	}
	TEXT("mac4AVX2", NOSPLIT, "func(accE, accO *uint16, x *[4]*byte, c *[4]uint16, n int)")
	Pragma("noescape") // the kernel keeps no pointer: callers' accumulators stay on the stack
	Doc(
		"mac4AVX2 adds c[t] (< 256, read as a signed byte) times every byte of",
		"the four columns x[t] (n bytes, a multiple of 32) into 16-bit lanes:",
		"the even bytes of each 32-byte group g into accE[16g:16g+16], the odd",
		"ones into accO. Only the low 8 bits of a lane are meant: its row's sum",
		"mod 2^8; lanes never carry into each other, so no reduction is needed.",
	)
	accE := Load(Param("accE"), GP64())
	accO := Load(Param("accO"), GP64())
	// VPMADDUBSW multiplies unsigned bytes (the column) by signed bytes
	// and adds each even/odd pair into a 16-bit lane, saturating. With the
	// coefficient at one byte of each pair and 0 at the other, a lane is
	// one product, x * c for x in [0, 255] and c (the coefficient read as
	// a signed byte, equal mod 2^8) in [-128, 127]: within [-32640,
	// 32385], so it never saturates, and the even and odd rows need no
	// mask or shift of the column (two multiplies per 32 bytes, as with
	// VPMULLW; VPAND and VPSRLW gone: 18 instructions a group of four
	// columns instead of 26).
	cols, coefE, n := columns()
	var coefO [4]VecVirtual
	for t := range 4 {
		coefO[t] = YMM()
		VPSLLW(U8(8), coefE[t], coefO[t])
	}

	i := GP64()
	XORQ(i, i)
	Label("loop")
	CMPQ(i, n)
	JAE(LabelRef("done"))
	sumE, sumO := YMM(), YMM()
	for t := range 4 {
		x, e, o := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: cols[t], Index: i, Scale: 1}, x)
		if t == 0 {
			VPMADDUBSW(coefE[t], x, sumE)
			VPMADDUBSW(coefO[t], x, sumO)
			continue
		}
		VPMADDUBSW(coefE[t], x, e)
		VPMADDUBSW(coefO[t], x, o)
		VPADDW(e, sumE, sumE)
		VPADDW(o, sumO, sumO)
	}
	VPADDW(Mem{Base: accE, Index: i, Scale: 1}, sumE, sumE)
	VMOVDQU(sumE, Mem{Base: accE, Index: i, Scale: 1})
	VPADDW(Mem{Base: accO, Index: i, Scale: 1}, sumO, sumO)
	VMOVDQU(sumO, Mem{Base: accO, Index: i, Scale: 1})
	ADDQ(U8(32), i)
	JMP(LabelRef("loop"))

	Label("done")
	VZEROUPPER()
	RET()

	mac16()
	weightPairs8()
	for _, k := range []struct {
		name string
		sub  bool
		bits int
	}{{"add4AVX2x8", false, 8}, {"sub4AVX2x8", true, 8}, {"add4AVX2x16", false, 16}, {"sub4AVX2x16", true, 16}} {
		addSub(k.name, k.sub, k.bits)
	}
	Generate()
}

// addSub is a sparse query's kernel: acc plus or minus the sum of four
// columns, element-wise mod 2^bits (T_beta's coefficients are +-1, so no
// product: the ring's own lanes, 32 or 16 to a register, and the wrap of
// VPADDB/VPADDW is the reduction).
func addSub(name string, sub bool, bits int) {
	TEXT(name, NOSPLIT, "func(acc *byte, x *[4]*byte, n int)")
	Pragma("noescape")
	op := "adds the sum of the four columns x[t] to acc"
	if sub {
		op = "subtracts the sum of the four columns x[t] from acc"
	}
	Doc(
		fmt.Sprintf("%s %s, element-wise", name, op),
		fmt.Sprintf("mod 2^%d over n bytes (a multiple of 32).", bits),
	)
	acc := Load(Param("acc"), GP64())
	xp := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	var cols [4]GPVirtual
	for t := range 4 {
		cols[t] = GP64()
		MOVQ(Mem{Base: xp, Disp: 8 * t}, cols[t])
	}
	add, subtract := VPADDB, VPSUBB
	if bits == 16 {
		add, subtract = VPADDW, VPSUBW
	}
	i := GP64()
	XORQ(i, i)
	Label(name + "_loop")
	CMPQ(i, n)
	JAE(LabelRef(name + "_done"))
	sum := YMM()
	VMOVDQU(Mem{Base: cols[0], Index: i, Scale: 1}, sum)
	for t := 1; t < 4; t++ {
		add(Mem{Base: cols[t], Index: i, Scale: 1}, sum, sum)
	}
	a := YMM()
	VMOVDQU(Mem{Base: acc, Index: i, Scale: 1}, a)
	if sub {
		subtract(sum, a, a) // a = a - sum
	} else {
		add(sum, a, a)
	}
	VMOVDQU(a, Mem{Base: acc, Index: i, Scale: 1})
	ADDQ(U8(32), i)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// mac16 is the kernel of the 16-bit ring: the elements are the lanes, and
// a 16-bit lane product's low half is the product mod 2^16.
func mac16() {
	TEXT("mac4AVX2x16", NOSPLIT, "func(acc *uint16, x *[4]*byte, c *[4]uint16, n int)")
	Pragma("noescape")
	Doc(
		"mac4AVX2x16 adds c[t] times every 16-bit element of the four columns",
		"x[t] (n bytes, a multiple of 32) into acc (n/2 elements), mod 2^16.",
	)
	acc := Load(Param("acc"), GP64())
	cols, coef, n := columns()
	i := GP64()
	XORQ(i, i)
	Label("loop16")
	CMPQ(i, n)
	JAE(LabelRef("done16"))
	sum := YMM()
	for t := range 4 {
		x := YMM()
		VMOVDQU(Mem{Base: cols[t], Index: i, Scale: 1}, x)
		if t == 0 {
			VPMULLW(coef[t], x, sum)
			continue
		}
		VPMULLW(coef[t], x, x)
		VPADDW(x, sum, sum)
	}
	VPADDW(Mem{Base: acc, Index: i, Scale: 1}, sum, sum)
	VMOVDQU(sum, Mem{Base: acc, Index: i, Scale: 1})
	ADDQ(U8(32), i)
	JMP(LabelRef("loop16"))
	Label("done16")
	VZEROUPPER()
	RET()
}

// weightPairs8 is the k = 8 checks' weighted sum over rows in pairs:
// each 16-bit word of w holds a pair's two weights of one round (the
// even row's in the low byte), and VPMADDUBSW multiplies them by the
// pair's two values (one 16-bit broadcast of v) and adds the products in
// one instruction, 32 per 32 bytes. The weights are below 128 and the
// values, read as signed bytes, within [-128, 127] (equal mod 2^8): a
// pair's sum is within +-32512 and never saturates.
func weightPairs8() {
	TEXT("weightPairs8AVX2", NOSPLIT, "func(acc *uint16, w *byte, v *byte, pairs int)")
	Pragma("noescape")
	Doc(
		"weightPairs8AVX2 adds, for every pair p < pairs, lo(w[p][t]) * v[2p] +",
		"hi(w[p][t]) * v[2p+1] into acc[t] (t < 48, mod 2^16), where w[p] is the",
		"48 16-bit words at w + 96p; every weight byte must be below 128.",
	)
	accP := Load(Param("acc"), GP64())
	w := Load(Param("w"), GP64())
	v := Load(Param("v"), GP64())
	pairs := Load(Param("pairs"), GP64())
	var acc [3]VecVirtual
	for g := range 3 {
		acc[g] = YMM()
		VPXOR(acc[g], acc[g], acc[g])
	}
	Label("wp8loop")
	TESTQ(pairs, pairs)
	JZ(LabelRef("wp8done"))
	c := YMM()
	VPBROADCASTW(Mem{Base: v}, c)
	for g := range 3 {
		x := YMM()
		VMOVDQU(Mem{Base: w, Disp: 32 * g}, x)
		VPMADDUBSW(c, x, x)
		VPADDW(x, acc[g], acc[g])
	}
	ADDQ(U8(96), w)
	ADDQ(U8(2), v)
	DECQ(pairs)
	JMP(LabelRef("wp8loop"))
	Label("wp8done")
	for g := range 3 {
		VPADDW(Mem{Base: accP, Disp: 32 * g}, acc[g], acc[g])
		VMOVDQU(acc[g], Mem{Base: accP, Disp: 32 * g})
	}
	VZEROUPPER()
	RET()
}

// columns loads the parameters x, c and n both kernels take: the four
// column pointers, the four coefficients broadcast to 16-bit lanes, the
// byte count.
func columns() (cols [4]GPVirtual, coef [4]VecVirtual, n Register) {
	xp := Load(Param("x"), GP64())
	cp := Load(Param("c"), GP64())
	n = Load(Param("n"), GP64())
	for t := range 4 {
		cols[t] = GP64()
		MOVQ(Mem{Base: xp, Disp: 8 * t}, cols[t])
		coef[t] = YMM()
		VPBROADCASTW(Mem{Base: cp, Disp: 2 * t}, coef[t])
	}
	return cols, coef, n
}
