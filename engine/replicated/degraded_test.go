package replicated_test

import (
	"slices"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
)

// halt stops one server as if it crashed (its listener gone).
func (c *cluster) halt(name string) {
	c.mu.Lock()
	stop := c.stop[name]
	delete(c.stop, name)
	c.mu.Unlock()
	stop()
}

// gauge reads a gauge of server name by metric and label value.
func (c *cluster) gauge(name, metric, label string) float64 {
	c.mu.Lock()
	reg := c.regs[name]
	c.mu.Unlock()
	mfs, err := reg.Gather()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == metric && l.GetValue() == label {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestDegraded: with any one holder down, every query through either live
// holder is answered with exactly the plaintext's scores, flagged degraded
// and counted; a client whose entry is the down holder identifies through
// another; once the holder is back, answers are checked again (not
// degraded) with no action.
func TestDegraded(t *testing.T) {
	for _, c := range []struct {
		gallery string
		beta    int
	}{{"", 21}, {"4:20,20,20,25", 63}} {
		t.Run("gallery="+c.gallery, func(t *testing.T) {
			cl := startCluster(t, config.Literal{GalleryLevels: c.gallery, Beta: c.beta, RevealScores: true}, nil)
			xs, ids := enrollAll(t, cl, 20, 3)
			exact := func(r *protocol.IdentifyOK, y []float32) {
				t.Helper()
				want := plain(t, cl.p, xs, y)
				if len(r.Candidates) != len(xs) {
					t.Fatalf("%d candidates of %d rows", len(r.Candidates), len(xs))
				}
				for _, cd := range r.Candidates {
					if i := slices.Index(ids, cd.ID); i < 0 || int(cd.Score) != want[i] {
						t.Fatalf("%s scored %d, plaintext %v", cd.ID, cd.Score, want)
					}
				}
			}
			for d, down := range []string{"p1", "p2", "p3"} {
				cl.halt(down)
				for e := range 3 {
					entry := cl.p.Party(e).Name
					before := cl.counter(entry, "idface_repl_degraded_total", "")
					cli := cl.client("device", entry)
					for q := range 2 {
						y := xs[(d*7+e*3+q)%len(xs)]
						r, err := cli.Identify(ctx(t), y, len(xs))
						if err != nil {
							t.Fatalf("%s down, entry %s: %v", down, entry, err)
						}
						if !r.Degraded {
							t.Fatalf("%s down, entry %s: an answer not flagged degraded", down, entry)
						}
						exact(r, y)
					}
					if entry == down {
						if cli.Entry() == down {
							t.Fatalf("the client still names %s, which is down, its entry", down)
						}
						continue
					}
					if cl.counter(entry, "idface_repl_degraded_total", "") < before+2 || cl.gauge(entry, "idface_repl_down", down) != 1 {
						t.Fatalf("entry %s with %s down: degraded answers not counted, or the outage not shown", entry, down)
					}
				}
				cl.start(down, cl.p)
				for e := range 3 {
					entry := cl.p.Party(e).Name
					deadline := time.Now().Add(10 * time.Second)
					for {
						y := xs[e]
						r, err := cl.client("device", entry).Identify(ctx(t), y, len(xs))
						if err != nil {
							t.Fatalf("%s back, entry %s: %v", down, entry, err)
						}
						exact(r, y)
						if !r.Degraded {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s is back, but entry %s still answers degraded", down, entry)
						}
						time.Sleep(100 * time.Millisecond)
					}
					if entry != down && cl.gauge(entry, "idface_repl_down", down) != 0 {
						t.Fatalf("entry %s still shows %s down", entry, down)
					}
				}
			}
		})
	}
}
