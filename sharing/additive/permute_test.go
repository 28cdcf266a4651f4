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
	for _, n := range []int{0, 1, 2, 3, 5, 255, 256, 257, 1000, 4097, exactRows - 1, exactRows,
		exactRows + 1, 70000, 100003, 1 << 17, 1<<17 + 1, 300007} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			p, p1 := Permuter{Workers: 3}, Permuter{Workers: 1}
			s1, s2 := testSeed(1), testSeed(2)
			a, err := p.Permutation(&s1, n)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := p1.Permutation(&s1, n)
			other, _ := p.Permutation(&s2, n)
			if !slices.Equal(a, b) {
				t.Fatal("permutation depends on the number of workers")
			}
			if n > 3 && slices.Equal(a, other) {
				t.Fatal("two seeds gave the same permutation")
			}
			seen := make([]bool, n)
			for _, q := range a {
				if q < 0 || q >= n || seen[q] {
					t.Fatalf("not a permutation: %v", a[:min(n, 20)])
				}
				seen[q] = true
			}
			// Unpermute inverts it, for positions in any order, repeated,
			// and the ends.
			r := rand.New(rand.NewPCG(uint64(n), 1))
			var pos []int
			for range min(n, 40) {
				pos = append(pos, r.IntN(n))
			}
			if n > 0 {
				pos = append(pos, pos[0], 0, n-1)
			}
			rows := make([]int, len(pos))
			if err := p.Unpermute(rows, pos, &s1, n); err != nil {
				t.Fatal(err)
			}
			for i, q := range pos {
				if a[rows[i]] != q {
					t.Fatalf("Unpermute(%d) = row %d, but pi(%d) = %d", q, rows[i], rows[i], a[rows[i]])
				}
			}
		})
	}
	// A Permuter reused across sizes (tables of another domain, walkers'
	// scratch, the exact table) gives what a fresh one does.
	var reused Permuter
	s := testSeed(9)
	for _, n := range []int{300007, 5, 70000, 1 << 20, 1000, 131073} {
		got, _ := reused.Permutation(&s, n)
		want, _ := (&Permuter{}).Permutation(&s, n)
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: a reused Permuter differs from a fresh one", n)
		}
	}
	var p Permuter
	s = testSeed(1)
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

// TestFeistel drives the Feistel network itself at every size, tiny ones
// too (the permutation uses it above exactRows only): its walk is a
// bijection of [0, n), the table look-ups (four at a time and singly)
// agree with the entry's AES-block evaluation, and each point walks
// fewer than 2 steps on average.
func TestFeistel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	sizes := []int{1, 2, 3, 4, 5, 7, 8, 9, 17, 255, 256, 257, 1000, 1023, 1024, 1025, 4097, 65537, 100003}
	for range 20 {
		sizes = append(sizes, 2+r.IntN(5000))
	}
	for _, n := range sizes {
		seed := testSeed(uint64(n))
		ks, _ := newKeystream(&seed)
		var f feistel
		f.shape(n)
		f.tables(ks, nil)
		rows := make([]uint32, n)
		f.rows(rows, 0, nil)
		seen := make([]bool, n)
		for q, x := range rows {
			if x >= uint32(n) || seen[x] {
				t.Fatalf("n=%d: not a permutation at position %d", n, q)
			}
			seen[x] = true
		}
		for range 20 {
			q := r.IntN(n)
			if got := f.at(ks.block, uint32(q)); got != rows[q] {
				t.Fatalf("n=%d: at(%d) = %d, tables say %d", n, q, got, rows[q])
			}
		}
		// Walks: every step lands on a distinct point of [0, 2^m), so the
		// n walks take at most 2^m < 2n steps in all.
		taken, one := 0, make([]uint32, 1)
		for q := range n {
			for one[0] = uint32(q); ; {
				f.steps(one, make([]uint32, 1))
				taken++
				if one[0] < uint32(n) {
					break
				}
			}
		}
		if taken > 1<<f.m || (n > 1 && 1<<f.m >= 2*n) {
			t.Fatalf("n=%d: %d steps over a domain of 2^%d", n, taken, f.m)
		}
	}
}

// TestFeistelSpread: over many seeds the row at a fixed position, and
// the distance between the rows at two adjacent positions, spread evenly
// (chi-square over 64 bins): a sanity check that the keyed tables mix,
// not a test of pseudorandomness.
func TestFeistelSpread(t *testing.T) {
	const n, trials, bins = 1_000_003, 6400, 64
	var p Permuter
	var at, gap [bins]int
	rows := make([]int, 2)
	for i := range trials {
		s := testSeed(uint64(i) + 5000)
		if err := p.Unpermute(rows, []int{12345, 12346}, &s, n); err != nil {
			t.Fatal(err)
		}
		at[rows[0]*bins/n]++
		gap[((rows[1]-rows[0])%n+n)%n*bins/n]++
	}
	for name, h := range map[string][]int{"row": at[:], "gap": gap[:]} {
		if chi := chiSquare(h, trials); chi > 63+6*sqrt(2*63) {
			t.Errorf("%s: chi2 = %.1f with 63 degrees of freedom", name, chi)
		}
	}
}

