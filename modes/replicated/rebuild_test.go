package replicated_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/protocol"
)

// TestRebuild (issue 18 item 5): p2's log is deleted while it is down;
// meanwhile a batch is enrolled (held for p2) and a row deleted. p2 is
// rebuilt from p1 and p3, starts, gets the held changes (which it already
// has: nothing changes twice), and every entry then answers checked with
// exactly the plaintext's scores; p2's rows agree with both peers.
func TestRebuild(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, ids := enrollAll(t, cl, 12, 51)
	deleted := ids[3]
	if err := cl.client("client", "p3").Delete(ctx(t), deleted); err != nil {
		t.Fatal(err)
	}
	cl.halt("p2")
	path := filepath.Join(cl.dir, "p2.log")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	more := templates(3, 52)
	if err := cl.client("client", "p1").Enroll(ctx(t), items(more, "while-down")); err != nil {
		t.Fatalf("enroll with p2 down: %v", err)
	}
	xs = append(xs, more...)
	for i := range more {
		ids = append(ids, fmt.Sprintf("while-down-%d", i))
	}

	env := engine.Env{Params: cl.p, Self: "p2", Net: cl.dialer("p2"), Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(err error) { t.Error(err) }}
	rep, err := replicated.Rebuild(ctx(t), env, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Rows[0] + rep.Rows[1] + rep.Rows[2]; got != len(xs) {
		t.Fatalf("rebuilt %d rows (%v), the cluster has %d", got, rep.Rows, len(xs))
	}
	if _, err := replicated.Rebuild(ctx(t), env, path, nil); err == nil {
		t.Fatal("a rebuild over an existing log")
	}
	cl.start("p2", cl.p)

	for _, entry := range []string{"p1", "p2", "p3"} {
		deadline := time.Now().Add(15 * time.Second)
		for {
			y := xs[len(xs)-2]
			r, err := cl.client("device", entry).Identify(ctx(t), y, len(xs))
			if err != nil {
				t.Fatalf("entry %s after the rebuild: %v", entry, err)
			}
			want := plain(t, cl.p, xs, y)
			if len(r.Candidates) != len(xs)-1 {
				t.Fatalf("entry %s: %d candidates of %d live rows", entry, len(r.Candidates), len(xs)-1)
			}
			for _, cd := range r.Candidates {
				if i := slices.Index(ids, cd.ID); i < 0 || cd.ID == deleted || int(cd.Score) != want[i] {
					t.Fatalf("entry %s: %s scored %d, plaintext %v", entry, cd.ID, cd.Score, want)
				}
			}
			if !r.Degraded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("entry %s still answers degraded after the rebuild", entry)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	h, err := cl.client("client", "p2").ComparePeers(ctx(t), "p2")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range h.Peers {
		if q.State != protocol.PeerAgrees {
			t.Fatalf("p2's rows after the rebuild: %s %v (%s)", q.Name, q.State, q.Note)
		}
	}
}
