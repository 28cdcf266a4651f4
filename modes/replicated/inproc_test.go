package replicated_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/modes/replicated"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

func templates(n int, seed uint64) [][]float32 { return inproc.Templates(n, dim, seed) }

func items(xs [][]float32, prefix string) []protocol.Item { return inproc.Items(xs, prefix) }

// plain returns every row's plaintext score <G(x), Q(y)>.
func plain(t *testing.T, p *config.Params, rows [][]float32, y []float32) []int {
	t.Helper()
	q, err := template.TransformLevels(y, p.QueryLevels())
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, x := range rows {
		g, _ := template.TransformLevels(x, p.GalleryLevels())
		out = append(out, template.DotInt8(g, q))
	}
	return out
}

// enrollAll enrolls n rows through every holder and returns the templates
// and ids in one order.
func enrollAll(t *testing.T, c *cluster, n int, seed uint64) ([][]float32, []string) {
	t.Helper()
	xs := templates(3*n, seed)
	var ids []string
	for k, m := range c.p.Parties() {
		part := xs[n*k : n*(k+1)]
		if err := c.client("client", m.Name).Enroll(ctx(t), items(part, m.Name)); err != nil {
			t.Fatal(err)
		}
		for i := range part {
			ids = append(ids, fmt.Sprintf("%s-%d", m.Name, i))
		}
	}
	return xs, ids
}

// TestExact compares every score with the plaintext (a research cluster
// answers every row with its score), through every entry, for rings of 8
// and 16 bits, before and after a deletion and a restart of every holder,
// with probes shown to the holders and hidden from them.
func TestExact(t *testing.T) {
	for _, c := range []struct {
		gallery string
		beta    int
		bits    int
		hide    bool
	}{{"", 21, 8, false}, {"4:20,20,20,25", 63, 16, false}, {"", 21, 8, true}, {"4:20,20,20,25", 63, 16, true},
		{"", 0, 16, true}} { // a hidden-probe cluster's defaults: a dense 4-bit query, the 4-level gallery
		t.Run(fmt.Sprintf("gallery=%s/beta=%d/k=%d/hidden=%v", c.gallery, c.beta, c.bits, c.hide), func(t *testing.T) {
			cl := startCluster(t, config.Literal{GalleryLevels: c.gallery, Beta: c.beta, RevealScores: true, HideProbes: c.hide}, nil)
			if got := cl.p.Ring().Bits; got != c.bits {
				t.Fatalf("ring of %d bits, want %d", got, c.bits)
			}
			xs, ids := enrollAll(t, cl, 30, 1)
			deleted := ""
			check := func(entry string) {
				t.Helper()
				for q := range 3 {
					y := xs[q*17]
					want := plain(t, cl.p, xs, y)
					r, err := cl.client("device", entry).Identify(ctx(t), y, len(xs))
					if err != nil {
						t.Fatal(err)
					}
					live := len(xs)
					if deleted != "" {
						live--
					}
					if len(r.Candidates) != live {
						t.Fatalf("%s: %d candidates of %d live rows", entry, len(r.Candidates), live)
					}
					for j, cd := range r.Candidates {
						i := slices.Index(ids, cd.ID)
						if i < 0 || cd.ID == deleted || int(cd.Score) != want[i] {
							t.Fatalf("%s: %s scored %d, plaintext %v", entry, cd.ID, cd.Score, want)
						}
						if j > 0 && cd.Score > r.Candidates[j-1].Score {
							t.Fatal("candidates out of order")
						}
					}
					if r.BytesTotal == 0 {
						t.Fatal("no bytes_total")
					}
				}
			}
			for _, m := range cl.p.Parties() {
				check(m.Name)
			}
			deleted = "p1-5"
			if err := cl.client("client", "p3").Delete(ctx(t), deleted); err != nil {
				t.Fatal(err)
			}
			check("p2")
			for _, m := range cl.p.Parties() {
				cl.restart(m.Name)
			}
			check("p1")
		})
	}
}

