//go:build !purego

package sharing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCountKernelsAgree: the AVX2 count and the pure-Go one give the same
// top k and cut, block after block, for any number of parties, beta up to
// the largest (14 counter planes), any number of words and live patterns.
func TestCountKernelsAgree(t *testing.T) {
	if !countAVX2 {
		t.Skip("no AVX2 kernel on this CPU (or IDFACE_PUREGO): TestScoreMatchesNaive checks the pure-Go count")
	}
	defer func(v bool) { countAVX2 = v }(countAVX2)
	r := rand.New(rand.NewPCG(21, 22))
	for _, mu := range []int{1, 2, 3, 64} {
		for _, beta := range []int{1, 7, 8, 9, 63, 341, 4096} {
			if mu == 64 && beta > 341 {
				continue // 64 parties of 8192 columns: slow, and nothing new
			}
			for _, nw := range []int{1, 4, 5, 13} {
				t.Run(fmt.Sprintf("mu=%d/beta=%d/nw=%d", mu, beta, nw), func(t *testing.T) {
					cols := make([][][]uint64, mu)
					for p := range cols {
						cols[p] = make([][]uint64, 2*beta)
						for i := range cols[p] {
							cols[p][i] = make([]uint64, nw)
							for w := range nw {
								cols[p][i][w] = r.Uint64()
								if r.IntN(4) == 0 { // runs of high and low counts
									cols[p][i][w] = 0
								}
							}
						}
					}
					live := make([]uint64, nw)
					for w := range live {
						live[w] = []uint64{^uint64(0), 0, r.Uint64(), 1 << 63}[r.IntN(4)]
					}
					k, floor := 1+r.IntN(20), -beta+r.IntN(beta+1)
					var got [2][]Match
					var cut [2]int
					for v, avx := range []bool{true, false} {
						countAVX2 = avx
						sc, err := NewScorer(beta, k, floor)
						if err != nil {
							t.Fatal(err)
						}
						for call := range 2 { // state carries over blocks
							if err := sc.Add(cols, 1000*call, live); err != nil {
								t.Fatal(err)
							}
						}
						got[v], cut[v] = sc.Result(), sc.cut
					}
					if !slices.Equal(got[0], got[1]) || cut[0] != cut[1] {
						t.Fatalf("AVX2 %v (cut %d), pure Go %v (cut %d)", got[0], cut[0], got[1], cut[1])
					}
				})
			}
		}
	}
}
