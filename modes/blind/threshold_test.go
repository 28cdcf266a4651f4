package blind_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

// ternaryProbe is a float template whose T_beta is itself: +-1 on beta
// random coordinates, 0 elsewhere.
func ternaryProbe(r *rand.Rand, d, beta int) []float32 {
	y := make([]float32, d)
	for _, j := range r.Perm(d)[:beta] {
		y[j] = float32(1 - 2*r.IntN(2))
	}
	return y
}

// ternaryRow is a float template whose T_alpha is itself and scores
// exactly s against the ternary probe y: it agrees with y on a of y's
// coordinates, disagrees on b (a - b = s) and puts the rest of its weight
// outside y's support, with m = a + b as small as the room outside allows.
func ternaryRow(t *testing.T, r *rand.Rand, y []float32, alpha, s int) []float32 {
	t.Helper()
	var in, out []int
	for j, v := range y {
		if v != 0 {
			in = append(in, j)
		} else {
			out = append(out, j)
		}
	}
	m := max(s, -s, alpha-len(out))
	if (m-s)%2 != 0 {
		m++
	}
	if m > min(alpha, len(in)) {
		t.Fatalf("no row of weight %d scores %d against a probe of weight %d in d = %d", alpha, s, len(in), len(y))
	}
	a, b := (m+s)/2, (m-s)/2
	r.Shuffle(len(in), func(i, k int) { in[i], in[k] = in[k], in[i] })
	r.Shuffle(len(out), func(i, k int) { out[i], out[k] = out[k], out[i] })
	x := make([]float32, len(y))
	for i, j := range in[:a+b] {
		x[j] = y[j]
		if i >= a {
			x[j] = -y[j]
		}
	}
	for _, j := range out[:alpha-m] {
		x[j] = float32(1 - 2*r.IntN(2))
	}
	return x
}

// TestThresholdBoundary crafts gallery rows whose plaintext scores against
// a probe are exactly the maximum min(alpha, beta) (the probe's support
// inside the row's, signs agreeing), the threshold, the threshold - 1, 0 and
// the minimum -min(alpha, beta), for a ring of 8 bits (alpha = beta = 127:
// the maximum is 2^7 - 1, the minimum next to the deleted rows' -2^7) and
// of 16 bits (alpha = beta = 341). The rule is the one of 2PC/MPC
// (modes/mpcface: accepted iff the best score >= Params.Threshold(), the
// least integer above tau*||G||*||Q||): the row at the threshold is
// accepted, the one at threshold - 1 is not, the maximum wins. Both answer
// policies: decisions only (the decider applies the threshold) and
// reveal_scores (the decider returns every live row, the entry judges).
func TestThresholdBoundary(t *testing.T) {
	for _, c := range []struct {
		dim, alpha, beta, bits int
	}{{128, 127, 127, 8}, {512, 341, 341, 16}} {
		for _, reveal := range []bool{false, true} {
			t.Run(fmt.Sprintf("k=%d/d=%d/reveal=%v", c.bits, c.dim, reveal), func(t *testing.T) {
				tau := 0.25
				cl := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeBlind, Dim: c.dim, Alpha: c.alpha, Beta: c.beta,
					Tau: &tau, Timeout: config.Duration(10 * time.Second), MaxTopK: 100, RevealScores: reveal}, 2))
				testThresholdBoundary(t, cl, c.bits)
			})
		}
	}
}

