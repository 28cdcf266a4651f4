package replicated_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/idface/idface/engine/blind"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/inproc"
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
			if got := blind.Ring(cl.p).Bits; got != c.bits {
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
