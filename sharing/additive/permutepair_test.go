package additive

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPermuteMaskPair: the pair variant equals two PermuteMask calls, for
// both rings, every pair of holders of mu = 3, with and without deleted
// rows, on the exact table and the Feistel, and 1 or 3 workers.
func TestPermuteMaskPair(t *testing.T) {
	t.Run("k=8", func(t *testing.T) { testPermutePair[uint8](t) })
	t.Run("k=16", func(t *testing.T) { testPermutePair[uint16](t) })
}

func testPermutePair[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct{ n, workers int }{{0, 1}, {1, 1}, {77, 1}, {5000, 3}, {70001, 3}, {140000, 1}} {
		srcA, srcB := make([]E, c.n), make([]E, c.n)
		for i := range srcA {
			srcA[i], srcB[i] = E(r.Uint32()), E(r.Uint32())
		}
		live := make([]uint64, (c.n+63)/64)
		for i := range live {
			live[i] = r.Uint64()
		}
		var seed Seed
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		for _, lv := range [][]uint64{nil, live} {
			for _, h := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
				t.Run(fmt.Sprintf("n=%d/holders=%v/live=%v/workers=%d", c.n, h, lv != nil, c.workers), func(t *testing.T) {
					p := &Permuter{Workers: c.workers}
					wantA, wantB := make([]E, c.n), make([]E, c.n)
					if err := PermuteMask(p, wantA, srcA, lv, &seed, h[0], 3); err != nil {
						t.Fatal(err)
					}
					if err := PermuteMask(p, wantB, srcB, lv, &seed, h[1], 3); err != nil {
						t.Fatal(err)
					}
					gotA, gotB := make([]E, c.n), make([]E, c.n)
					q := &Permuter{Workers: c.workers}
					if err := PermuteMaskPair(q, gotA, gotB, srcA, srcB, lv, &seed, h[0], h[1], 3); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(gotA, wantA) || !slices.Equal(gotB, wantB) {
						t.Fatal("the pair differs from two PermuteMask calls")
					}
				})
			}
		}
	}
	if err := PermuteMaskPair(&Permuter{}, make([]E, 2), make([]E, 1), make([]E, 2), make([]E, 2), nil, &Seed{}, 0, 1, 3); err == nil {
		t.Fatal("vectors of different lengths accepted")
	}
	same := make([]E, 2)
	if err := PermuteMaskPair(&Permuter{}, same, make([]E, 2), make([]E, 2), same, nil, &Seed{}, 0, 1, 3); err == nil {
		t.Fatal("a destination that is a source accepted")
	}
}