// TestMergedPasses: concurrent identifies through the three entries share
// passes over the holders' shares, and every answer equals the same
// identify run alone (scores in the same order, ids where untied, the
// same decision); a merged pass gives each query the vectors of its own
// pass (MergedPasses), for rings of 8 and 16 bits.
func TestMergedPasses(t *testing.T) {
	for _, c := range []struct {
		gallery string
		beta    int
	}{{"", 21}, {"4:20,20,20,25", 63}} {
		t.Run(fmt.Sprintf("gallery=%s/beta=%d", c.gallery, c.beta), func(t *testing.T) {
			cl := startCluster(t, config.Literal{GalleryLevels: c.gallery, Beta: c.beta, RevealScores: true, BatchMax: 4}, nil)
			xs := templates(90, 3)
			all := items(xs, "r") // ids r-i, in two origins' segments
			for k, part := range [][]protocol.Item{all[:50], all[50:]} {
				if err := cl.client("client", cl.p.Party(k).Name).Enroll(ctx(t), part); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range cl.p.Parties() {
				if err := replicated.MergedPasses(cl.holders[m.Name]); err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
			}
			const n = 18
			probes := templates(n, 4)
			probes[0] = xs[11]
			entry := func(i int) string { return cl.p.Party(i % 3).Name }
			topK := func(i int) int { return []int{1, 5, len(xs)}[i%3] }
			passes := func() (p, q float64) {
				for _, m := range cl.p.Parties() {
					p += cl.counter(m.Name, "idface_repl_passes_total", "")
					q += cl.counter(m.Name, "idface_repl_passed_total", "")
				}
				return p, q
			}
			p0, q0 := passes()
			var releases []func()
			for _, m := range cl.p.Parties() { // the identifies gather while the holders are held
				releases = append(releases, replicated.Hold(cl.holders[m.Name]))
			}
			got := make([]*protocol.IdentifyOK, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { got[i], errs[i] = cl.client("device", entry(i)).Identify(ctx(t), probes[i], topK(i)) })
			}
			time.Sleep(300 * time.Millisecond)
			for _, r := range releases {
				r()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			p1, q1 := passes()
			p1, q1 = p1-3, q1-3 // less the holds'
			if q1-q0 != 3*n || p1-p0 >= q1-q0 {
				t.Fatalf("%v queries scored in %v passes, want %d in fewer", q1-q0, p1-p0, 3*n)
			}
			t.Logf("%v queries in %v passes", q1-q0, p1-p0)
			for i := range n {
				alone, err := cl.client("device", entry(i)).Identify(ctx(t), probes[i], topK(i))
				if err != nil {
					t.Fatal(err)
				}
				inproc.SameAnswer(t, cl.p, plain(t, cl.p, xs, probes[i]), nil, got[i], alone)
			}
			if !got[0].Accepted {
				t.Fatalf("the genuine probe: %+v", got[0])
			}
		})
	}
}

// TestThreshold: a cluster that hides scores answers exactly the rows at
// or above the integer threshold (at most top-K, best first), without
// scores, the same as the plaintext, with probes shown and hidden.
func TestThreshold(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("hidden=%v", hide), func(t *testing.T) { testThreshold(t, hide) })
	}
}

func testThreshold(t *testing.T, hide bool) {
	cl := startCluster(t, config.Literal{Beta: 21, HideProbes: hide}, nil)
	xs, ids := enrollAll(t, cl, 20, 2)
	for q := range 12 {
		y := xs[q*5]
		if q%3 == 2 {
			y = templates(1, uint64(100+q))[0] // a stranger: usually rejected
		}
		want := plain(t, cl.p, xs, y)
		entry := cl.p.Party(q % 3).Name
		r, err := cl.client("device", entry).Identify(ctx(t), y, 5)
		if err != nil {
			t.Fatal(err)
		}
		above := 0
		for _, s := range want {
			if s >= cl.p.Threshold() {
				above++
			}
		}
		if len(r.Candidates) != min(above, 5) || !r.ScoresHidden || r.Accepted != (above > 0) {
			t.Fatalf("probe %d: %d candidates, %d rows at or above %d", q, len(r.Candidates), above, cl.p.Threshold())
		}
		best := slices.Max(want)
		for j, cd := range r.Candidates {
			i := slices.Index(ids, cd.ID)
			if i < 0 || want[i] < cl.p.Threshold() || cd.Score != 0 || (j == 0 && want[i] != best) {
				t.Fatalf("probe %d answered %s (plaintext %d, best %d)", q, cd.ID, want[i], best)
			}
		}
	}
}
