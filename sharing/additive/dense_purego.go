//go:build !amd64 || purego

package additive

// denseAVX2 is false where the AVX2 kernel is not built (another
// architecture, or the build tag purego).
const denseAVX2 = false

func avx2Tile[E Elem](res []byte, terms []DenseTerm[E], chunk, off, n int, acc []uint16) {
	panic("additive: the AVX2 kernel is not built")
}

func sparseAVX2Tile[E Elem](res []byte, q *Query, cols [][]uint64, off, n int) {
	panic("additive: the AVX2 kernel is not built")
}

func weightRows16AVX2(acc *[WeightLanes]uint16, w, v []uint16) bool { return false }

func weightPairs8AVX2Run(acc *[WeightLanes]uint16, w []uint16, v []byte, pairs int) bool {
	return false
}

// feistelAVX2 is false where the AVX2 network is not built.
const feistelAVX2 = false

func feistelNet48(tab *uint16, xs *uint32, n int, shift *[2]uint64, mv, last uint32, walk *uint8) {
	panic("additive: the AVX2 Feistel network is not built")
}
