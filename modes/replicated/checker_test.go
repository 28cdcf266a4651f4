package replicated_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

// typeCounter counts the frames of one message type a member writes to
// another (a frame's 4-byte length may come alone, its body next).
type typeCounter struct {
	mu     sync.Mutex
	t      protocol.Type
	n      int
	header bool
}

func (c *typeCounter) tap(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	is := func(b []byte) bool { return len(b) >= 2 && b[0] == protocol.Version && protocol.Type(b[1]) == c.t }
	switch {
	case len(p) > 4 && is(p[4:]), c.header && is(p):
		c.n++
	}
	c.header = len(p) == 4
}

func (c *typeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestRefusedHiddenLooksAnswered (issue 44 item 3): a helper, a checker
// of its neighbours' products, used to read the outcome of its own check
// from whether the decider fetched the answer's tags (it did so only for
// queries whose checks passed), and the entry read which check failed
// from the refusal. Now a refused hidden probe gets the same fetch, at
// each helper, as an answered one, and its refusal names no holder.
func TestRefusedHiddenLooksAnswered(t *testing.T) {
	c, xs, ids := hiddenCluster(t)
	dec := c.p.DeciderName()
	counters := map[string]*typeCounter{}
	for _, h := range []string{"p2", "p3"} {
		counters[h] = &typeCounter{t: protocol.TTagAsk}
		c.net.SetFault(dec, h, memnet.Fault{Corrupt: counters[h].tap})
	}
	asks := func() (int, int) { return counters["p2"].count(), counters["p3"].count() }
	const n = 6
	for q := range n { // honest: answered
		r, err := c.client("device", "p1").Identify(ctx(t), xs[q], 1)
		if err != nil || !r.Accepted || r.Candidates[0].ID != ids[q] {
			t.Fatalf("honest probe %d: %v %+v", q, err, r)
		}
	}
	a2, a3 := asks()
	if a2 != n || a3 != n {
		t.Fatalf("%d answered probes: the decider asked p2 %d and p3 %d times for tags", n, a2, a3)
	}
	// p3 deviates in its product share of every row: every probe is
	// refused (but about one in 64..256, whose shift is 0).
	var undo []func()
	for row := range 30 {
		undo = append(undo, replicated.CorruptShare(c.holders["p3"], row/10, row%10, 3))
	}
	defer func() {
		for _, u := range undo {
			u()
		}
	}()
	refusals := 0
	for q := range n {
		_, err := c.client("device", "p1").Identify(ctx(t), xs[q], 1)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), replicated.RefusedHidden) || strings.Contains(err.Error(), "p3 (") {
			t.Fatalf("refused probe %d: %v; want the one refusal, naming no holder", q, err)
		}
		refusals++
	}
	if refusals < n-1 {
		t.Fatalf("%d of %d probes refused with p3 deviating", refusals, n)
	}
	b2, b3 := asks()
	if b2-a2 != n || b3-a3 != n {
		t.Fatalf("%d refused or answered probes: the decider asked p2 %d and p3 %d times for tags; want %d each, as for answered ones", n, b2-a2, b3-a3, n)
	}
}
