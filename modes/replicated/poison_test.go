package replicated_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// No share from a single source (issue 44 item 1). p1 holds s_0 and s_1;
// p2 holds s_1 and s_2, and takes s_1 from p1 alone when it is rebuilt or
// catches up. p1 adds G(mallory), the gallery form of a face of its
// choosing that was never enrolled, to its copy of s_1 of the victim's row
// and then serves p2's fetch honestly from that store. Before share
// records, both copies of s_1 then agreed, every check compared p1 with
// itself, and mallory's captures were accepted as the victim, checked.
// Now p2 checks s_1 against the record p3 keeps of it: the rows are
// refused, p1 is named, and no checked answer is wrong.

// lose stops holder name and deletes its log, as a lost disk: the path of
// its new log and an environment to rebuild it as name.
func (c *cluster) lose(name string) (string, engine.Env) {
	c.t.Helper()
	c.halt(name)
	path := filepath.Join(c.dir, name+".log")
	if err := os.Remove(path); err != nil {
		c.t.Fatal(err)
	}
	return path, engine.Env{Params: c.p, Self: name, Net: c.dialer(name), Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(err error) { c.t.Error(err) }}
}

// gallery is G(x): the gallery vector the cluster's levels give x.
func gallery(t *testing.T, p *config.Params, x []float32) []int8 {
	t.Helper()
	g, err := template.TransformLevels(x, p.GalleryLevels())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int8, len(g))
	for i, v := range g {
		out[i] = int8(v)
	}
	return out
}

// neverAimed identifies mallory through every entry for a while and fails
// on any answer that is checked (not degraded) and accepts victim.
func neverAimed(t *testing.T, c *inproc.Cluster, mallory []float32, victim string, d time.Duration) (checked int) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, entry := range []string{"p1", "p2", "p3"} {
			r, err := c.Client("device", entry).Identify(ctx(t), mallory, 1)
			if err != nil {
				continue // refused, or the entry stands down
			}
			if !r.Degraded {
				checked++
				if r.Accepted && len(r.Candidates) > 0 && r.Candidates[0].ID == victim {
					t.Fatalf("entry %s accepted mallory as %s, checked (not degraded): a planted share was taken", entry, victim)
				}
			}
		}
	}
	return checked
}

// TestPoisonedCatchUp: p2 is restored from a copy that misses the
// victim's enrollment, so it catches up from p1 and p3; p1 planted
// mallory in its copy of s_1 of that row first.
func TestPoisonedCatchUp(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("hidden=%v", hide), func(t *testing.T) {
			c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true, HideProbes: hide}))
			xs := templates(8, 71)
			if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:4], "early")); err != nil {
				t.Fatal(err)
			}
			victim, mallory := xs[4], xs[7]
			c.RestoreBehind("p2", func() {
				if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[4:6], "late")); err != nil {
					t.Fatal(err)
				}
				replicated.PlantShare(c.Engine("p1"), "late-0", true, gallery(t, c.P, mallory))
			})
			_ = victim
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(c.Metrics("p2"), `idface_repl_fetch_refused_total{pair="p1/p3"}`) {
				if time.Now().After(deadline) {
					t.Fatalf("p2 did not refuse p1's rows within 30 s:\n%s", metricLines(c.Metrics("p2"), "idface_repl_fetch"))
				}
				time.Sleep(200 * time.Millisecond)
			}
			// (The metric counts the refusal a moment before the reason
			// it stands down says it.)
			for {
				_, err := c.Agreement("p2")
				if err != nil && strings.Contains(err.Error(), "p2 stands down") && strings.Contains(err.Error(), "the share p1 sent does not match the record p3 keeps of it") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("p2 after refusing p1's rows: %v; want it to stand down naming p1", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			neverAimed(t, c, mallory, "late-0", 4*time.Second)
		})
	}
}

// TestPoisonedRebuild: p2 lost its data and is rebuilt from p1 and p3;
// p1 planted mallory in its copy of s_1 of an old row. The rebuild is
// refused naming p1, and leaves no log behind.
func TestPoisonedRebuild(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, ids := enrollAll(t, cl, 9, 73)
	mallory := templates(1, 74)[0]
	path, env := cl.lose("p2")
	cl.mu.Lock()
	p1 := cl.holders["p1"]
	cl.mu.Unlock()
	replicated.PlantShare(p1, ids[2], true, gallery(t, cl.p, mallory))
	_, err := replicated.Rebuild(ctx(t), env, path, nil)
	if err == nil || !strings.Contains(err.Error(), "the share p1 sent does not match the record p3 keeps of it") {
		t.Fatalf("a rebuild from a planted share: %v", err)
	}
	if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("the refused rebuild left its log: %v", serr)
	}
	_ = xs
}

