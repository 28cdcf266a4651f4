package template

import (
	"math/rand/v2"
	"testing"

	"github.com/bits-and-blooms/bitset"
)

func TestSets(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 200)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	z, err := Transform(x, 133)
	if err != nil {
		t.Fatal(err)
	}
	p, m := z.Sets()
	if int(p.Count()+m.Count()) != 133 || p.Len() != 200 {
		t.Fatalf("%d + %d set of %d", p.Count(), m.Count(), p.Len())
	}
	for j := range 200 {
		if p.Test(uint(j)) != (z.At(j) == 1) || m.Test(uint(j)) != (z.At(j) == -1) {
			t.Fatalf("position %d", j)
		}
	}
	back, err := FromSets(200, p, m)
	if err != nil || back.Dot(z) != 133 {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := FromSets(200, bitset.New(0).Set(3), bitset.New(0).Set(3)); err == nil {
		t.Fatal("overlapping sets accepted")
	}
	if _, err := FromSets(200, bitset.New(0).Set(250), bitset.New(0)); err == nil {
		t.Fatal("a position past d accepted")
	}
}
