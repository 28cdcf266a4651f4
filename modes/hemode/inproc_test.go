package hemode_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// In-process HE clusters: mu local servers and a key server over
// network/memnet with the real engines, logs and group files (d = 64 to
// keep encryption quick).

const dim = 64

func templates(n int, seed uint64) [][]float32 { return inproc.Templates(n, dim, seed) }

func items(xs [][]float32, prefix string) []protocol.Item { return inproc.Items(xs, prefix) }

func start(t *testing.T, mu int) *inproc.Cluster {
	return startWith(t, mu, 15*time.Second)
}

func startWith(t *testing.T, mu int, timeout time.Duration) *inproc.Cluster {
	tau := 0.25
	return inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeHE, Dim: dim, Beta: 16, Tau: &tau,
		Timeout: config.Duration(timeout)}, mu))
}

func ctx(t *testing.T) context.Context { return inproc.Ctx(t, 60*time.Second) }

// best is the plaintext answer: the ids above the threshold, best first
// (lower row on ties), at most k.
func best(t *testing.T, p *config.Params, rows [][]float32, ids []string, y []float32, k int) []string {
	ty, _ := template.Transform(y, p.Beta())
	type m struct {
		id    string
		score int
	}
	var all []m
	for i, x := range rows {
		tx, _ := template.Transform(x, p.Alpha())
		if s := tx.Dot(ty); s >= p.Threshold() && ids[i] != "" {
			all = append(all, m{ids[i], s})
		}
	}
	for i := 1; i < len(all); i++ {
		for j := i; j > 0 && all[j].score > all[j-1].score; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	var out []string
	for _, a := range all[:min(k, len(all))] {
		out = append(out, a.id)
	}
	return out
}

// agree checks that every local server finds its row map equal to every
// other's (the comparison an operator asks for) and returns each one's row
// map as the key server sees it (set hashes sealed per pair: comparable
// for one local server over time; counts comparable across them).
func agree(t *testing.T, c *inproc.Cluster) []protocol.Digest {
	t.Helper()
	var out []protocol.Digest
	for _, m := range c.P.Parties() {
		peers, err := c.Agreement(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.State != protocol.PeerAgrees {
				t.Fatalf("%s: local server %s %v (%s)", m.Name, p.Name, p.State, p.Note)
			}
		}
		g, err := c.RowMap(m.Name, "key")
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 && (g[0].Rows != out[0][0].Rows || g[0].Live != out[0][0].Live) {
			t.Fatalf("%s: %s, %s: %s", c.P.Party(0).Name, out[0].Diff(g), m.Name, g.Diff(out[0]))
		}
		out = append(out, g)
	}
	return out
}

func TestInProcess(t *testing.T) {
	for _, mu := range []int{1, 2} {
		t.Run(fmt.Sprintf("local_servers=%d", mu), func(t *testing.T) {
			c := start(t, mu)
			xs := templates(120, 1)
			var ids []string
			for i := range xs {
				ids = append(ids, fmt.Sprintf("r-%d", i))
			}
			entry := c.P.Party(mu - 1).Name // through a participant when there is one
			if err := c.Client("client", entry).Enroll(ctx(t), items(xs[:100], "r")); err != nil {
				t.Fatal(err)
			}
			if err := c.Client("client", entry).Enroll(ctx(t), items(xs[100:], "r")[:0:0]); err == nil {
				t.Fatal("an empty enrollment was accepted")
			}
			rest := items(xs[100:], "x")
			for i := range rest {
				rest[i].ID = fmt.Sprintf("r-%d", 100+i)
			}
			if err := c.Client("client", entry).Enroll(ctx(t), rest); err != nil {
				t.Fatal(err)
			}
			agree(t, c)
			check := func() {
				for _, m := range c.P.Parties() {
					for q := 0; q < 4; q++ {
						y := xs[q*13]
						r, err := c.Client("device", m.Name).Identify(ctx(t), y, 2)
						if err != nil {
							t.Fatal(err)
						}
						want := best(t, c.P, xs, ids, y, 2)
						var got []string
						for _, cd := range r.Candidates {
							if cd.Score != 0 {
								t.Fatal("HE mode revealed a score")
							}
							got = append(got, cd.ID)
						}
						if fmt.Sprint(got) != fmt.Sprint(want) || r.Accepted != (len(want) > 0) {
							t.Fatalf("%s query %d: %v, plaintext %v", m.Name, q, got, want)
						}
					}
				}
			}
			check()
			if err := c.Client("client", entry).Delete(ctx(t), "r-13"); err != nil {
				t.Fatal(err)
			}
			ids[13] = ""
			agree(t, c)
			check()
			for _, m := range c.P.Parties() {
				c.Restart(m.Name)
			}
			agree(t, c)
			check()
		})
	}
}

// TestCrashBetweenPrepareAndCommit: the sequencer reserves and encrypts,
// the participant votes, and the sequencer cannot log its decision. After
// its restart the enrollment is aborted at both (slots burned, never
// reused) and the next one lands after the burned slots.
func TestCrashBetweenPrepareAndCommit(t *testing.T) {
	c := start(t, 2)
	cl := c.Client("client", "p2")
	xs := templates(30, 2)
	if err := cl.Enroll(ctx(t), items(xs[:10], "a")); err != nil {
		t.Fatal(err)
	}
	c.Storage["p1"] = inproc.FailAfter(1) // the reservation is written, the decision is not
	c.Restart("p1")
	if err := cl.Enroll(ctx(t), items(xs[10:20], "b")); err == nil {
		t.Fatal("enrollment acknowledged without a durable decision")
	}
	if err := c.Wait("p1", 10*time.Second); !errors.Is(err, inproc.ErrDisk) {
		t.Fatalf("the sequencer did not stop: %v", err)
	}
	delete(c.Storage, "p1")
	c.Restart("p1")
	var g protocol.Digest
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		h2, err2 := c.Client("client", "").Health(ctx(t), "p2")
		peers, err1 := c.Agreement("p1")
		if err1 == nil && err2 == nil && len(peers) == 1 && peers[0].State == protocol.PeerAgrees && h2.InDoubt == 0 {
			if g, err1 = c.RowMap("p1", "key"); err1 != nil {
				t.Fatal(err1)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("local servers did not settle: %v %v", err1, err2)
		}
	}
	if g[0].Live != 10 || g[0].Rows != 20 {
		t.Fatalf("after the abort: %d live of %d slots, want 10 of 20", g[0].Live, g[0].Rows)
	}
	if err := cl.Enroll(ctx(t), items(xs[20:], "c")); err != nil {
		t.Fatal(err)
	}
	r, err := cl.Identify(ctx(t), xs[25], 1)
	if err != nil || len(r.Candidates) != 1 || r.Candidates[0].ID != "c-5" {
		t.Fatalf("identify after the crash: %+v %v", r, err)
	}
}

// TestSilentKeyServer: a key server that never answers gives a clear error
// before the device's deadline.
func TestSilentKeyServer(t *testing.T) {
	c := startWith(t, 1, 2*time.Second) // an HE identify gets 4x: 8 s
	xs := templates(5, 3)
	if err := c.Client("client", "").Enroll(ctx(t), items(xs, "a")); err != nil {
		t.Fatal(err)
	}
	c.Net.SetFault("key", "p1", memnet.Fault{Silent: true})
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Client("device", "").Identify(cctx, xs[0], 1)
	if err == nil || !strings.Contains(err.Error(), "key") || cctx.Err() != nil {
		t.Fatalf("silent key server: %v", err)
	}
}
