package blind_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// In-process blind clusters: mu share holders and a decider over
// network/memnet with the real engines and logs.

const dim = 128

func templates(n int, seed uint64) [][]float32 { return inproc.Templates(n, dim, seed) }

func items(xs [][]float32, prefix string) []protocol.Item { return inproc.Items(xs, prefix) }

func ctx(t *testing.T) context.Context { return inproc.Ctx(t, 30*time.Second) }

func start(t *testing.T, mu int, lit config.Literal) *inproc.Cluster {
	lit.Mode = config.ModeBlind
	lit.Dim = dim
	if lit.Tau == nil {
		tau := 0.25
		lit.Tau = &tau
	}
	if lit.Timeout == 0 {
		lit.Timeout = config.Duration(10 * time.Second)
	}
	if lit.MaxTopK == 0 {
		lit.MaxTopK = 1000
	}
	return inproc.Start(t, inproc.Literal(lit, mu))
}

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

// TestExact compares every score with the plaintext, for mu = 2 and 3 and
// rings of 8 and 16 bits (the ternary gallery with beta <= 127 is k = 8; a
// 4-level gallery needs k = 16), through every entry, then deletes.
func TestExact(t *testing.T) {
	for _, c := range []struct {
		mu      int
		gallery string
		beta    int
		bits    int
	}{{2, "", 21, 8}, {3, "", 21, 8}, {2, "4:2,6,19,58", 21, 8}, {2, "4:20,20,20,25", 63, 16}, {3, "4:20,20,20,25", 63, 16}} {
		t.Run(fmt.Sprintf("mu=%d/gallery=%s/beta=%d/k=%d", c.mu, c.gallery, c.beta, c.bits), func(t *testing.T) {
			cl := start(t, c.mu, config.Literal{GalleryLevels: c.gallery, Beta: c.beta, RevealScores: true})
			if got := cl.P.Ring().Bits; got != c.bits {
				t.Fatalf("ring of %d bits, want %d", got, c.bits)
			}
			xs := templates(40*c.mu, 1)
			var ids []string
			for k, m := range cl.P.Parties() {
				part := xs[40*k : 40*(k+1)]
				if err := cl.Client("client", m.Name).Enroll(ctx(t), items(part, m.Name)); err != nil {
					t.Fatal(err)
				}
				for i := range part {
					ids = append(ids, fmt.Sprintf("%s-%d", m.Name, i))
				}
			}
			deleted := ""
			check := func(entry string) {
				for q := range 4 {
					y := xs[q*9]
					want := plain(t, cl.P, xs, y)
					r, err := cl.Client("device", entry).Identify(ctx(t), y, len(xs))
					if err != nil {
						t.Fatal(err)
					}
					live := len(xs)
					if deleted != "" {
						live--
					}
					if len(r.Candidates) != live {
						t.Fatalf("%d candidates of %d live rows", len(r.Candidates), live)
					}
					for j, cd := range r.Candidates {
						i := slices.Index(ids, cd.ID)
						if cd.ID == deleted || int(cd.Score) != want[i] {
							t.Fatalf("%s: %s scored %d, plaintext %d", entry, cd.ID, cd.Score, want[i])
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
			for _, m := range cl.P.Parties() {
				check(m.Name)
			}
			deleted = "p1-5"
			if err := cl.Client("client", cl.P.Party(c.mu-1).Name).Delete(ctx(t), deleted); err != nil {
				t.Fatal(err)
			}
			check("p1")
			for _, m := range cl.P.Parties() {
				cl.Restart(m.Name)
			}
			check(cl.P.Party(c.mu - 1).Name)
		})
	}
}

// TestThresholdAndExtremes: a probe equal to an enrolled template scores
// the gallery-query maximum; the answer policy returns exactly the rows at
// or above the integer threshold, without scores.
func TestThresholdAndExtremes(t *testing.T) {
	cl := start(t, 2, config.Literal{Beta: 21})
	xs := templates(60, 2)
	if err := cl.Client("client", "").Enroll(ctx(t), items(xs, "r")); err != nil {
		t.Fatal(err)
	}
	for q := range 20 {
		y := xs[q]
		want := plain(t, cl.P, xs, y)
		r, err := cl.Client("device", "").Identify(ctx(t), y, 10)
		if err != nil {
			t.Fatal(err)
		}
		above := 0
		for _, s := range want {
			if s >= cl.P.Threshold() {
				above++
			}
		}
		if len(r.Candidates) != min(above, 10) || !r.ScoresHidden || r.Accepted != (above > 0) {
			t.Fatalf("probe %d: %d candidates, %d rows at or above %d", q, len(r.Candidates), above, cl.P.Threshold())
		}
		for _, cd := range r.Candidates {
			var i int
			fmt.Sscanf(cd.ID, "r-%d", &i)
			if want[i] < cl.P.Threshold() || cd.Score != 0 {
				t.Fatalf("probe %d revealed %s (plaintext %d)", q, cd.ID, want[i])
			}
		}
		if r.Candidates[0].ID != fmt.Sprintf("r-%d", q) {
			t.Fatalf("probe %d: best %s", q, r.Candidates[0].ID)
		}
	}
}

// TestDeciderDown: a decider that is down or silent gives a clear error
// before the device's deadline.
func TestDeciderDown(t *testing.T) {
	cl := start(t, 2, config.Literal{Beta: 21, Timeout: config.Duration(time.Second)})
	if err := cl.Client("client", "").Enroll(ctx(t), items(templates(5, 3), "a")); err != nil {
		t.Fatal(err)
	}
	cl.Net.SetFault("decider", "p1", memnet.Fault{Silent: true})
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err := cl.Client("device", "p1").Identify(c, templates(1, 4)[0], 1)
	if err == nil || !strings.Contains(err.Error(), "decider") || time.Since(t0) > 3*time.Second {
		t.Fatalf("silent decider: %v after %v", err, time.Since(t0))
	}
	cl.Net.SetFault("decider", "p1", memnet.Fault{})
	cl.Stop("decider")
	_, err = cl.Client("device", "p1").Identify(c, templates(1, 4)[0], 1)
	var pe *protocol.Error
	if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), "decider") {
		t.Fatalf("decider down: %v", err)
	}
}
