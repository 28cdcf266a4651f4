//go:build !purego

#include "textflag.h"

// The Feistel network of permute.go (feistel.steps, without the walking)
// on 48 points at a time: six vectors of eight 32-bit lanes, each point's
// halves a (high) and b (low) in a pair of registers, every round one
// VPGATHERDD per vector from the round's uint16 table. A gather reads 32
// bits at byte offset 2j, entry j and j+1 (the tables' padding covers
// j = 2^16), and the mask keeps entry j. Six independent gathers are in
// flight per round; each gather's destination is zeroed first, since a
// gather merges into it and would otherwise chain every gather on the
// last. Written by hand (avo's generator holds the other kernels); the
// test TestFeistelKernelsAgree checks it against feistel.steps.

// STRIDE is the byte distance between two round tables: len(tab[r]) * 2
// for tab *[10][1<<16 + 32]uint16.
#define STRIDE 131136

// GATHER(off, IN, OUT): OUT ^= table at byte offset off, entry IN, per lane.
#define GATHER(off, IN, OUT) \
	VPCMPEQD   Y14, Y14, Y14         \
	VPXOR      Y15, Y15, Y15         \
	VPGATHERDD Y14, off(SI)(IN*2), Y15 \
	VPAND      Y12, Y15, Y15         \
	VPXOR      Y15, OUT, OUT

// EVEN(off): a ^= F(b) for the six vectors; ODD(off): b ^= F(a).
#define EVEN(off) \
	GATHER(off, Y1, Y0)  \
	GATHER(off, Y3, Y2)  \
	GATHER(off, Y5, Y4)  \
	GATHER(off, Y7, Y6)  \
	GATHER(off, Y9, Y8)  \
	GATHER(off, Y11, Y10)

#define ODD(off) \
	GATHER(off, Y0, Y1)  \
	GATHER(off, Y2, Y3)  \
	GATHER(off, Y4, Y5)  \
	GATHER(off, Y6, Y7)  \
	GATHER(off, Y8, Y9)  \
	GATHER(off, Y10, Y11)

// SPLIT(at, A, B): load eight points at byte offset at, a = x >> v, b = x & mv.
#define SPLIT(at, A, B) \
	VMOVDQU at(DI)(BX*4), A \
	VPAND   Y13, A, B       \
	VPSRLD  (R8), A, A

// JOIN(at, A, B, w): store x = a << v | b at byte offset at, and the
// bits of its lanes with x > last (the walkers) at byte w of walk.
#define JOIN(at, A, B, w) \
	VPSLLD    (R8), A, A         \
	VPOR      B, A, A            \
	VMOVDQU   A, at(DI)(BX*4)    \
	VPCMPGTD  Y14, A, Y15        \
	VMOVMSKPS Y15, AX            \
	MOVB      AX, w(R9)

// func feistelNet48(tab *uint16, xs *uint32, n int, shift *[2]uint64, mv uint32, last uint32, walk *uint8)
// Requires: AVX2. n is a multiple of 48; shift[0] is v, the low half's
// width; walk gets n/8 bytes. Points are below 2^31, so the signed
// compare is the unsigned one.
TEXT ·feistelNet48(SB), NOSPLIT, $0-48
	MOVQ         tab+0(FP), SI
	MOVQ         xs+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         shift+24(FP), R8
	MOVL         last+36(FP), DX
	MOVQ         walk+40(FP), R9
	MOVL         mv+32(FP), AX
	MOVD         AX, X13
	VPBROADCASTD X13, Y13
	VPCMPEQD     Y12, Y12, Y12
	VPSRLD       $16, Y12, Y12
	XORQ         BX, BX

loop:
	CMPQ BX, CX
	JAE  done
	SPLIT(0, Y0, Y1)
	SPLIT(32, Y2, Y3)
	SPLIT(64, Y4, Y5)
	SPLIT(96, Y6, Y7)
	SPLIT(128, Y8, Y9)
	SPLIT(160, Y10, Y11)
	EVEN(0)
	ODD(STRIDE)
	EVEN(2*STRIDE)
	ODD(3*STRIDE)
	EVEN(4*STRIDE)
	ODD(5*STRIDE)
	EVEN(6*STRIDE)
	ODD(7*STRIDE)
	EVEN(8*STRIDE)
	ODD(9*STRIDE)
	MOVD         DX, X14
	VPBROADCASTD X14, Y14
	JOIN(0, Y0, Y1, 0)
	JOIN(32, Y2, Y3, 1)
	JOIN(64, Y4, Y5, 2)
	JOIN(96, Y6, Y7, 3)
	JOIN(128, Y8, Y9, 4)
	JOIN(160, Y10, Y11, 5)
	ADDQ $48, BX
	ADDQ $6, R9
	JMP  loop

done:
	VZEROUPPER
	RET
