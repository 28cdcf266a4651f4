//go:build !purego

package additive

import (
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// denseAVX2 is whether ScoreDense uses the AVX2 kernel for k = 8: on a
// CPU with AVX2 unless IDFACE_PUREGO is set (the build tag purego removes
// the kernel altogether). Tests run both paths.
var denseAVX2 = cpu.X86.HasAVX2 && os.Getenv("IDFACE_PUREGO") == ""

// avx2Tile scores one tile of n words (a multiple of 4) at word offset
// off of chunk into res (its 8n bytes) with the AVX2 kernel of the ring,
// four columns a call; acc holds at least 4n 16-bit lanes.
func avx2Tile[E Elem](res []byte, terms []DenseTerm[E], chunk, off, n int, acc []uint16) {
	nb := 8 * n
	if elemBits[E]() == 16 {
		a := acc[:nb/2]
		clear(a)
		columns4(terms, chunk, off, n, func(x *[4]*byte, c *[4]uint16) { mac4AVX2x16(&a[0], x, c, nb) })
		copy(res, unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), nb))
		return
	}
	accE, accO := acc[:nb/2], acc[nb/2:nb]
	clear(accE)
	clear(accO)
	columns4(terms, chunk, off, n, func(x *[4]*byte, c *[4]uint16) { mac4AVX2(&accE[0], &accO[0], x, c, nb) })
	// Lane l of group g holds row 32g+2l (accE) or 32g+2l+1 (accO).
	for g := 0; g < nb/32; g++ {
		e, o, r := accE[16*g:16*g+16], accO[16*g:16*g+16], res[32*g:32*g+32]
		for l := range 16 {
			r[2*l], r[2*l+1] = uint8(e[l]), uint8(o[l])
		}
	}
}

// columns4 hands mac every nonzero coefficient's column run of the tile,
// four at a time (the last call padded with zero coefficients on a column
// already read).
func columns4[E Elem](terms []DenseTerm[E], chunk, off, n int, mac func(x *[4]*byte, c *[4]uint16)) {
	var x [4]*byte
	var c [4]uint16
	k := 0
	for _, t := range terms {
		cols := t.S.chunks[chunk]
		for j, cj := range t.Y {
			if cj == 0 {
				continue
			}
			x[k], c[k] = &wordBytes(cols[j][off : off+n])[0], uint16(cj)
			if k++; k == 4 {
				mac(&x, &c)
				k = 0
			}
		}
	}
	if k > 0 {
		for t := k; t < 4; t++ {
			x[t], c[t] = x[0], 0
		}
		mac(&x, &c)
	}
}

// zeroRun pads a sparse tile's last call to four columns: a column of
// zeros as long as a tile.
var zeroRun [8 * scoreTile]byte

// sparseAVX2Tile scores one tile of n words (a multiple of 4) at word
// offset off of a chunk's columns for a query whose coefficients are all
// +-1 (T_beta, one group): res (the tile's 8n bytes, rows in memory order)
// is the sum of the positive columns minus the negative ones, mod 2^k,
// with the ring's own lanes (add4AVX2x8/x16), four columns a call.
func sparseAVX2Tile[E Elem](res []byte, q *Query, cols [][]uint64, off, n int) {
	clear(res)
	nb := 8 * n
	wide := elemBits[E]() == 16
	g := q.groups[0]
	i := 0
	for k, cnt := range [2]int{g.npos, g.nneg} {
		for ; cnt > 0; cnt -= 4 {
			var x [4]*byte
			for t := range 4 {
				x[t] = &zeroRun[0]
				if t < cnt {
					x[t] = &wordBytes(cols[q.cols[i+t]][off : off+n])[0]
				}
			}
			// Called directly, not through a func value: x then stays on
			// the stack (a call through a value would allocate it, once
			// per four columns of every tile).
			switch {
			case wide && k == 0:
				add4AVX2x16(&res[0], &x, nb)
			case wide:
				sub4AVX2x16(&res[0], &x, nb)
			case k == 0:
				add4AVX2x8(&res[0], &x, nb)
			default:
				sub4AVX2x8(&res[0], &x, nb)
			}
			i += min(cnt, 4)
		}
	}
}

// weightRows16AVX2 adds v[r] times the 48 elements at w[48r:] into acc
// for every row r of v (len(w) >= 48 len(v)), mod 2^16, four rows a call
// of the dense kernel; it reports false where the kernel does not run.
func weightRows16AVX2(acc *[WeightLanes]uint16, w, v []uint16) bool {
	if !denseAVX2 {
		return false
	}
	n := len(v) &^ 3
	for r := 0; r < n; r += 4 {
		x := [4]*byte{
			(*byte)(unsafe.Pointer(&w[r*WeightLanes])), (*byte)(unsafe.Pointer(&w[(r+1)*WeightLanes])),
			(*byte)(unsafe.Pointer(&w[(r+2)*WeightLanes])), (*byte)(unsafe.Pointer(&w[(r+3)*WeightLanes])),
		}
		c := [4]uint16{v[r], v[r+1], v[r+2], v[r+3]}
		mac4AVX2x16(&acc[0], &x, &c, 2*WeightLanes)
	}
	weightRows16(acc, w[n*WeightLanes:], v[n:])
	return true
}

// weightPairs8AVX2Run runs weightPairs8AVX2 where AVX2 runs and reports
// whether it did.
func weightPairs8AVX2Run(acc *[WeightLanes]uint16, w []uint16, v []byte, pairs int) bool {
	if !denseAVX2 || pairs == 0 {
		return false
	}
	weightPairs8AVX2(&acc[0], (*byte)(unsafe.Pointer(&w[0])), &v[0], pairs)
	return true
}