func testThresholdBoundary(t *testing.T, cl *inproc.Cluster, bits int) {
	p := cl.P
	if got := p.Ring().Bits; got != bits {
		t.Fatalf("ring of %d bits, want %d", got, bits)
	}
	top, thr := min(p.Alpha(), p.Beta()), p.Threshold()
	if !(0 < thr-1 && thr < top) {
		t.Fatalf("threshold %d, maximum %d: not a boundary test", thr, top)
	}
	r := rand.New(rand.NewPCG(uint64(bits), 7))
	y := ternaryProbe(r, p.Dim(), p.Beta())
	want := map[string]int{"max": top, "at": thr, "below": thr - 1, "zero": 0, "min": -top}
	rows := map[string][]float32{}
	for id, s := range want {
		rows[id] = ternaryRow(t, r, y, p.Alpha(), s)
		if got := plain(t, p, [][]float32{rows[id]}, y)[0]; got != s {
			t.Fatalf("row %s scores %d in plaintext, crafted for %d", id, got, s)
		}
	}
	// Two segments: max and min enrolled through p2, the rest through p1.
	for entry, ids := range map[string][]string{"p1": {"below", "at", "zero"}, "p2": {"min", "max"}} {
		var it []protocol.Item
		for _, id := range ids {
			it = append(it, protocol.Item{ID: id, Template: rows[id]})
		}
		if err := cl.Client("client", entry).Enroll(ctx(t), it); err != nil {
			t.Fatal(err)
		}
	}
	reveal := p.RevealScores()
	live := []string{"max", "at", "below", "zero", "min"} // best first
	check := func(stage string) {
		t.Helper()
		var accepted []string // the rows at or above the threshold
		for _, id := range live {
			if want[id] >= thr {
				accepted = append(accepted, id)
			}
		}
		for _, entry := range []string{"p1", "p2"} {
			for _, k := range []int{1, 10} {
				res, err := cl.Client("device", entry).Identify(ctx(t), y, k)
				if err != nil {
					t.Fatalf("%s, entry %s: %v", stage, entry, err)
				}
				var got []string
				for _, cd := range res.Candidates {
					got = append(got, cd.ID)
					if reveal && int(cd.Score) != want[cd.ID] {
						t.Fatalf("%s: %s scored %d, plaintext %d", stage, cd.ID, cd.Score, want[cd.ID])
					}
					if !reveal && cd.Score != 0 {
						t.Fatalf("%s: a hidden-score cluster revealed %s's score %d", stage, cd.ID, cd.Score)
					}
				}
				exp := accepted
				if reveal {
					exp = live
				}
				exp = exp[:min(k, len(exp))]
				if !slices.Equal(got, exp) || res.ScoresHidden == reveal || res.Accepted != (len(accepted) > 0) {
					t.Fatalf("%s, entry %s, top %d: candidates %v accepted %v; want %v accepted %v (threshold %d, scores %v)",
						stage, entry, k, got, res.Accepted, exp, len(accepted) > 0, thr, want)
				}
			}
		}
	}
	check("all rows: the maximum wins, the threshold is accepted, threshold - 1 is not")
	for _, id := range []string{"max", "at"} {
		if err := cl.Client("client", "p1").Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		live = slices.DeleteFunc(live, func(s string) bool { return s == id })
		check("after deleting " + id)
	}
}

// TestRingTooNarrowRefused: blind mode derives its share ring from the
// transform; levels whose scores do not fit Z_(2^16) are refused when the
// configuration is read, in blind and in replicated mode (which derives
// with blind.Derive), never wrapped at query time.
func TestRingTooNarrowRefused(t *testing.T) {
	// 16 levels of 32 coordinates: |score| up to 32*(1+4+...+256) = 47872.
	wide := "16:" + strings.Repeat("32,", 15) + "32"
	for _, mode := range []config.Mode{config.ModeBlind, "replicated"} {
		mu := 2
		if mode == "replicated" {
			mu = 3
		}
		tau := 0.25
		lit := inproc.Literal(config.Literal{Mode: mode, Dim: 512, Alpha: 341, Beta: 341, GalleryLevels: wide, QueryLevels: wide,
			Tau: &tau, Timeout: config.Duration(time.Second), MaxTopK: 10}, mu)
		_, err := config.New(lit, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "does not fit Z_(2^16)") {
			t.Errorf("%s: levels %s: %v, want a refusal naming the ring", mode, wide, err)
		}
		lit.GalleryLevels, lit.QueryLevels = "", ""
		p, err := config.New(lit, t.TempDir())
		if err != nil {
			t.Fatalf("%s: ternary: %v", mode, err)
		}
		if got := p.Ring().Bits; got != 16 {
			t.Errorf("%s: ternary beta = alpha = 341: a ring of %d bits, want 16", mode, got)
		}
	}
}
