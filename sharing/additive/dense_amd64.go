//go:build !purego

package additive

import (
	"os"

	"golang.org/x/sys/cpu"
)

// denseAVX2 is whether ScoreDense uses the AVX2 kernel for k = 8: on a
// CPU with AVX2 unless IDFACE_PUREGO is set (the build tag purego removes
// the kernel altogether). Tests run both paths.
var denseAVX2 = cpu.X86.HasAVX2 && os.Getenv("IDFACE_PUREGO") == ""

// avx2Tile scores one tile of n words (8n rows) at word offset off of
// chunk into res (8n bytes) with the AVX2 kernel, four columns a call.
// acc holds 8n 16-bit lanes: even rows, then odd.
func avx2Tile(res []uint8, terms []DenseTerm[uint8], chunk, off, n int, acc []uint16) {
	nb := 8 * n
	accE, accO := acc[:nb/2], acc[nb/2:nb]
	clear(accE)
	clear(accO)
	var x [4]*byte
	var c [4]uint16
	k := 0
	flush := func() {
		for ; k < 4; k++ { // pad with a zero coefficient on a column already read
			x[k], c[k] = x[0], 0
		}
		mac4AVX2(&accE[0], &accO[0], &x, &c, nb)
		k = 0
	}
	for _, t := range terms {
		cols := t.S.chunks[chunk]
		for j, cj := range t.Y {
			if cj == 0 {
				continue
			}
			x[k], c[k] = &wordBytes(cols[j][off : off+n])[0], uint16(cj)
			if k++; k == 4 {
				flush()
			}
		}
	}
	if k > 0 {
		flush()
	}
	// Lane l of group g holds row 32g+2l (accE) or 32g+2l+1 (accO).
	for g := 0; g < nb/32; g++ {
		e, o, r := accE[16*g:16*g+16], accO[16*g:16*g+16], res[32*g:32*g+32]
		for l := range 16 {
			r[2*l], r[2*l+1] = uint8(e[l]), uint8(o[l])
		}
	}
}
