package additive

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idface/idface/sharing"
)

// testSeed is a fixed per-query seed for reproducible tests.
func testSeed(i uint64) Seed {
	var s Seed
	binary.LittleEndian.PutUint64(s[:], i)
	s[31] = 0x5e
	return s
}

func TestPermutation(t *testing.T) {
	for _, c := range []struct{ n, bucketRows int }{
		{0, bucketRows}, {1, bucketRows}, {2, bucketRows}, {1000, bucketRows}, {4097, bucketRows},
		{70000, bucketRows}, {10000, 16}, {300, 1},
	} {
		t.Run(fmt.Sprintf("n=%d/bucket=%d", c.n, c.bucketRows), func(t *testing.T) {
			p, p1 := Permuter{bucketRows: c.bucketRows}, Permuter{bucketRows: c.bucketRows}
			p1.Workers = 1
			p.Workers = 3
			s1, s2 := testSeed(1), testSeed(2)
			a, err := p.Permutation(&s1, c.n)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := p1.Permutation(&s1, c.n)
			other, _ := p.Permutation(&s2, c.n)
			if !slices.Equal(a, b) {
				t.Fatal("permutation depends on the number of workers")
			}
			if c.n > 3 && slices.Equal(a, other) {
				t.Fatal("two seeds gave the same permutation")
			}
			seen := make([]bool, c.n)
			for _, q := range a {
				if q < 0 || q >= c.n || seen[q] {
					t.Fatalf("not a permutation: %v", a)
				}
				seen[q] = true
			}
			// Unpermute inverts it, for positions in any order, repeated,
			// and several in one bucket.
			r := rand.New(rand.NewPCG(uint64(c.n), 1))
			var pos []int
			for range min(c.n, 40) {
				pos = append(pos, r.IntN(c.n))
			}
			if c.n > 0 {
				pos = append(pos, pos[0], 0, c.n-1)
			}
			rows := make([]int, len(pos))
			if err := p.Unpermute(rows, pos, &s1, c.n); err != nil {
				t.Fatal(err)
			}
			for i, q := range pos {
				if a[rows[i]] != q {
					t.Fatalf("Unpermute(%d) = row %d, but pi(%d) = %d", q, rows[i], rows[i], a[rows[i]])
				}
			}
		})
	}
	var p Permuter
	s := testSeed(1)
	if err := p.Unpermute(make([]int, 1), []int{5}, &s, 5); err == nil {
		t.Error("position past n accepted")
	}
	if err := p.Unpermute(make([]int, 2), []int{1}, &s, 5); err == nil {
		t.Error("short positions accepted")
	}
	if _, err := p.Permutation(&s, -1); err == nil {
		t.Error("n = -1 accepted")
	}
}

// TestPermutationUniform: over many seeds every permutation of a tiny n
// appears equally often (chi-square), with one bucket and with several,
// so the bucket draw, the stable scatter and the shuffles compose to a
// uniform permutation.
func TestPermutationUniform(t *testing.T) {
	for _, c := range []struct{ n, bucketRows, trials int }{{4, 4096, 12000}, {4, 1, 12000}, {5, 2, 24000}} {
		t.Run(fmt.Sprintf("n=%d/buckets=%d", c.n, 1<<bucketBits(c.n, c.bucketRows)), func(t *testing.T) {
			p := Permuter{bucketRows: c.bucketRows}
			count := map[string]int{}
			for i := range c.trials {
				s := testSeed(uint64(i) + 1000)
				pi, err := p.Permutation(&s, c.n)
				if err != nil {
					t.Fatal(err)
				}
				count[fmt.Sprint(pi)]++
			}
			fact := 1
			for i := 2; i <= c.n; i++ {
				fact *= i
			}
			if len(count) != fact {
				t.Fatalf("%d of %d permutations seen", len(count), fact)
			}
			hist := make([]int, 0, fact)
			for _, v := range count {
				hist = append(hist, v)
			}
			dof := float64(fact - 1)
			if chi := chiSquare(hist, c.trials); chi > dof+6*sqrt(2*dof) {
				t.Fatalf("chi2 = %.1f with %v degrees of freedom", chi, dof)
			}
		})
	}
}

func sqrt(x float64) float64 {
	z := x
	for range 50 {
		z = (z + x/z) / 2
	}
	return z
}

