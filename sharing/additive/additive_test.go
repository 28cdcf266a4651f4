package additive

import (
	"bytes"
	"errors"
	"fmt"

	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

func TestRing(t *testing.T) {
	for _, c := range []struct{ maxAbs, bits int }{{0, 8}, {63, 8}, {127, 8}, {128, 16}, {341, 16}, {32767, 16}} {
		r, err := RingForScore(c.maxAbs)
		if err != nil || r.Bits != c.bits {
			t.Errorf("RingForScore(%d) = %v, %v; want k = %d", c.maxAbs, r, err, c.bits)
		}
	}
	for _, bad := range []int{-1, 32768} {
		if _, err := RingForScore(bad); err == nil {
			t.Errorf("RingForScore(%d) accepted", bad)
		}
	}
	for _, c := range []struct {
		g, q string
		bits int
	}{
		{"1:341", "1:63", 8}, {"1:341", "1:127", 8}, {"1:341", "1:341", 16},
		{"2:63,278", "1:63", 8}, {"3:2,61,278", "1:63", 16}, {"4:32,64,96,149", "1:63", 16},
		{"4:9,26,77,229", "1:63", 16}, {"4:2,6,19,58", "1:85", 8}, {"8:2,3,5,7,10,16,24,35", "1:16", 8},
	} {
		g, _ := template.ParseLevels(c.g)
		q, _ := template.ParseLevels(c.q)
		if r, err := RingFor(g, q); err != nil || r.Bits != c.bits {
			t.Errorf("RingFor(%s, %s) = %v, %v; want k = %d", c.g, c.q, r, err, c.bits)
		}
	}
	for _, b := range []int{8, 16} {
		if r, err := NewRing(b); err != nil || r.MaxScore() != 1<<(b-1)-1 {
			t.Errorf("NewRing(%d) = %v, %v", b, r, err)
		}
	}
	if _, err := NewRing(32); err == nil {
		t.Error("k = 32 accepted")
	}
	if RingOf[uint8]().Bits != 8 || RingOf[uint16]().Bits != 16 || DeadScore[uint8]() != -128 || DeadScore[uint16]() != -32768 {
		t.Error("ring of element types")
	}
}

func randInt8(r *rand.Rand, d, L int) []int8 {
	v := make([]int8, d)
	for j := range v {
		v[j] = int8(r.IntN(2*L+1) - L)
	}
	return v
}

func testGenAdditive[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	stream, _ := sharing.NewStream(nil)
	for _, d := range []int{1, 128, 512} {
		for _, mu := range []int{2, 3, 5} {
			t.Run(fmt.Sprintf("k=%d/d=%d/mu=%d", elemBits[E](), d, mu), func(t *testing.T) {
				v := randInt8(r, d, 127)
				v[0] = -128
				sh := make([][]E, mu)
				for i := range sh {
					sh[i] = make([]E, d)
				}
				for _, rnd := range []any{nil, stream} {
					var err error
					if rnd == nil {
						err = GenShare(sh, v, nil)
					} else {
						err = GenShare(sh, v, stream)
					}
					if err != nil {
						t.Fatal(err)
					}
					got := make([]int, d)
					if err := Combine(got, sh...); err != nil {
						t.Fatal(err)
					}
					for j := range v {
						if got[j] != int(v[j]) {
							t.Fatalf("entry %d: %d, want %d", j, got[j], v[j])
						}
					}
				}
			})
		}
	}
	if err := GenShare([][]E{make([]E, 4)}, make([]int8, 4), nil); err == nil {
		t.Error("mu = 1 accepted")
	}
	if err := GenShare([][]E{make([]E, 4), make([]E, 3)}, make([]int8, 4), nil); err == nil {
		t.Error("short share accepted")
	}
	if err := GenShare([][]E{nil, nil}, nil, nil); err == nil {
		t.Error("d = 0 accepted")
	}
	if err := GenShare([][]E{make([]E, 4), make([]E, 4)}, make([]int8, 4), bytes.NewReader(nil)); err == nil {
		t.Error("empty randomness accepted")
	}
}

func TestGenAdditive(t *testing.T) {
	testGenAdditive[uint8](t)
	testGenAdditive[uint16](t)
}

// TestAdditiveShareUniform: whatever v, each single share's entries are
// uniform over the ring (chi-square over the byte values of k = 8 shares
// of an extreme and a zero template, for every holder).
func TestAdditiveShareUniform(t *testing.T) {
	const d, trials = 64, 1200
	stream, _ := sharing.NewStream(nil)
	for name, v := range map[string][]int8{"all-127": bytes127(d), "zero": make([]int8, d)} {
		for _, mu := range []int{2, 3} {
			for h := range mu {
				t.Run(fmt.Sprintf("%s/mu=%d/holder=%d", name, mu, h), func(t *testing.T) {
					sh := make([][]uint8, mu)
					for i := range sh {
						sh[i] = make([]uint8, d)
					}
					var hist [256]int
					for range trials {
						if err := GenShare(sh, v, stream); err != nil {
							t.Fatal(err)
						}
						for _, x := range sh[h] {
							hist[x]++
						}
					}
					// 255 degrees of freedom: mean 255, sd 22.6; 380 is ~5.5 sd.
					if chi := chiSquare(hist[:], d*trials); chi > 380 {
						t.Fatalf("share bytes not uniform: chi2 = %.0f", chi)
					}
				})
			}
		}
	}
}

func bytes127(d int) []int8 {
	v := make([]int8, d)
	for j := range v {
		v[j] = 127
	}
	return v
}

func chiSquare(hist []int, total int) float64 {
	e := float64(total) / float64(len(hist))
	chi := 0.0
	for _, c := range hist {
		chi += (float64(c) - e) * (float64(c) - e) / e
	}
	return chi
}

func TestExpandShare(t *testing.T) {
	s1, _ := NewSeed(bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	s2, _ := NewSeed(bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	a, b, c := make([]uint8, 512), make([]uint8, 512), make([]uint8, 512)
	ExpandShare(a, &s1)
	ExpandShare(b, &s1)
	ExpandShare(c, &s2)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatal("share expansion is not a deterministic function of the seed")
	}
	w := make([]uint16, 256)
	ExpandShare(w, &s1)
	if bytes.Equal(elemBytes(w), a) {
		t.Fatal("k = 8 and k = 16 expansions share a keystream")
	}
	// Known answer: AES-256-CTR, key 0x01*32, IV 'S' 0 0 0 | 0 0 0 8 | 0...
	// (first 8 bytes; openssl enc -aes-256-ctr -K 0101..01 -iv 53000000000000080000000000000000).
	if got := fmt.Sprintf("%x", a[:8]); got != expandKAT {
		t.Fatalf("expansion of seed 0x01..: %s, pinned %s", got, expandKAT)
	}
	if _, err := NewSeed(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Fatal("short seed accepted")
	}
}

// expandKAT pins ExpandShare for seed 0x01*32, k = 8 (any change breaks
// enrollments whose shares travelled as seeds).
const expandKAT = "f944c876e66102c0"

func TestGenSeededShares(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, mu := range []int{2, 3, 4} {
		for _, bitsK := range []int{8, 16} {
			t.Run(fmt.Sprintf("k=%d/mu=%d", bitsK, mu), func(t *testing.T) {
				v := randInt8(r, 512, 4)
				seeds := make([]Seed, mu-1)
				if bitsK == 8 {
					checkSeeded[uint8](t, seeds, v)
				} else {
					checkSeeded[uint16](t, seeds, v)
				}
			})
		}
	}
	if err := GenSeededShares[uint8](nil, make([]uint8, 4), make([]int8, 4), nil); err == nil {
		t.Error("no seeds accepted")
	}
	if err := GenSeededShares(make([]Seed, 1), make([]uint8, 3), make([]int8, 4), nil); err == nil {
		t.Error("short last share accepted")
	}
}

func checkSeeded[E Elem](t *testing.T, seeds []Seed, v []int8) {
	last := make([]E, len(v))
	if err := GenSeededShares(seeds, last, v, nil); err != nil {
		t.Fatal(err)
	}
	sh := [][]E{last}
	for i := range seeds {
		x := make([]E, len(v))
		if err := ExpandShare(x, &seeds[i]); err != nil {
			t.Fatal(err)
		}
		sh = append(sh, x)
	}
	got := make([]int, len(v))
	Combine(got, sh...)
	for j := range v {
		if got[j] != int(v[j]) {
			t.Fatalf("entry %d: %d, want %d", j, got[j], v[j])
		}
	}
}

func testAdditiveStore[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const d = 24
	s, err := NewStore[E](d, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]E{}
	put := func(row int, live bool) {
		sh := make([]E, d)
		for j := range sh {
			sh[j] = E(r.Uint32())
		}
		if err := s.Put(row, sh, live); err != nil {
			t.Fatal(err)
		}
		want[row] = sh
	}
	for i := range 100 {
		put(i, true)
	}
	put(ChunkRows+5, true) // grows by two chunks, rows between are dead
	put(50, false)         // overwrite, not live
	if s.Rows() != ChunkRows+6 || s.Live() != 100 || s.Words() != (s.Rows()+lanes[E]()-1)/lanes[E]() {
		t.Fatalf("rows %d live %d words %d", s.Rows(), s.Live(), s.Words())
	}
	if s.IsLive(50) || !s.IsLive(49) || s.IsLive(200) || !s.IsLive(ChunkRows+5) {
		t.Fatal("live bits")
	}
	buf := make([]E, d)
	for row, sh := range want {
		got, err := s.Row(row, buf)
		if err != nil || !slices.Equal(got, sh) {
			t.Fatalf("row %d: %v (%v), want %v", row, got, err, sh)
		}
	}
	if got, _ := s.Row(200, buf); !slices.Equal(got, make([]E, d)) {
		t.Fatal("skipped row is not zero")
	}
	if err := s.Delete(7); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Row(7, buf); !slices.Equal(got, make([]E, d)) || s.IsLive(7) || s.Live() != 99 {
		t.Fatal("deleted row not erased")
	}
	if got, _ := s.Row(8, buf); !slices.Equal(got, want[8]) {
		t.Fatal("delete touched a neighbour")
	}
	for _, bad := range []func() error{
		func() error { return s.Delete(7) },
		func() error { return s.Delete(-1) },
		func() error { return s.Put(-1, make([]E, d), true) },
		func() error { return s.Put(3, make([]E, d-1), true) },
		func() error { _, err := s.Row(s.Rows(), buf); return err },
		func() error { _, err := s.Row(0, buf[:3]); return err },
	} {
		if err := bad(); err == nil || !strings.HasPrefix(err.Error(), "sharing: ") {
			t.Errorf("bad input: %v", err)
		}
	}
	if _, err := NewStore[E](0, 0); !errors.Is(err, template.ErrDimension) {
		t.Error("d = 0 accepted")
	}
}

func TestAdditiveStore(t *testing.T) {
	t.Run("k=8", testAdditiveStore[uint8])
	t.Run("k=16", testAdditiveStore[uint16])
}

// fillStore puts rows random shares (or an extreme pattern) into a store.
func fillStore[E Elem](t testing.TB, r *rand.Rand, d, rows int, pattern string) (*Store[E], [][]E) {
	s, err := NewStore[E](d, rows)
	if err != nil {
		t.Fatal(err)
	}
	all := make([][]E, rows)
	for i := range rows {
		sh := make([]E, d)
		for j := range sh {
			switch pattern {
			case "max": // every entry 2^k - 1: sums wrap many times
				sh[j] = ^E(0)
			case "half": // 2^(k-1): the sign bit of every lane
				sh[j] = E(1) << (elemBits[E]() - 1)
			default:
				sh[j] = E(r.Uint32())
			}
		}
		if _, err := s.Append(sh); err != nil {
			t.Fatal(err)
		}
		all[i] = sh
	}
	return s, all
}

// naiveScore is the definition: sum_j y_j v[i][j] mod 2^k, row by row.
func naiveScore[E Elem](rows [][]E, pos []int32, coef []int8, i int) E {
	var s E
	for t, p := range pos {
		s += E(coef[t]) * rows[i][p]
	}
	return s
}

func randQuery(r *rand.Rand, d, beta, L int) (pos []int32, coef []int8) {
	for _, j := range r.Perm(d)[:beta] {
		c := int8(1 + r.IntN(L))
		if r.IntN(2) == 0 {
			c = -c
		}
		pos, coef = append(pos, int32(j)), append(coef, c)
	}
	return pos, coef
}

func testScoreShares[E Elem](t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		d, rows, beta, L int
		pattern          string
	}{
		{512, 1000, 63, 1, "random"},
		{512, 777, 341, 1, "random"}, // > maxOps columns of one sign: normalisation
		{512, 300, 512, 1, "max"},
		{512, 300, 341, 1, "half"},
		{64, 5000, 40, 4, "random"},
		{64, 300, 64, 127, "max"},
		{32, 70000, 21, 3, "random"}, // crosses a chunk
		{8, 9, 1, 1, "random"},
		// Whole 32-byte groups: T_beta runs the AVX2 kernel (where built),
		// with column counts of each sign not a multiple of four.
		{512, 4096, 63, 1, "random"},
		{512, 2048, 341, 1, "max"},
		{64, ChunkRows + 4096, 21, 1, "random"}, // crosses a chunk
	} {
		name := fmt.Sprintf("k=%d/d=%d/rows=%d/beta=%d/L=%d/%s", elemBits[E](), c.d, c.rows, c.beta, c.L, c.pattern)
		t.Run(name, func(t *testing.T) {
			s, rows := fillStore[E](t, r, c.d, c.rows, c.pattern)
			var qs []*Query
			var poss [][]int32
			var coefs [][]int8
			for qi := range 3 {
				pos, coef := randQuery(r, c.d, c.beta, c.L)
				if qi == 1 && c.L > 1 { // skip magnitudes: 5, 2, -1
					for i := range coef {
						coef[i] = []int8{5, 2, -1}[i%3]
					}
				}
				q, err := NewQuery(c.d, pos, coef)
				if err != nil {
					t.Fatal(err)
				}
				qs, poss, coefs = append(qs, q), append(poss, pos), append(coefs, coef)
			}
			for _, rg := range [][2]int{{0, c.rows}, {3, c.rows - 2}, {c.rows / 3, c.rows/3 + 1}} {
				r0, r1 := max(rg[0], 0), max(min(rg[1], c.rows), max(rg[0], 0))
				// The three queries in one pass (ScoreSharesBatch), and
				// each on its own, serially and in parallel.
				batch := make([][]E, len(qs))
				for qi := range qs {
					batch[qi] = make([]E, r1-r0+1)
				}
				if err := s.ScoreSharesBatch(batch[:2], qs, r0, r1, 3); err == nil {
					t.Fatal("ScoreSharesBatch took 2 buffers for 3 queries")
				}
				if err := s.ScoreSharesBatch(batch, qs, r0, r1, 3); err != nil {
					t.Fatal(err)
				}
				for qi, q := range qs {
					out := make([]E, r1-r0+1)
					par := make([]E, r1-r0)
					if err := s.ScoreShares(out, q, r0, r1); err != nil {
						t.Fatal(err)
					}
					if err := s.ScoreSharesParallel(par, q, r0, r1, 3); err != nil {
						t.Fatal(err)
					}
					for i := r0; i < r1; i++ {
						want := naiveScore(rows, poss[qi], coefs[qi], i)
						if out[i-r0] != want || par[i-r0] != want || batch[qi][i-r0] != want {
							t.Fatalf("query %d rows [%d, %d) row %d: %d / parallel %d / batch %d, want %d", qi, r0, r1, i, out[i-r0], par[i-r0], batch[qi][i-r0], want)
						}
					}
					if out[r1-r0] != 0 || batch[qi][r1-r0] != 0 {
						t.Fatal("wrote past r1")
					}
				}
			}
		})
	}
}

func TestScoreShares(t *testing.T) {
	testScoreShares[uint8](t)
	testScoreShares[uint16](t)
}

func TestScoreSharesErrors(t *testing.T) {
	s, _ := fillStore[uint8](t, rand.New(rand.NewPCG(1, 1)), 16, 10, "random")
	q, _ := NewQuery(16, []int32{1, 2}, []int8{1, -1})
	q8, _ := NewQuery(8, []int32{1}, []int8{1})
	for name, err := range map[string]error{
		"dim":   s.ScoreShares(make([]uint8, 10), q8, 0, 10),
		"nil":   s.ScoreShares(make([]uint8, 10), nil, 0, 10),
		"range": s.ScoreShares(make([]uint8, 11), q, 0, 11),
		"neg":   s.ScoreShares(make([]uint8, 10), q, -1, 5),
		"short": s.ScoreSharesParallel(make([]uint8, 9), q, 0, 10, 2),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, c := range map[string]struct {
		pos  []int32
		coef []int8
	}{
		"empty": {nil, nil}, "mismatch": {[]int32{1}, []int8{1, 1}}, "outside": {[]int32{16}, []int8{1}},
		"negative": {[]int32{-1}, []int8{1}}, "repeat": {[]int32{3, 3}, []int8{1, 1}},
		"zero": {[]int32{3}, []int8{0}}, "min": {[]int32{3}, []int8{-128}},
	} {
		if _, err := NewQuery(16, c.pos, c.coef); err == nil || !strings.HasPrefix(err.Error(), "sharing: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzNewQuery(f *testing.F) {
	f.Add(16, []byte{1, 2, 3}, []byte{1, 255, 2})
	f.Add(4096, []byte{0, 0}, []byte{1, 1})
	f.Fuzz(func(t *testing.T, d int, p, c []byte) {
		pos := make([]int32, len(p))
		for i, b := range p {
			pos[i] = int32(b) * 17
		}
		coef := make([]int8, len(c))
		for i, b := range c {
			coef[i] = int8(b)
		}
		q, err := NewQuery(d, pos, coef)
		if err != nil {
			return
		}
		gp, gc := q.Coefficients()
		got := map[int32]int8{}
		for i := range gp {
			got[gp[i]] = gc[i]
		}
		if len(got) != len(pos) || q.Weight() != len(pos) {
			t.Fatalf("query lost coefficients")
		}
		for i := range pos {
			if got[pos[i]] != coef[i] {
				t.Fatalf("position %d: %d, want %d", pos[i], got[pos[i]], coef[i])
			}
		}
	})
}

// TestBlindEndToEnd runs blind mode's leaf steps as the engine will:
// levels gallery, additive shares in mu stores (some by seed), score
// shares, permute-and-mask, the decider's top-K, and pi^-1 at the entry.
// The answer must equal the plaintext top-K over live rows.
func TestBlindEndToEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		g, q   string
		mu     int
		rows   int
		useTau float64
	}{
		{"1:85", "1:21", 2, 3000, 0.2},
		{"4:10,20,30,25", "1:21", 3, 9000, 0.25},
		{"2:21,64", "1:21", 2, 20000, -1},
		{"1:128", "1:128", 3, 500, 0.1},
	} {
		g, _ := template.ParseLevels(c.g)
		q, _ := template.ParseLevels(c.q)
		ring, err := RingFor(g, q)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("g=%s/q=%s/mu=%d/rows=%d/k=%d", c.g, c.q, c.mu, c.rows, ring.Bits), func(t *testing.T) {
			if ring.Bits == 8 {
				blindEndToEnd[uint8](t, r, g, q, c.mu, c.rows, c.useTau)
			} else {
				blindEndToEnd[uint16](t, r, g, q, c.mu, c.rows, c.useTau)
			}
		})
	}
}

func blindEndToEnd[E Elem](t *testing.T, r *rand.Rand, g, ql template.Levels, mu, rows int, tau float64) {
	const d = 128
	gt, _ := template.NewLevelTransformer(d, g)
	stores := make([]*Store[E], mu)
	for k := range stores {
		stores[k], _ = NewStore[E](d, rows)
	}
	stream, _ := sharing.NewStream(nil)
	plain := make([][]int8, rows)
	xs := make([][]float64, rows)
	sh := make([][]E, mu)
	for k := range sh {
		sh[k] = make([]E, d)
	}
	seeds := make([]Seed, mu-1)
	for i := range rows {
		xs[i] = make([]float64, d)
		for j := range xs[i] {
			xs[i][j] = r.NormFloat64()
		}
		plain[i] = make([]int8, d)
		if err := template.ApplyLevels(gt, xs[i], plain[i]); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := GenShare(sh, plain[i], stream); err != nil {
				t.Fatal(err)
			}
		} else { // holders 1..mu-1 get seeds
			if err := GenSeededShares(seeds, sh[mu-1], plain[i], nil); err != nil {
				t.Fatal(err)
			}
			for k := range seeds {
				ExpandShare(sh[k], &seeds[k])
			}
		}
		for k, s := range stores {
			if _, err := s.Append(sh[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 5; i < rows; i += 11 {
		for _, s := range stores {
			s.Delete(i)
		}
	}
	var perm Permuter
	for trial := range 3 {
		// Probe: a noisy copy of row 17 (or of a deleted row, trial 2).
		target := 17
		if trial == 2 {
			target = 5
		}
		probe := make([]float64, d)
		for j := range probe {
			probe[j] = xs[target][j] + 0.5*r.NormFloat64()
		}
		y, _ := template.TransformLevels(probe, ql)
		qy, err := DenseQuery(y)
		if err != nil {
			t.Fatal(err)
		}
		thr := template.LevelsMinAcceptScore(tau, g, ql)
		seed, _ := NewSeed(nil)
		outs := make([][]E, mu)
		for k, s := range stores {
			ss := make([]E, rows)
			if err := s.ScoreSharesParallel(ss, qy, 0, rows, 0); err != nil {
				t.Fatal(err)
			}
			outs[k] = make([]E, rows)
			if err := PermuteMask(&perm, outs[k], ss, s.LiveBits(), &seed, k, mu); err != nil {
				t.Fatal(err)
			}
		}
		const K = 5
		top, err := Decide(K, thr, 0, outs...)
		if err != nil {
			t.Fatal(err)
		}
		positions := make([]int, len(top))
		for i, m := range top {
			positions[i] = m.Row
		}
		back := make([]int, len(top))
		if err := perm.Unpermute(back, positions, &seed, rows); err != nil {
			t.Fatal(err)
		}
		var want []sharing.Match
		for i := range rows {
			if s := template.DotInt8(plain[i], y); stores[0].IsLive(i) && s >= thr {
				want = append(want, sharing.Match{Row: i, Score: s})
			}
		}
		slices.SortFunc(want, sharing.CompareMatches)
		want = want[:min(K, len(want))]
		if len(top) != len(want) {
			t.Fatalf("trial %d: %d matches, want %d", trial, len(top), len(want))
		}
		for i := range top {
			// Ties among rows may order differently after permutation; the
			// scores must agree and each row must have its score.
			if top[i].Score != want[i].Score || template.DotInt8(plain[back[i]], y) != top[i].Score || !stores[0].IsLive(back[i]) {
				t.Fatalf("trial %d: match %d: row %d score %d, want row %d score %d", trial, i, back[i], top[i].Score, want[i].Row, want[i].Score)
			}
		}
		if trial == 0 && (len(top) == 0 || back[0] != target) {
			t.Fatalf("genuine row %d not found first: %v", target, back)
		}
	}
}

// TestScoreSharesSum: the mu holders' score shares add to <v_i, y>.
func TestScoreSharesSum(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const d, rows, mu = 64, 200, 3
	stores := make([]*Store[uint16], mu)
	for k := range stores {
		stores[k], _ = NewStore[uint16](d, 0)
	}
	plain := make([][]int8, rows)
	sh := [][]uint16{make([]uint16, d), make([]uint16, d), make([]uint16, d)}
	for i := range rows {
		plain[i] = randInt8(r, d, 5)
		GenShare(sh, plain[i], nil)
		for k, s := range stores {
			s.Append(sh[k])
		}
	}
	y := randInt8(r, d, 3)
	q, _ := DenseQuery(y)
	sum := make([]uint16, rows)
	part := make([]uint16, rows)
	for _, s := range stores {
		s.ScoreShares(part, q, 0, rows)
		addInto(sum, part)
	}
	for i := range rows {
		if got, want := Signed(sum[i]), template.DotInt8(plain[i], y); got != want {
			t.Fatalf("row %d: %d, want %d", i, got, want)
		}
	}
}

func TestPutRows(t *testing.T) {
	for _, n := range []int{1, 63, 64, 200, ChunkRows + 70} {
		a, _ := NewStore[uint16](33, 0)
		b, _ := NewStore[uint16](33, 0)
		a.Put(0, make([]uint16, 33), true) // start at row 1: tiles off the chunk grid
		b.Put(0, make([]uint16, 33), true)
		shares := make([][]uint16, n)
		for i := range shares {
			shares[i] = make([]uint16, 33)
			for j := range shares[i] {
				shares[i][j] = uint16(i*131 + j*7)
			}
			if err := a.Put(1+i, shares[i], true); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.PutRows(1, shares); err != nil {
			t.Fatal(err)
		}
		if a.Rows() != b.Rows() || a.Live() != b.Live() {
			t.Fatalf("n = %d: %d/%d rows, %d/%d live", n, a.Rows(), b.Rows(), a.Live(), b.Live())
		}
		for r := range a.Rows() {
			x, _ := a.Row(r, make([]uint16, 33))
			y, _ := b.Row(r, make([]uint16, 33))
			if !slices.Equal(x, y) {
				t.Fatalf("n = %d: row %d differs", n, r)
			}
		}
	}
	s, _ := NewStore[uint8](4, 0)
	if err := s.PutRows(0, [][]uint8{{1, 2, 3}}); err == nil {
		t.Fatal("a short share accepted")
	}
}

func BenchmarkPut(b *testing.B) {
	const d, n = 512, 8192
	shares := make([][]uint8, n)
	for i := range shares {
		shares[i] = make([]uint8, d)
	}
	b.Run("row_by_row", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(n * d)
		for b.Loop() {
			s, _ := NewStore[uint8](d, n)
			for i, sh := range shares {
				s.Put(i, sh, true)
			}
		}
	})
	b.Run("PutRows", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(n * d)
		for b.Loop() {
			s, _ := NewStore[uint8](d, n)
			s.PutRows(0, shares)
		}
	})
}
