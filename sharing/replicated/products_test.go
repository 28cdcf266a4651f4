package replicated

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idface/idface/sharing/additive"
)

// checkRun is one check of holder i's product share over n rows at
// dimension d, with every party's view built from random shares: the
// verifiers' X sums, the pair masks, A and B, both parts and the
// decider's Delta. tamper alters z_i before the check.
func checkRun[E additive.Elem](t testing.TB, r *rand.Rand, n, d, i int, tamper func(z []E)) bool {
	t.Helper()
	var x [Holders][][]E // x[a][row]: share a of row
	var y [Holders][]E
	for a := range Holders {
		y[a] = make([]E, d)
		for k := range d {
			y[a][k] = E(r.Uint64())
		}
		for range n {
			row := make([]E, d)
			for k := range d {
				row[k] = E(r.Uint64())
			}
			x[a] = append(x[a], row)
		}
	}
	i1, i2 := (i+1)%Holders, (i+2)%Holders // P_(i+1), P_(i-1)
	// z_i as holder i computes it, plus the pair masks' part.
	z := make([]E, n)
	for row := range n {
		z[row] = dot(x[i][row], y[i]) + dot(x[i][row], y[i1]) + dot(x[i1][row], y[i])
	}
	if tamper != nil {
		tamper(z)
	}
	var kv, klo, khi [32]byte // the verifiers' key; the pair keys (i-1, i) and (i, i+1)
	for _, k := range []*[32]byte{&kv, &klo, &khi} {
		for j := range k {
			k[j] = byte(r.Uint64())
		}
	}
	var probe [32]byte
	hlo, hhi := make([]E, n), make([]E, n)
	if err := PairMask(hlo, &klo, i2, -1, probe); err != nil {
		t.Fatal(err)
	}
	if err := PairMask(hhi, &khi, i, -1, probe); err != nil {
		t.Fatal(err)
	}
	w := make([]E, n) // what holder i sends (no permutation, no sigma mask: both cancel in A)
	for row := range n {
		w[row] = z[row] + hlo[row] - hhi[row]
	}
	ch, err := NewChallenges[E](&kv, i, -1)
	if err != nil {
		t.Fatal(err)
	}
	// The weights grown in two steps, the first of an odd row count
	// when n allows (a pair split across them at k = 8).
	rs := ch.Grow(nil, 0, 0, n/2)
	rs = ch.Grow(rs, 0, n/2, n)
	xi, xn := make([]E, CheckRounds*d), make([]E, CheckRounds*d)
	col := make([]E, n)
	for k := range d {
		for row := range n {
			col[row] = x[i][row][k]
		}
		Accumulate(xi, d, k, rs, 0, col)
		for row := range n {
			col[row] = x[i1][row][k]
		}
		Accumulate(xn, d, k, rs, 0, col)
	}
	a, b := make([]E, CheckRounds), make([]E, CheckRounds)
	back := make([]E, n)
	for row := range n {
		back[row] = w[row] + hhi[row]
	}
	// A's sums from an odd row on, as a view's later chunk may start.
	cut := n / 2
	WeightedSums(a, rs, 0, back[:cut])
	WeightedSums(a, rs, cut, back[cut:])
	WeightedSums(b, rs, 0, hlo)
	bl, err := NewBlinds[E](&kv, i, -1, probe, d)
	if err != nil {
		t.Fatal(err)
	}
	low, high := make([]E, CheckPartSize(d)), make([]E, CheckPartSize(d))
	CheckLow(low, xi, y[i], b, bl)
	CheckHigh(high, xn, y[i1], a, bl)
	return CheckDelta(low, high, d)
}

// TestCheckHonest: 10,000 honest product shares (random shares, both
// rings, every holder) all pass their check.
func TestCheckHonest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for q := range 10_000 {
		n, d, i := 1+r.IntN(40), 1+r.IntN(12), q%Holders
		ok := false
		if q%2 == 0 {
			ok = checkRun[uint8](t, r, n, d, i, nil)
		} else {
			ok = checkRun[uint16](t, r, n, d, i, nil)
		}
		if !ok {
			t.Fatalf("honest check %d (n %d, d %d, holder %d) refused", q, n, d, i)
		}
	}
}

// TestCheckTampered: a product share shifted at chosen rows, by any
// amount (2^(k-1) included, which an even weight alone would miss), fails
// its check every time.
func TestCheckTampered(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for q := range 2_000 {
		n, d, i := 2+r.IntN(40), 1+r.IntN(8), q%Holders
		rows := []int{r.IntN(n)}
		if q%3 == 0 {
			rows = append(rows, r.IntN(n))
		}
		shift := uint64(1 + r.IntN(1<<16-1))
		if q%4 == 0 {
			shift = 1 << 15
		}
		changed := false
		tamper16 := func(z []uint16) {
			was := append([]uint16(nil), z...)
			for _, row := range rows {
				z[row] += uint16(shift)
			}
			changed = !slices.Equal(was, z)
		}
		tamper8 := func(z []uint8) {
			was := append([]uint8(nil), z...)
			for _, row := range rows {
				z[row] += uint8(shift) | uint8(shift>>15)<<7
			}
			changed = !slices.Equal(was, z)
		}
		var ok bool
		if q%2 == 0 {
			ok = checkRun(t, r, n, d, i, tamper8)
		} else {
			ok = checkRun(t, r, n, d, i, tamper16)
		}
		if ok && changed {
			t.Fatalf("check %d: holder %d's share shifted by %d at rows %v passed", q, i, shift, rows)
		}
	}
}

// TestProbeContext: two probes under one query id (an entry may choose
// it) still get their own masks and blinds: their context holds the
// device's nonce, which every holder runs once.
func TestProbeContext(t *testing.T) {
	var pair [32]byte
	qid := [16]byte{1}
	a, b := ProbeContext(qid, [16]byte{2}, 100), ProbeContext(qid, [16]byte{3}, 100)
	if a == b || a == ProbeContext(qid, [16]byte{2}, 101) {
		t.Fatal("a probe context does not depend on the nonce and time")
	}
	ba, err := NewBlinds[uint16](&pair, 0, -1, a, 4)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := NewBlinds[uint16](&pair, 0, -1, b, 4)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(ba.Ay, bb.Ay) || slices.Equal(ba.AX, bb.AX) {
		t.Fatal("two probes of one query id share their blinds")
	}
}