// TestShuffleRejection drives Lemire's rejection branch (all-zero draws
// are rejected for every bound that is not a power of two) and checks the
// redraws still give a permutation.
func TestShuffleRejection(t *testing.T) {
	s := testSeed(3)
	ks, _ := newKeystream(&s)
	var rej rejecter
	a := make([]uint32, 1000)
	for i := range a {
		a[i] = uint32(i)
	}
	shuffle(a, make([]byte, 4*999), ks, &rej, 7)
	if rej.b != 7 || rej.ks.ctr == nil {
		t.Fatal("no redraw happened")
	}
	b := slices.Clone(a)
	slices.Sort(b)
	for i, v := range b {
		if v != uint32(i) {
			t.Fatal("not a permutation after redraws")
		}
	}
}

func testPermuteMask[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{1, 7, 5000, 40000} {
		for _, c := range []struct{ mu, deadEvery int }{{2, 9}, {3, 9}, {5, 9}, {2, 1000}, {3, 1000}} {
			// Every 9th row dead leaves no whole live word; every 1000th
			// leaves most words whole (the scatter's fast path).
			mu, deadEvery := c.mu, c.deadEvery
			t.Run(fmt.Sprintf("k=%d/n=%d/mu=%d/dead=1in%d", elemBits[E](), n, mu, deadEvery), func(t *testing.T) {
				src := make([][]E, mu)
				want := make([]E, n)
				for k := range src {
					src[k] = make([]E, n)
					for i := range src[k] {
						src[k][i] = E(r.Uint32())
						want[i] += src[k][i]
					}
				}
				live := make([]uint64, (n+63)/64)
				for i := range n {
					if i%deadEvery != 4 {
						live[i>>6] |= 1 << uint(i&63)
					}
				}
				seed := testSeed(uint64(n * mu))
				var p Permuter
				pi, _ := p.Permutation(&seed, n)
				outs := make([][]E, mu)
				for k := range outs {
					outs[k] = make([]E, n)
					if err := PermuteMask(&p, outs[k], src[k], live, &seed, k, mu); err != nil {
						t.Fatal(err)
					}
				}
				sum := make([]E, n)
				if err := SumShares(sum, outs...); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					w := want[i]
					if i%deadEvery == 4 {
						w = E(DeadScore[E]())
					}
					if sum[pi[i]] != w {
						t.Fatalf("row %d at position %d: sum %d, want %d", i, pi[i], sum[pi[i]], w)
					}
				}
				// A single holder's output is masked: far from its input.
				if n >= 5000 {
					same := 0
					for i := range n {
						if outs[0][pi[i]] == src[0][i] {
							same++
						}
					}
					if same > n/50 {
						t.Fatalf("%d of %d outputs equal their unmasked share", same, n)
					}
				}
			})
		}
	}
	var p Permuter
	s := testSeed(1)
	same := make([]E, 4)
	for name, err := range map[string]error{
		"len":    PermuteMask(&p, make([]E, 3), make([]E, 4), nil, &s, 0, 2),
		"holder": PermuteMask(&p, make([]E, 4), make([]E, 4), nil, &s, 2, 2),
		"mu":     PermuteMask(&p, make([]E, 4), make([]E, 4), nil, &s, 0, 1),
		"live":   PermuteMask(&p, make([]E, 100), make([]E, 100), make([]uint64, 1), &s, 0, 2),
		"alias":  PermuteMask(&p, same, same, nil, &s, 0, 2),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPermuteMask(t *testing.T) {
	testPermuteMask[uint8](t)
	testPermuteMask[uint16](t)
}

// TestMaskUniform: the decider's view of one holder is uniform bytes even
// when every score share is zero.
func TestMaskUniform(t *testing.T) {
	const n = 1 << 16
	src := make([]uint8, n)
	out := make([]uint8, n)
	var p Permuter
	for _, mu := range []int{2, 3} {
		for h := range mu {
			s := testSeed(uint64(100 + h))
			PermuteMask(&p, out, src, nil, &s, h, mu)
			var hist [256]int
			for _, v := range out {
				hist[v]++
			}
			if chi := chiSquare(hist[:], n); chi > 380 {
				t.Errorf("mu=%d/holder=%d: chi2 = %.0f", mu, h, chi)
			}
		}
	}
}

func naiveTopK[E Elem](scores []E, k, thr int) []sharing.Match {
	var all []sharing.Match
	for q, v := range scores {
		if s := Signed(v); s >= thr && s != DeadScore[E]() {
			all = append(all, sharing.Match{Row: q, Score: s})
		}
	}
	slices.SortFunc(all, sharing.CompareMatches)
	return all[:min(k, len(all))]
}

func testDecide[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	maxS := RingOf[E]().MaxScore()
	for _, n := range []int{1, 13, 5000, 70001} {
		for _, dist := range []string{"uniform", "ties", "narrow"} {
			for _, mu := range []int{1, 2, 3} {
				t.Run(fmt.Sprintf("k=%d/n=%d/%s/mu=%d", elemBits[E](), n, dist, mu), func(t *testing.T) {
					sum := make([]E, n)
					for i := range sum {
						switch dist {
						case "uniform":
							sum[i] = E(r.Uint32())
						case "ties":
							sum[i] = E([]int{maxS, -maxS - 1, 0, 3, 3, -1}[r.IntN(6)])
						default:
							sum[i] = E(r.IntN(40) - 20)
						}
					}
					shares := make([][]E, mu)
					for k := range shares {
						shares[k] = make([]E, n)
					}
					copy(shares[mu-1], sum)
					for k := range mu - 1 {
						for i := range n {
							shares[k][i] = E(r.Uint32())
							shares[mu-1][i] -= shares[k][i]
						}
					}
					if n > 10000 && mu != 2 {
						return // large n once is enough; keeps -race quick
					}
					all := naiveTopK(sum, n, -1<<20) // sorted once, filtered per threshold
					for _, k := range []int{1, 3, 50} {
						for _, thr := range []int{-1 << 20, -5, 0, 3, 19, maxS, maxS + 1} {
							var want []sharing.Match
							for _, m := range all {
								if m.Score >= thr && len(want) < k {
									want = append(want, m)
								}
							}
							for _, workers := range []int{1, 2, 0} {
								got, err := Decide(k, thr, workers, shares...)
								if err != nil {
									t.Fatal(err)
								}
								if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
									t.Fatalf("k=%d/thr=%d/workers=%d: %v, want %v", k, thr, workers, got, want)
								}
							}
						}
					}
					if got, _ := TopK(sum, 2, -1<<20); !slices.Equal(got, naiveTopK(sum, 2, -1<<20)) {
						t.Fatal("TopK differs")
					}
				})
			}
		}
	}
	if _, err := Decide[E](0, 0, 1, make([]E, 3)); err == nil {
		t.Error("k = 0 accepted")
	}
	if _, err := Decide[E](1, 0, 1); err == nil {
		t.Error("no shares accepted")
	}
	if _, err := Decide(1, 0, 1, make([]E, 3), make([]E, 4)); err == nil {
		t.Error("unequal shares accepted")
	}
	if err := SumShares(make([]E, 3), make([]E, 4)); err == nil {
		t.Error("SumShares: unequal lengths accepted")
	}
}

func TestDecide(t *testing.T) {
	testDecide[uint8](t)
	testDecide[uint16](t)
}

func TestSWARAddSub(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, n := range []int{0, 1, 7, 8, 9, 1001} {
		a, b := make([]uint8, n), make([]uint8, n)
		c, e := make([]uint16, n), make([]uint16, n)
		for i := range n {
			a[i], b[i] = uint8(r.Uint32()), uint8(r.Uint32())
			c[i], e[i] = uint16(r.Uint32()), uint16(r.Uint32())
		}
		if n > 2 {
			a[1], b[1], c[1], e[1] = 0x80, 0x80, 0x8000, 0x8000
			a[2], b[2], c[2], e[2] = 0xFF, 0x01, 0x0000, 0xFFFF
		}
		sa, sc := slices.Clone(a), slices.Clone(c)
		addInto(sa, b)
		addInto(sc, e)
		da, dc := slices.Clone(a), slices.Clone(c)
		subInto(da, b)
		subInto(dc, e)
		for i := range n {
			if sa[i] != a[i]+b[i] || sc[i] != c[i]+e[i] || da[i] != a[i]-b[i] || dc[i] != c[i]-e[i] {
				t.Fatalf("n=%d entry %d", n, i)
			}
		}
	}
}
