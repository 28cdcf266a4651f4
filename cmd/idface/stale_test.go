package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
)

// TestStatusNamesStaleHolder (issue 35 item 4): p3 is restored from a copy
// older than a reshare and a deletion. 'cluster status' called it DIFFERS
// and unreachable, and every identify was refused. p3 now stands down,
// and status names it stale, with what to do (rebuild it: a reshare
// cannot be caught up), while the others answer degraded.
func TestStatusNamesStaleHolder(t *testing.T) {
	tau := 0.5
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeReplicated, Dim: 128, Tau: &tau, Timeout: config.Duration(5 * time.Second)}, 3))
	ctx := inproc.Ctx(t, 30*time.Second)
	op := c.Client("client", "p1")
	if err := op.Enroll(ctx, inproc.Items(inproc.Templates(4, 128, 7), "a")); err != nil {
		t.Fatal(err)
	}
	c.RestoreBehind("p3", func() {
		if _, err := op.Reshare(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
		if err := op.Delete(ctx, "a-1"); err != nil {
			t.Fatal(err)
		}
	})
	// Within seconds it says it is behind; once it has tried to catch up, that
	// it cannot, and to rebuild it.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, code := statusExit(t, c, "client", false)
		var line string
		for l := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(l, "p3 ") {
				line = l
			}
		}
		if !strings.Contains(line, "STALE: p3 stands down until rebuilt: stale, behind p1 and p2 on origin p1's changes (1 missing)") {
			if time.Now().After(deadline) { // a lag that lasts staleAfter (3 s), not a change in flight
				t.Fatalf("status with p3 restored behind: its line does not say it is stale (exit %d)\n%s", code, out)
			}
			continue
		}
		if strings.Contains(line, "It cannot catch up: origin p1's rows were reshared after this copy was made") && strings.Contains(line, "idface party rebuild") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status with p3 restored behind a reshare, 20 s on: its line does not say to rebuild it\n%s", out)
		}
	}
	out, _ := statusExit(t, c, "client", false)
	if !strings.Contains(out, "DEGRADED") {
		t.Errorf("status with p3 standing down does not say the others answer degraded:\n%s", out)
	}
}