// TestRebuildAfterReshare: honest rows reshared, then a holder lost and
// rebuilt: the records the reshare's holders attested check its shares.
func TestRebuildAfterReshare(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, ids := enrollAll(t, cl, 9, 75)
	for _, h := range []string{"p1", "p2", "p3"} {
		if _, err := cl.client("client", h).Reshare(ctx(t), h); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []string{"p1", "p2", "p3"} {
		cl.mu.Lock()
		mfs, err := cl.regs[h].Gather()
		cl.mu.Unlock()
		if err != nil || !slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "idface_repl_records_unattested" }) {
			t.Fatalf("%s has no gauge idface_repl_records_unattested (%v)", h, err)
		}
		if n := cl.gauge(h, "idface_repl_records_unattested", ""); n != 0 {
			t.Fatalf("%s: %v rows without an attested record after the reshares", h, n)
		}
	}
	path, env := cl.lose("p2")
	if _, err := replicated.Rebuild(ctx(t), env, path, nil); err != nil {
		t.Fatalf("an honest rebuild after reshares: %v", err)
	}
	cl.start("p2", cl.p)
	y := xs[4]
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := cl.client("device", "p2").Identify(ctx(t), y, len(xs))
		if err == nil && !r.Degraded {
			want := plain(t, cl.p, xs, y)
			for _, cd := range r.Candidates {
				for i, id := range ids {
					if id == cd.ID && int(cd.Score) != want[i] {
						t.Fatalf("%s scored %d, plaintext %d", id, cd.Score, want[i])
					}
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p2 rebuilt after reshares 15 s ago: %v %+v", err, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFsckBehindAndReshared (issue 44 item 5): a copy that both misses
// changes and missed a reshare of the same origin cannot catch up; fsck
// used to advise the catch-up and now says to rebuild it.
func TestFsckBehindAndReshared(t *testing.T) {
	c, _, _ := staleCluster(t)
	c.RestoreBehind("p3", func() {
		if err := c.Client("client", "p1").Enroll(ctx(t), items(templates(2, 77), "more")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client("client", "p1").Reshare(ctx(t), "p1"); err != nil {
			t.Fatal(err)
		}
	})
	c.Stop("p3")
	var out bytes.Buffer
	problems := fsck(t, c, "p3", &out)
	if len(problems) != 1 || !strings.Contains(problems[0], "behind p1 and p2 on origin p1's changes (2 missing) and reshares") || !strings.Contains(problems[0], "idface party rebuild") {
		t.Fatalf("fsck of a copy behind and before a reshare: %q\n%s", problems, out.String())
	}
}

// TestGarbledCatchUpNamesPeer (issue 44 item 2, in part): p2 is restored
// from a copy that misses rows enrolled through p1, and p1 garbles the type
// byte of its answers to p2's catch-up fetch. p2 cannot catch up (the
// fetch needs both peers: each holds one of p2's two shares of a row) and
// stays out; it now names p1 in a metric and its stand-down reason.
func TestGarbledCatchUpNamesPeer(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(6, 79)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:3], "early")); err != nil {
		t.Fatal(err)
	}
	c.RestoreBehind("p2", func() {
		if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:], "late")); err != nil {
			t.Fatal(err)
		}
		c.Net.SetFault("p1", "p2", memnet.Fault{Corrupt: func(p []byte) {
			for _, off := range []int{4, 0} {
				if len(p) > off+1 && p[off] == protocol.Version && p[off+1] == byte(protocol.TReplRows) {
					p[off+1] = 0xEE
					return
				}
			}
		}})
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.Metrics("p2"), `idface_repl_catchup_failed_total{peer="p1"}`) {
		if time.Now().After(deadline) {
			t.Fatalf("p2's failed catch-up did not name p1 within 30 s:\n%s", metricLines(c.Metrics("p2"), "idface_repl_catchup"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Agreement("p2"); err == nil || !strings.Contains(err.Error(), "p2 stands down") || !strings.Contains(err.Error(), "p1") {
		t.Fatalf("p2 kept out by p1: %v; want it to stand down naming p1", err)
	}
}

// TestStaleHolderOutAtStart (issue 44 item 5): a holder restored from an
// older copy used to serve its older rows for about three seconds before
// it stood down, and queries at a healthy entry were refused meanwhile
// ("p3's rows differ"). It now compares before it serves: from the start,
// the healthy entries answer (degraded until it has caught up).
func TestStaleHolderOutAtStart(t *testing.T) {
	c, xs, _ := staleCluster(t)
	c.RestoreBehind("p3", func() {
		if err := c.Client("client", "p1").Enroll(ctx(t), items(templates(2, 81), "late")); err != nil {
			t.Fatal(err)
		}
	})
	for q := range 10 {
		if _, err := c.Client("device", "p1").Identify(ctx(t), xs[q], 1); err != nil {
			t.Fatalf("query %d through p1 right after p3 came back behind: %v", q, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
