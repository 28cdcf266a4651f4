package additive

import (
	"math/rand/v2"
	"testing"
)

// TestWeightRows16: the kernel's weighted sum of rows equals the plain
// loop's, for row counts around its groups of four.
func TestWeightRows16(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 3, 4, 5, 8, 63, 64, 1001} {
		w, v := make([]uint16, n*WeightLanes), make([]uint16, n)
		for i := range w {
			w[i] = uint16(r.Uint32())
		}
		for i := range v {
			v[i] = uint16(r.Uint32())
		}
		var got, want [WeightLanes]uint16
		got[3], want[3] = 7, 7
		WeightRows16(&got, w, v)
		weightRows16(&want, w, v)
		if got != want {
			t.Fatalf("%d rows: %v, want %v", n, got, want)
		}
	}
}

func BenchmarkWeightRows16(b *testing.B) {
	const n = 1 << 16
	w, v := make([]uint16, n*WeightLanes), make([]uint16, n)
	for i := range v {
		v[i] = uint16(i*2654435761 + 1)
	}
	var acc [WeightLanes]uint16
	b.SetBytes(int64(len(w) * 2))
	for b.Loop() {
		WeightRows16(&acc, w, v)
	}
}
