//go:build !purego

package sharing

import (
	"os"

	"golang.org/x/sys/cpu"
)

// countAVX2 is whether Scorer.Add counts with the AVX2 kernel
// (count_amd64.s): on a CPU with AVX2 unless IDFACE_PUREGO is set (the
// build tag purego removes the kernel). Tests run both paths.
var countAVX2 = cpu.X86.HasAVX2 && os.Getenv("IDFACE_PUREGO") == ""

// count4 counts four row words at word offset w of the block into
// planes4 (plane b of word w+j at planes4[4*b+j]).
func count4(ptrs []*uint64, mu, n, beta, w int, planes4 *[4 * maxPlanes]uint64, nhi int) {
	count4AVX2(&ptrs[0], mu, n, beta, w, &planes4[0], nhi)
}
