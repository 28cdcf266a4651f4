package tests

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/protocol"
)

// TestReplicatedHolderKilled: a replicated cluster of real processes under
// a steady identify load. A holder killed with SIGKILL, first a helper of
// the client's entry, then the entry itself: no answer is ever wrong, and
// every query started 5 s after the kill is answered (degraded, flagged);
// `cluster status --json` says "degraded"; once the holder runs again,
// answers are checked again with no operator action.
func TestReplicatedHolderKilled(t *testing.T) {
	dir, cfg, d, cl := replicatedCluster(t, 60, 21)
	ask := func(ctx context.Context, i int) (*protocol.IdentifyOK, error) {
		return cl.Identify(ctx, d.queries[i%len(d.queries)], 1)
	}
	// The checked answers, the reference for every later one.
	want := make([]*protocol.IdentifyOK, len(d.queries))
	for i := range want {
		r, err := ask(context.Background(), i)
		if err != nil || r.Degraded {
			t.Fatalf("query %d before any kill: %v %+v", i, err, r)
		}
		want[i] = r
	}
	same := func(i int, r *protocol.IdentifyOK) bool {
		w := want[i%len(want)]
		return r.Accepted == w.Accepted && slices.Equal(r.Candidates, w.Candidates)
	}

	for vi, victim := range []string{"p2", "p1"} {
		// A steady load: one query after another until stop.
		type outcome struct {
			start    time.Time
			took     time.Duration
			err      error
			degraded bool
		}
		var mu sync.Mutex
		var got []outcome
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				qctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				t0 := time.Now()
				r, err := ask(qctx, i)
				cancel()
				if err == nil && !same(i, r) {
					t.Errorf("query %d with %s killed: a wrong answer %+v, checked %+v", i, victim, r, want[i%len(want)])
				}
				mu.Lock()
				got = append(got, outcome{t0, time.Since(t0), err, err == nil && r.Degraded})
				mu.Unlock()
			}
		})
		time.Sleep(time.Second)
		if err := cluster.Kill(cfg, victim); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		time.Sleep(9 * time.Second)
		var status struct {
			Service string
			Servers []struct {
				Name          string
				Reachable     bool
				DegradedLimit *uint32 `json:"degraded_limit"`
			}
		}
		out, _, _ := idface(t, "cluster", "status", "--cluster", dir, "--json")
		if err := json.Unmarshal([]byte(out), &status); err != nil || status.Service != "degraded" {
			t.Errorf("%s killed: cluster status says service %q (%v): %s", victim, status.Service, err, out)
		}
		// Every holder up shows the limit it serves an entry degraded: at
		// least the floor of 20 a second.
		for _, st := range status.Servers {
			if st.Reachable && st.Name != "decider" && (st.DegradedLimit == nil || *st.DegradedLimit < 20) {
				t.Errorf("%s killed: cluster status shows %s's degraded limit as %v, want 20 or more: %s", victim, st.Name, st.DegradedLimit, out)
			}
		}
		if text, _, _ := idface(t, "cluster", "status", "--cluster", dir); !strings.Contains(text, "degraded limit, queries a second each holder serves an entry") {
			t.Errorf("%s killed: cluster status does not show the degraded limit:\n%s", victim, text)
		}
		stop()
		wg.Wait()
		// An enrollment with the holder down commits; the holder gets it
		// when it is back (checked below). Its template is a probe negated:
		// no probe of the load matches it, so their answers stay.
		newID := "late-" + victim
		lateTmpl := slices.Clone(d.queries[vi])
		for j := range lateTmpl {
			lateTmpl[j] = -lateTmpl[j]
		}
		q := filepath.Join(t.TempDir(), "late.npy")
		writeNpy(t, q, [][]float32{lateTmpl})
		if _, errs, code := idface(t, "enroll", "--cluster", dir, "--entry", "p3", "--id", newID, "--template", q); code != 0 {
			t.Fatalf("enroll with %s down: exit %d: %s", victim, code, errs)
		}
		late, degraded, early := 0, 0, 0
		var longest time.Duration
		for _, o := range got {
			longest = max(longest, o.took)
			if o.err != nil && o.start.Before(killed.Add(5*time.Second)) {
				early++
			}
			if o.start.Before(killed.Add(5 * time.Second)) {
				continue
			}
			late++
			if o.err != nil {
				t.Errorf("%s killed: a query %v after the kill failed: %v", victim, o.start.Sub(killed), o.err)
			}
			if o.degraded {
				degraded++
			}
		}
		if late == 0 || degraded != late {
			t.Fatalf("%s killed: %d of %d queries from 5 s after the kill answered degraded", victim, degraded, late)
		}
		t.Logf("%s killed: %d queries, %d from 5 s after the kill, all answered correctly, degraded; %d failed in the first 5 s; the longest took %v",
			victim, len(got), late, early, longest.Round(time.Millisecond))

		// Back: checked answers resume by themselves.
		must(t, "cluster", "up", "--cluster", dir)
		deadline := time.Now().Add(15 * time.Second)
		for i := 0; ; i++ {
			r, err := ask(context.Background(), i)
			if err != nil {
				t.Fatalf("%s restarted: %v", victim, err)
			}
			if !same(i, r) {
				t.Fatalf("%s restarted: a wrong answer %+v", victim, r)
			}
			if !r.Degraded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s restarted 15 s ago; answers are still degraded", victim)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The row enrolled while it was down, through a checked query.
		for deadline := time.Now().Add(15 * time.Second); ; {
			r, err := cl.Identify(context.Background(), lateTmpl, 1)
			if err == nil && !r.Degraded && len(r.Candidates) == 1 && r.Candidates[0].ID == newID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s restarted: the row enrolled while it was down is not answered checked: %v %+v", victim, err, r)
			}
			time.Sleep(200 * time.Millisecond)
		}
		out, _, code := idface(t, "cluster", "status", "--cluster", dir, "--json")
		if code != 0 || !strings.Contains(out, `"service":"checked"`) {
			t.Fatalf("%s restarted: cluster status exit %d: %s", victim, code, out)
		}
	}
}
