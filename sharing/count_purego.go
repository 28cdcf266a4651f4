//go:build !amd64 || purego

package sharing

// countAVX2 is false where the AVX2 kernel is not built (another
// architecture, or the build tag purego).
const countAVX2 = false

func count4(ptrs []*uint64, mu, n, beta, w int, planes4 *[4 * maxPlanes]uint64, nhi int) {
	panic("sharing: the AVX2 kernel is not built")
}
