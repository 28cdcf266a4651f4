//go:build !purego

package additive

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// scalarSteps is feistel.steps without the AVX2 kernel.
func scalarSteps(t testing.TB, f *feistel, xs, idx []uint32) []uint32 {
	t.Helper()
	was := feistelAVX2
	feistelAVX2 = false
	defer func() { feistelAVX2 = was }()
	return f.steps(xs, idx)
}

// TestFeistelKernelsAgree: the AVX2 network (feistel_amd64.s) gives every
// point of the domain the image the scalar network gives it, and the same
// walkers, on domains from 2^17 to 2^31 (every split of the halves, and
// the widest tables, whose last entry the gathers read beside the
// padding), for lengths that leave 0 to 47 points to the scalar loop.
func TestFeistelKernelsAgree(t *testing.T) {
	if !feistelAVX2 {
		t.Skip("no AVX2 Feistel network in this build or on this CPU: TestFeistel checks the scalar one")
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1<<16 + 1, 100_003, 1 << 20, 1_000_003, 4_000_037, 1<<25 + 3, 1<<30 + 7, 1<<31 - 1} {
		seed := testSeed(uint64(n))
		ks, _ := newKeystream(&seed)
		var f feistel
		f.shape(n)
		f.tables(ks, nil)
		for _, c := range []int{48, 49, 95, 2048, 2048 + 47} {
			xs := make([]uint32, c)
			for i := range xs {
				switch i % 3 {
				case 0:
					xs[i] = r.Uint32N(1 << f.m) // walkers' points too
				case 1:
					xs[i] = uint32(1<<f.m - 1 - i) // the top of the domain: the widest entries
				default:
					xs[i] = uint32(i)
				}
			}
			want := append([]uint32(nil), xs...)
			wantIdx := scalarSteps(t, &f, want, make([]uint32, c))
			gotIdx := f.steps(xs, make([]uint32, c))
			for i := range xs {
				if xs[i] != want[i] {
					t.Fatalf("n=%d c=%d: point %d: AVX2 %d, scalar %d", n, c, i, xs[i], want[i])
				}
			}
			if fmt.Sprint(gotIdx) != fmt.Sprint(wantIdx) {
				t.Fatalf("n=%d c=%d: walkers %v, scalar %v", n, c, gotIdx, wantIdx)
			}
		}
	}
}

// BenchmarkFeistelNet is one step of the network over 10^6 points, a
// chunk (permChunk) at a time as the workers run it: scalar and AVX2.
func BenchmarkFeistelNet(b *testing.B) {
	const n = 1_000_000
	seed := testSeed(1)
	ks, _ := newKeystream(&seed)
	var f feistel
	f.shape(n)
	f.tables(ks, nil)
	xs, idx := make([]uint32, permChunk), make([]uint32, permChunk)
	for _, avx := range []bool{false, true} {
		b.Run(fmt.Sprintf("avx2=%v", avx), func(b *testing.B) {
			if avx && !feistelAVX2 {
				b.Skip("no AVX2")
			}
			was := feistelAVX2
			feistelAVX2 = avx
			defer func() { feistelAVX2 = was }()
			b.ReportAllocs()
			for b.Loop() {
				for q := 0; q < n; q += permChunk {
					for j := range xs {
						xs[j] = uint32(q + j)
					}
					f.steps(xs, idx)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}
