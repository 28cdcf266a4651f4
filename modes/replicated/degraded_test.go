package replicated_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/modes/replicated"
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
// degradedLimit is the degraded limit that server name's health answer
// tells an operator.
func (c *cluster) degradedLimit(name string) uint32 {
	c.t.Helper()
	h, err := c.client("client", "").Health(ctx(c.t), name)
	if err != nil {
		c.t.Fatalf("%s's health: %v", name, err)
	}
	return h.DegradedLimit
}

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
			if mf.GetName() == metric && label == "" && len(m.GetLabel()) == 0 { // a gauge without labels
				return m.GetGauge().GetValue()
			}
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

// TestDegradedChanges: with p3 down, enrollments (sealed) and a deletion
// through p1 and p2 commit; identify answers them, degraded; p1 restarts
// meanwhile (its held parts come back from its log); when p3 is back it
// gets every change it missed, in order, and answers checked again with
// the new rows, through every entry; the held parts are then erased
// from p1's log.
func TestDegradedChanges(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, ids := enrollAll(t, cl, 5, 41)
	cl.halt("p3")
	more := templates(6, 42)
	for k, entry := range []string{"p1", "p2"} {
		part := more[3*k : 3*k+3]
		if err := cl.client("client", entry).Enroll(ctx(t), items(part, "late-"+entry)); err != nil {
			t.Fatalf("enroll through %s with p3 down: %v", entry, err)
		}
		xs = append(xs, part...)
		for i := range part {
			ids = append(ids, fmt.Sprintf("late-%s-%d", entry, i))
		}
	}
	deleted := ids[1]
	if err := cl.client("client", "p1").Delete(ctx(t), deleted); err != nil {
		t.Fatalf("delete with p3 down: %v", err)
	}
	check := func(entry string, degraded bool) bool {
		t.Helper()
		for q := range 3 {
			y := xs[len(xs)-1-q*4]
			want := plain(t, cl.p, xs, y)
			r, err := cl.client("device", entry).Identify(ctx(t), y, len(xs))
			if err != nil {
				t.Fatalf("entry %s: %v", entry, err)
			}
			if r.Degraded != degraded {
				return false
			}
			if len(r.Candidates) != len(xs)-1 {
				t.Fatalf("entry %s: %d candidates of %d live rows", entry, len(r.Candidates), len(xs)-1)
			}
			for _, cd := range r.Candidates {
				i := slices.Index(ids, cd.ID)
				if i < 0 || cd.ID == deleted || int(cd.Score) != want[i] {
					t.Fatalf("entry %s: %s scored %d, plaintext %v", entry, cd.ID, cd.Score, want)
				}
			}
		}
		return true
	}
	if !check("p2", true) {
		t.Fatal("an answer with p3 down not flagged degraded")
	}
	cl.restart("p1")
	cl.start("p3", cl.p)
	for _, entry := range []string{"p1", "p2", "p3"} {
		deadline := time.Now().Add(15 * time.Second)
		for !check(entry, false) {
			if time.Now().After(deadline) {
				t.Fatalf("p3 back 15 s ago; entry %s still answers degraded", entry)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Held parts are erased once delivered (p1's: an enrollment and a
	// deletion).
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, intact := cl.heldParts("p1")
		if held < 2 {
			t.Fatalf("p1's log holds %d held records; want its enrollment and its deletion", held)
		}
		if intact == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of p1's held parts are still in its log after p3 came back", intact)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heldParts counts a holder's held records (rowtxn's type 4) and those
// whose part is still in its log.
func (c *cluster) heldParts(name string) (held, intact int) {
	b := store.Binding{Kind: replicated.Kind, Cluster: c.p.ClusterID(), Member: name, Mode: string(c.p.Mode())}
	if _, err := store.Scan(filepath.Join(c.dir, name+".log"), b, func(e store.Entry) error {
		if e.Type == 4 {
			held++
			if slices.ContainsFunc(e.Tail, func(x byte) bool { return x != 0 }) {
				intact++
			}
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return held, intact
}