// TestPermutationGolden pins pi^-1 at a few positions for a fixed seed,
// on the exact table and on the Feistel: every holder must compute the
// same permutation, so a change here is a change of the wire (the
// decider's positions mean other rows to a server of another build).
func TestPermutationGolden(t *testing.T) {
	s := testSeed(7)
	var p Permuter
	for _, c := range []struct {
		n    int
		want []int
	}{
		{1000, []int{469, 885, 161, 118, 594}},
		{1_000_003, []int{536339, 828567, 373272, 17982, 543904}},
	} {
		pos := []int{0, 1, 2, c.n / 2, c.n - 1}
		rows := make([]int, len(pos))
		if err := p.Unpermute(rows, pos, &s, c.n); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rows, c.want) {
			t.Errorf("n=%d: pi^-1(%v) = %#v, want %v", c.n, pos, rows, c.want)
		}
	}
}

// TestPermutationUniform: over many seeds every permutation of a tiny n
// appears equally often (chi-square): the exact table is uniform.
func TestPermutationUniform(t *testing.T) {
	for _, c := range []struct{ n, trials int }{{4, 12000}, {5, 24000}} {
		t.Run(fmt.Sprintf("n=%d", c.n), func(t *testing.T) {
			var p Permuter
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
	for _, n := range []int{1, 7, 5000, 40000, 70001, 200003} {
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
	var p Permuter
	for _, n := range []int{exactRows, 1 << 17} {
		src := make([]uint8, n)
		out := make([]uint8, n)
		for _, mu := range []int{2, 3} {
			for h := range mu {
				s := testSeed(uint64(100 + h))
				PermuteMask(&p, out, src, nil, &s, h, mu)
				var hist [256]int
				for _, v := range out {
					hist[v]++
				}
				if chi := chiSquare(hist[:], n); chi > 380 {
					t.Errorf("n=%d/mu=%d/holder=%d: chi2 = %.0f", n, mu, h, chi)
				}
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
								// DecideBest: the same matches and, from the
								// same pass, the best live score reached or not.
								got, best, ok, err := DecideBest(k, thr, workers, shares...)
								if err != nil || !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
									t.Fatalf("DecideBest k=%d/thr=%d/workers=%d: %v (%v), want %v", k, thr, workers, got, err, want)
								}
								if ok != (len(all) > 0) || ok && best != all[0].Score {
									t.Fatalf("DecideBest k=%d/thr=%d/workers=%d: best %d (%v), want %v", k, thr, workers, best, ok, all[:min(1, len(all))])
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

// TestDecideBest: a rejected query's best score comes from the one pass,
// in permuted order and with the records of an ascending run (every
// position beats the ones before); a store of deleted rows has none.
func TestDecideBest(t *testing.T) {
	const n = 50000
	dead := make([]uint8, n)
	for i := range dead {
		dead[i] = uint8(DeadScore[uint8]())
	}
	if _, _, ok, err := DecideBest(3, 10, 0, dead); ok || err != nil {
		t.Fatalf("a store of deleted rows gave a best score (%v)", err)
	}
	r := rand.New(rand.NewPCG(19, 20))
	up, random := make([]uint8, n), make([]uint8, n)
	for i := range n {
		up[i] = uint8(i * 100 / n)                // 0..99, ascending
		random[i] = uint8(int8(r.IntN(120) - 60)) // -60..59
	}
	for name, c := range map[string]struct {
		v    []uint8
		want int
	}{"ascending": {up, 99}, "random": {random, 59}} {
		for _, thr := range []int{60, 100, 127, 200} {
			top, best, ok, err := DecideBest(1, thr, 0, c.v)
			if err != nil || !ok || best != c.want || (len(top) > 0) != (thr <= c.want) {
				t.Fatalf("%s/thr=%d: %v, best %d (%v, %v), want %d", name, thr, top, best, ok, err, c.want)
			}
		}
	}
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

// TestPermuteMaskAll: one pass over two vectors (one of them zeros) and
// the permutation equals PermuteMask of each and Permutation.
func TestPermuteMaskAll(t *testing.T) {
	for _, n := range []int{0, 1, 100, exactRows + 1, 3 * permChunk} {
		seed := Seed{byte(n), 9}
		src := make([]uint16, n)
		live := make([]uint64, (n+63)/64+1)
		for i := range src {
			src[i] = uint16(i*31 + 7)
			if i%5 != 0 {
				live[i/64] |= 1 << (i % 64)
			}
		}
		var p Permuter
		a, z, pi := make([]uint16, n), make([]uint16, n), make([]uint32, n)
		if err := PermuteMaskAll(&p, pi, live, &seed, 3, Masked[uint16]{a, src, 1}, Masked[uint16]{z, nil, 0}); err != nil {
			t.Fatal(err)
		}
		wantA, wantZ := make([]uint16, n), make([]uint16, n)
		if err := PermuteMask(&p, wantA, src, live, &seed, 1, 3); err != nil {
			t.Fatal(err)
		}
		if err := PermuteMask(&p, wantZ, make([]uint16, n), live, &seed, 0, 3); err != nil {
			t.Fatal(err)
		}
		wantPi, err := p.Permutation(&seed, n)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if a[i] != wantA[i] || z[i] != wantZ[i] || int(pi[i]) != wantPi[i] {
				t.Fatalf("n=%d at %d: %d %d %d, want %d %d %d", n, i, a[i], z[i], pi[i], wantA[i], wantZ[i], wantPi[i])
			}
		}
	}
	var p Permuter
	if err := PermuteMaskAll(&p, nil, nil, &Seed{}, 3, Masked[uint8]{make([]uint8, 2), make([]uint8, 3), 0}); err == nil {
		t.Fatal("vectors of different lengths accepted")
	}
	if err := PermuteMaskAll[uint8](&p, nil, nil, &Seed{}, 3); err == nil {
		t.Fatal("no vector accepted")
	}
}
