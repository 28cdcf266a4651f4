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

// TestWeightPairs8: the kernel's weighted sum of row pairs equals the
// plain loop's and, mod 2^8, the row-by-row sum of the same weights and
// values, the extremes included (weights 127, values 0x80 and 0xff).
func TestWeightPairs8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 2, 4, 6, 64, 1002} {
		for _, extreme := range []bool{false, true} {
			w, v := make([]uint16, n/2*WeightLanes), make([]byte, n)
			for i := range w {
				w[i] = uint16(r.Uint32()) & 0x7f7f
				if extreme {
					w[i] = 0x7f7f
				}
			}
			for i := range v {
				v[i] = byte(r.Uint32())
				if extreme {
					v[i] = []byte{0x80, 0xff}[i%2]
				}
			}
			var got, want [WeightLanes]uint16
			got[5], want[5] = 9, 9
			WeightPairs8(&got, w, v)
			weightPairs8(&want, w, v, n/2)
			if got != want {
				t.Fatalf("%d rows (extreme %v): %v, want %v", n, extreme, got, want)
			}
			var plain [WeightLanes]byte
			plain[5] = 9
			for row, x := range v {
				for k := range plain {
					plain[k] += byte(w[row/2*WeightLanes+k]>>(8*(row%2))) * x
				}
			}
			for k := range plain {
				if byte(got[k]) != plain[k] {
					t.Fatalf("%d rows (extreme %v): round %d is %d mod 2^8, want %d", n, extreme, k, byte(got[k]), plain[k])
				}
			}
		}
	}
}

func BenchmarkWeightPairs8(b *testing.B) {
	const n = 1 << 16
	w, v := make([]uint16, n/2*WeightLanes), make([]byte, n)
	for i := range v {
		v[i] = byte(i*2654435761 + 1)
	}
	var acc [WeightLanes]uint16
	b.SetBytes(int64(len(w) * 2))
	for b.Loop() {
		WeightPairs8(&acc, w, v)
	}
}
