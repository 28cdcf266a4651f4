//go:build !purego

package additive

import (
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// feistelAVX2 is whether feistel.steps runs the network 48 points at a
// time with AVX2 gathers (feistel_amd64.s): on a CPU with AVX2 unless
// IDFACE_PUREGO is set (the build tag purego removes the kernel). About
// 3x the scalar network's points a second on the AMD EPYC host of
// BenchmarkFeistelNet; the permutation is the same bit for bit.
var feistelAVX2 = cpu.X86.HasAVX2 && os.Getenv("IDFACE_PUREGO") == ""

// The kernel runs ten rounds, on tables STRIDE bytes apart.
var (
	_ [feistelRounds - 10]struct{}
	_ [10 - feistelRounds]struct{}
	_ [unsafe.Sizeof(feistel{}.tab[0]) - 131136]struct{}
	_ [131136 - unsafe.Sizeof(feistel{}.tab[0])]struct{}
)

// feistelNet48 sets xs[j] = E(xs[j]) for j < n (a multiple of 48): one
// step of the network of tables tab (feistel.tab[0][0]), halves split at
// shift[0] bits, mv = 2^shift[0] - 1; bit j%8 of walk[j/8] is set where
// the new xs[j] > last (a walker).
//
//go:noescape
func feistelNet48(tab *uint16, xs *uint32, n int, shift *[2]uint64, mv, last uint32, walk *uint8)
