package template

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestPackingFactorMatchesPaper(t *testing.T) {
	for _, c := range []struct{ beta, ckks, paillier, p int }{
		{63, 8, 341, 64}, {127, 7, 292, 128}, {341, 5, 227, 512},
	} {
		if m := PackingFactor(341, c.beta, 50); m != c.ckks {
			t.Errorf("beta=%d: CKKS m = %d, want %d", c.beta, m, c.ckks)
		}
		if m := PackingFactor(341, c.beta, 2048); m != c.paillier {
			t.Errorf("beta=%d: Paillier m = %d, want %d", c.beta, m, c.paillier)
		}
		if p := 1 << LogBase(341, c.beta); p != c.p {
			t.Errorf("beta=%d: p = %d, want %d", c.beta, p, c.p)
		}
	}
}

// randTernary draws a uniformly random vector of Z^d_a.
func randTernary(r *rand.Rand, d, a int) Ternary {
	t := NewTernary(d)
	for _, j := range r.Perm(d)[:a] {
		if r.IntN(2) == 0 {
			t.Plus[j>>6] |= 1 << uint(j&63)
		} else {
			t.Minus[j>>6] |= 1 << uint(j&63)
		}
	}
	return t
}

// ipDB is IP_DB on plaintext values: the sums the key server decrypts.
func ipDB(y Ternary, plus, minus []uint64) (ctPlus, ctMinus uint64) {
	for j := 0; j < y.Dim; j++ {
		switch y.At(j) {
		case 1:
			ctPlus += plus[j]
			ctMinus += minus[j]
		case -1:
			ctPlus += minus[j]
			ctMinus += plus[j]
		}
	}
	return
}

func TestEncodeDecodeExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ d, alpha, beta, bits int }{
		{512, 341, 63, 50}, {512, 341, 127, 50}, {512, 341, 341, 50},
		{512, 512, 512, 60}, {512, 63, 63, 64}, {512, 127, 127, 64},
		{128, 85, 85, 59}, {192, 128, 40, 64}, {256, 170, 170, 40},
	} {
		t.Run(fmt.Sprintf("d=%d/alpha=%d/beta=%d/bits=%d", c.d, c.alpha, c.beta, c.bits), func(t *testing.T) {
			e, err := NewEncoder(c.alpha, c.beta, c.bits)
			if err != nil {
				t.Fatal(err)
			}
			plus, minus := make([]uint64, c.d), make([]uint64, c.d)
			scores := make([]int, e.M)
			for trial := 0; trial < 200; trial++ {
				y := randTernary(r, c.d, c.beta)
				rows := make([]Ternary, 1+r.IntN(e.M))
				for i := range rows {
					switch r.IntN(4) {
					case 0: // extreme +min(alpha,beta): agree with y on its support
						rows[i] = extreme(r, y, c.alpha, 1)
					case 1: // extreme -min(alpha,beta)
						rows[i] = extreme(r, y, c.alpha, -1)
					default:
						rows[i] = randTernary(r, c.d, c.alpha)
					}
				}
				if err := e.Encode(rows, plus, minus); err != nil {
					t.Fatal(err)
				}
				cp, cm := ipDB(y, plus, minus)
				if cp>>uint(e.ValueBits()) != 0 || cm>>uint(e.ValueBits()) != 0 {
					t.Fatal("inner-product sum exceeds the usable slot bits")
				}
				e.Decode(cp, cm, scores)
				for i, row := range rows {
					if want := row.Dot(y); scores[i] != want {
						t.Fatalf("trial %d row %d: decoded %d, want %d", trial, i, scores[i], want)
					}
				}
				for i := len(rows); i < e.M; i++ {
					if scores[i] != 0 {
						t.Fatalf("empty digit %d decoded to %d", i, scores[i])
					}
				}
			}
		})
	}
}

// extreme returns x in Z^d_alpha with <x, y> = sign*min(alpha, beta). (A
// copy of harness/testutil.Extreme: testutil imports this package, so this
// package's own tests cannot import it.)
func extreme(r *rand.Rand, y Ternary, alpha int, sign int8) Ternary {
	x := NewTernary(y.Dim)
	n := 0
	var free []int
	for j := 0; j < y.Dim; j++ {
		v := y.At(j) * sign
		switch {
		case v != 0 && n < alpha:
			n++
			if v > 0 {
				x.Plus[j>>6] |= 1 << uint(j&63)
			} else {
				x.Minus[j>>6] |= 1 << uint(j&63)
			}
		case v == 0:
			free = append(free, j)
		}
	}
	r.Shuffle(len(free), func(i, k int) { free[i], free[k] = free[k], free[i] })
	for _, j := range free[:alpha-n] {
		x.Plus[j>>6] |= 1 << uint(j&63)
	}
	return x
}

func TestEncoderErrors(t *testing.T) {
	if _, err := NewEncoder(341, 341, 8); err == nil {
		t.Error("8 bits cannot hold a 9-bit digit")
	}
	if _, err := NewEncoder(341, 63, 65); err == nil {
		t.Error("65 bits do not fit uint64")
	}
	e, _ := NewEncoder(341, 63, 50)
	rows := make([]Ternary, e.M+1)
	if err := e.Encode(rows, make([]uint64, 512), make([]uint64, 512)); err == nil {
		t.Error("too many rows accepted")
	}
}

func ExampleEncoder() {
	e, _ := NewEncoder(341, 63, 50)
	fmt.Println(e.P, e.M)
	// Output: 64 8
}
