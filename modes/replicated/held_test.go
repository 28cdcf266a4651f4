package replicated_test

import (
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

// TestDecisionMissedBeforeHold (found by review): p3 votes on p1's T1 but
// misses its commit (queued in p1's outbox, in memory); p3 then goes down,
// p1 commits T2 holding it for p3, and p1 restarts, losing T1's decision
// from its outbox. When p3 is back, T2's prepare must settle T1 as p1
// decided it (it carries p1's previous decision), not abort it: checked
// answers resume with every row.
func TestDecisionMissedBeforeHold(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, _ := enrollAll(t, cl, 3, 51)
	// p1 -> p3: every Decide is garbled (p3 never gets T1's commit).
	cl.net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		if len(p) > 6 && p[5] == byte(protocol.TDecide) {
			p[4] ^= 0xff
		}
	}})
	t1 := templates(2, 52)
	if err := cl.client("client", "p1").Enroll(ctx(t), items(t1, "t1")); err != nil {
		t.Fatalf("T1: %v", err)
	}
	xs = append(xs, t1...)
	cl.halt("p3")
	cl.net.SetFault("p1", "p3", memnet.Fault{})
	t2 := templates(2, 53)
	if err := cl.client("client", "p1").Enroll(ctx(t), items(t2, "t2")); err != nil {
		t.Fatalf("T2 with p3 down: %v", err)
	}
	xs = append(xs, t2...)
	cl.restart("p1")
	cl.start("p3", cl.p)
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		r, err := cl.client("device", "p2").Identify(ctx(t), xs[0], len(xs))
		if err == nil && !r.Degraded && len(r.Candidates) == len(xs) {
			return
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("p3 back 15 s ago; checked answers with all %d rows never resumed: last error %v", len(xs), last)
}

// TestDeletionMissedBeforeHold: the same with T1 a deletion (p3 kept the
// deleted row live, silently).
func TestDeletionMissedBeforeHold(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, ids := enrollAll(t, cl, 3, 51)
	// p1 -> p3: every Decide is garbled (p3 never gets T1's commit).
	cl.net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		if len(p) > 6 && p[5] == byte(protocol.TDecide) {
			p[4] ^= 0xff
		}
	}})
	if err := cl.client("client", "p1").Delete(ctx(t), ids[0]); err != nil {
		t.Fatalf("T1 (deletion): %v", err)
	}
	live := len(xs) - 1
	cl.halt("p3")
	cl.net.SetFault("p1", "p3", memnet.Fault{})
	t2 := templates(2, 53)
	if err := cl.client("client", "p1").Enroll(ctx(t), items(t2, "t2")); err != nil {
		t.Fatalf("T2 with p3 down: %v", err)
	}
	xs = append(xs, t2...)
	live += len(t2)
	cl.restart("p1")
	cl.start("p3", cl.p)
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		r, err := cl.client("device", "p2").Identify(ctx(t), xs[0], len(xs))
		if err == nil && !r.Degraded && len(r.Candidates) == live {
			return
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("p3 back 15 s ago; checked answers with all %d live rows never resumed: last error %v", live, last)
}
