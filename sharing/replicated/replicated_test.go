package replicated

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/idface/idface/sharing/additive"
)

func randomV(r *mrand.Rand, d int) []int8 {
	v := make([]int8, d)
	for j := range v {
		v[j] = int8(r.IntN(255) - 127)
	}
	return v
}

func split[E additive.Elem](t *testing.T, v []int8) [Holders][]E {
	t.Helper()
	var s [Holders][]E
	for j := range s {
		s[j] = make([]E, len(v))
	}
	if err := Split(&s, v, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIndices(t *testing.T) {
	for i := range Holders {
		for _, j := range Held(i) {
			h := HoldersOf(j)
			if h[0] != i && h[1] != i {
				t.Fatalf("holder %d keeps share %d, but HoldersOf(%d) = %v", i, j, j, h)
			}
		}
		if h := Held(i); h[0] != i || h[1] != (i+1)%3 {
			t.Fatalf("Held(%d) = %v", i, h)
		}
	}
}

// TestReconstructAnyTwo: every ordered pair of distinct holders gives v
// back, for both rings and random v; Rebuild gives back the lost pair.
func TestReconstructAnyTwo(t *testing.T) {
	t.Run("k=8", func(t *testing.T) { testReconstruct[uint8](t) })
	t.Run("k=16", func(t *testing.T) { testReconstruct[uint16](t) })
}

func testReconstruct[E additive.Elem](t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	for trial := range 50 {
		d := 1 + r.IntN(600)
		v := randomV(r, d)
		s := split[E](t, v)
		for a := range Holders {
			for b := range Holders {
				if a == b {
					continue
				}
				got := make([]int, d)
				if err := Reconstruct(got, a, Pair(&s, a), b, Pair(&s, b)); err != nil {
					t.Fatal(err)
				}
				for j := range v {
					if got[j] != int(v[j]) {
						t.Fatalf("trial %d holders %d,%d: v[%d] = %d, want %d", trial, a, b, j, got[j], v[j])
					}
				}
			}
			prev, next := Pair(&s, (a+2)%3), Pair(&s, (a+1)%3)
			re := Rebuild(a, prev, next)
			own := Pair(&s, a)
			if !equal(re[0], own[0]) || !equal(re[1], own[1]) {
				t.Fatalf("Rebuild(%d) differs from the pair", a)
			}
		}
	}
}

// TestReconstructDetectsDisagreement: a pair whose overlapping share was
// altered in one entry is refused, never combined.
func TestReconstructDetectsDisagreement(t *testing.T) {
	r := mrand.New(mrand.NewPCG(3, 4))
	v := randomV(r, 64)
	s := split[uint8](t, v)
	for a := range Holders {
		for b := range Holders {
			if a == b {
				continue
			}
			pb := Pair(&s, b)
			// The share both hold: a's own if b is a-1, else a's next.
			common := Held(a)[1]
			if common != Held(b)[0] {
				common = Held(a)[0]
			}
			k := 0
			if Held(b)[1] == common {
				k = 1
			}
			bad := append([]uint8(nil), pb[k]...)
			bad[r.IntN(len(bad))] ^= 1 << r.IntN(8)
			pb[k] = bad
			if _, err := Shares(a, Pair(&s, a), b, pb); err == nil {
				t.Fatalf("holders %d,%d: an altered share %d was combined", a, b, common)
			}
		}
	}
	if _, err := Shares(1, Pair(&s, 1), 1, Pair(&s, 1)); err == nil {
		t.Fatal("one holder's pair twice was accepted")
	}
}

// TestPairUniform: one holder's pair of a fixed template (all zeros, all
// 127) is uniform bytes: chi-square over 256 cells, 255 degrees of
// freedom, bound 340 (p ~ 3e-4).
func TestPairUniform(t *testing.T) {
	for _, fill := range []int8{0, 127, -128} {
		v := make([]int8, 512)
		for j := range v {
			v[j] = fill
		}
		for i := range Holders {
			var count [256]int
			const trials = 200
			for range trials {
				s := split[uint8](t, v)
				for _, sh := range Pair(&s, i) {
					for _, x := range sh {
						count[x]++
					}
				}
			}
			n := float64(trials * 2 * len(v))
			chi := 0.0
			for _, c := range count {
				e := n / 256
				chi += (float64(c) - e) * (float64(c) - e) / e
			}
			if chi > 340 {
				t.Fatalf("v = %d, holder %d: chi-square %.1f", fill, i, chi)
			}
		}
	}
}

func TestShareHashBindsEveryField(t *testing.T) {
	share := []byte{1, 2, 3, 4}
	base := ShareHash([16]byte{1}, 2, 3, 1, share)
	for name, h := range map[string][32]byte{
		"cluster": ShareHash([16]byte{2}, 2, 3, 1, share),
		"origin":  ShareHash([16]byte{1}, 1, 3, 1, share),
		"seq":     ShareHash([16]byte{1}, 2, 4, 1, share),
		"index":   ShareHash([16]byte{1}, 2, 3, 2, share),
		"share":   ShareHash([16]byte{1}, 2, 3, 1, []byte{1, 2, 3, 5}),
	} {
		if h == base {
			t.Fatalf("the share hash ignores the %s", name)
		}
	}
	if ShareHash([16]byte{1}, 2, 3, 1, share) != base {
		t.Fatal("the share hash is not deterministic")
	}
}

// TestZeroShare: r_0 + r_1 + r_2 = 0 for every row and epoch, each r_j is
// deterministic, depends on the epoch and the row, and a reshare keeps v.
func TestZeroShare(t *testing.T) {
	t.Run("k=8", func(t *testing.T) { testZero[uint8](t) })
	t.Run("k=16", func(t *testing.T) { testZero[uint16](t) })
}

func testZero[E additive.Elem](t *testing.T) {
	var key ReshareKey
	rand.Read(key[:])
	const d = 300
	zero := func(epoch uint32, row uint64) [Holders][]E {
		var r [Holders][]E
		for j := range r {
			r[j] = make([]E, d)
			if err := ZeroShare(r[j], j, &key, epoch, row); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	r := mrand.New(mrand.NewPCG(5, 6))
	v := randomV(r, d)
	for _, c := range []struct {
		epoch uint32
		row   uint64
	}{{0, 0}, {1, 0}, {0, 1}, {7, 1 << 40}} {
		t.Run(fmt.Sprintf("epoch=%d/row=%d", c.epoch, c.row), func(t *testing.T) {
			z := zero(c.epoch, c.row)
			for i := range d {
				if z[0][i]+z[1][i]+z[2][i] != 0 {
					t.Fatalf("r_0+r_1+r_2 = %d at %d", z[0][i]+z[1][i]+z[2][i], i)
				}
			}
			again := zero(c.epoch, c.row)
			for j := range Holders {
				if !equal(z[j], again[j]) {
					t.Fatalf("r_%d is not deterministic", j)
				}
			}
			for _, other := range []struct {
				epoch uint32
				row   uint64
			}{{c.epoch + 1, c.row}, {c.epoch, c.row + 1}} {
				o := zero(other.epoch, other.row)
				if equal(o[0], z[0]) || equal(o[1], z[1]) {
					t.Fatalf("epoch %d row %d has the zero-sharing of epoch %d row %d", other.epoch, other.row, c.epoch, c.row)
				}
			}
			s := split[E](t, v)
			for j := range s {
				for i := range s[j] {
					s[j][i] += z[j][i]
				}
			}
			got := make([]int, d)
			if err := Reconstruct(got, 2, Pair(&s, 2), 0, Pair(&s, 0)); err != nil {
				t.Fatal(err)
			}
			for i := range v {
				if got[i] != int(v[i]) {
					t.Fatalf("reshared v[%d] = %d, want %d", i, got[i], v[i])
				}
			}
		})
	}
	if err := ZeroShare(make([]E, 4), 3, &key, 0, 0); err == nil {
		t.Fatal("share index 3 accepted")
	}
}

// TestProductShares: the three holders' product shares, each from its
// pairs of x's and y's shares only, sum to <x, y> in both rings.
func TestProductShares(t *testing.T) {
	testProductShares[uint8](t)
	testProductShares[uint16](t)
}

func testProductShares[E additive.Elem](t *testing.T) {
	r := mrand.New(mrand.NewPCG(4, 5))
	for range 50 {
		d := 1 + r.IntN(300)
		x, y := make([]int8, d), make([]int8, d)
		want := 0
		for j := range d {
			x[j], y[j] = int8(r.IntN(7)-3), int8(r.IntN(3)-1)
			want += int(x[j]) * int(y[j])
		}
		var xs, ys [Holders][]E
		for j := range Holders {
			xs[j], ys[j] = make([]E, d), make([]E, d)
		}
		if err := Split(&xs, x, nil); err != nil {
			t.Fatal(err)
		}
		if err := Split(&ys, y, nil); err != nil {
			t.Fatal(err)
		}
		var sum E
		for i := range Holders {
			px := Pair(&xs, i)
			own, next := ProductCoefficients(Pair(&ys, i))
			for j := range d {
				sum += px[0][j]*own[j] + px[1][j]*next[j]
			}
		}
		if got := additive.Signed(sum); got != want {
			t.Fatalf("d %d: product shares sum to %d, want %d", d, got, want)
		}
	}
}
