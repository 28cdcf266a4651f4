package replicated_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Degraded queries and the entry's word (issue 35): a deviating entry
// that names a holder down sends the decider one vector no other holder
// computes, and knows where each row lands in it.

// outageCluster is a cluster that hides scores, with 3 x 10 rows, and a
// request timeout long enough that a holder's health request, which
// decides whether a degraded query is served (2 s at most), never times
// out on a loaded machine.
func outageCluster(t *testing.T) (*cluster, [][]float32, []string) {
	c := startCluster(t, config.Literal{Beta: 21, Timeout: config.Duration(8 * time.Second)}, nil)
	xs, ids := enrollAll(t, c, 10, 7)
	return c, xs, ids
}

// raiseDelta is what the deviating entry adds (the review's figure).
const raiseDelta = 64

// chosen picks the rows a deviating entry aims at for probe y: up to 10
// rows below the threshold that its addition lifts above it (without
// passing the ring's largest score), the nearest first.
func chosen(t *testing.T, c *cluster, xs [][]float32, ids []string, y []float32) []string {
	t.Helper()
	want := plain(t, c.p, xs, y)
	top := 1<<(c.p.Ring().Bits-1) - 1
	thr := c.p.Threshold()
	var rows []int
	for i, s := range want {
		if s < thr && s+raiseDelta >= thr && s+raiseDelta <= top {
			rows = append(rows, i)
		}
	}
	slices.SortFunc(rows, func(a, b int) int { return want[b] - want[a] })
	if len(rows) < 5 {
		t.Fatalf("only %d rows within %d below the threshold %d: the test's rows do not suit it (scores %v)", len(rows), raiseDelta, thr, want)
	}
	var out []string
	for _, r := range rows[:min(10, len(rows))] {
		out = append(out, ids[r])
	}
	return out
}

// exact counts the scores l read that are the chosen rows' plaintext
// scores (a score read that is not would be the harness's mistake).
func exact(t *testing.T, c *cluster, xs [][]float32, y []float32, l replicated.Learned) int {
	t.Helper()
	want := plain(t, c.p, xs, y)
	for id, s := range l.Scores {
		if _, row := rowOf(t, id); want[row] != s {
			t.Fatalf("read %d for %s, whose plaintext score is %d", s, id, want[row])
		}
	}
	return len(l.Scores)
}

// TestFakedOutage (issue 35, found by review): entry p1 names a live
// helper down to the other helper and the decider, and adds 64 at the
// positions of 10 rows it chose in the vector that then goes unchecked
// (its next vector with p2 named down, its own with p3). It read the
// exact scores of all 30 chosen rows of 3 probes of nobody, all below the
// threshold. Now the helper and the decider each reach the holder named
// down themselves: every such query is refused, naming p1, counted, no
// degraded query is served, and p1 learns no score.
func TestFakedOutage(t *testing.T) {
	c, xs, ids := outageCluster(t)
	dec := c.p.DeciderName()
	learned, probes := 0, 0
	for down, name := range map[int]string{1: "p2", 2: "p3"} {
		for q := range 3 {
			y := templates(1, uint64(300+10*down+q))[0]
			raise := chosen(t, c, xs, ids, y)
			l := replicated.Deviate(c.holders["p1"], y, len(xs), replicated.Deviation{Down: down, Raise: raise, Delta: raiseDelta})
			probes++
			learned += exact(t, c, xs, y, l)
			if l.Err == nil {
				t.Errorf("%s named down while up, probe %d: answered %v (%d of %d chosen rows' scores read)", name, q, l.Answered, len(l.Scores), len(raise))
				continue
			}
			if msg := l.Err.Error(); !strings.Contains(msg, "entry p1 named "+name+" down") || !refused(l.Err) {
				t.Errorf("%s named down while up, probe %d: %v; want a refusal naming entry p1", name, q, l.Err)
			}
		}
	}
	if learned > 0 {
		t.Fatalf("p1 read the exact scores of %d rows it chose, over %d probes", learned, probes)
	}
	refusals := c.counter(dec, "idface_repl_degraded_refused_total", "reachable")
	for _, h := range []string{"p2", "p3"} {
		refusals += c.counter(h, "idface_repl_degraded_refused_total", "reachable")
	}
	if refusals < float64(probes) {
		t.Fatalf("%v refusals counted for %d queries", refusals, probes)
	}
	for _, s := range []string{"p2", "p3", dec} {
		if n := c.counter(s, "idface_repl_degraded_served_total", "p1"); n != 0 {
			t.Fatalf("%s served %v degraded queries of p1 with every holder up", s, n)
		}
	}
	// The cluster still answers, checked.
	if r, err := c.client("device", "p1").Identify(ctx(t), xs[3], 1); err != nil || r.Degraded || !r.Accepted {
		t.Fatalf("after the faked outages: %v %+v", err, r)
	}
}

// TestSlowedHealthIsNoOutage: the review's attack on TestFakedOutage's
// rule. The deviating entry p1 makes a live holder's health answer late
// (a pass that holds p2's rows, and a decision for a transaction p2 never
// saw, queued behind it for the write lock), then names p2 down. A late
// answer counts as an outage, so p2 must answer health requests without
// waiting for its rows' lock: the query is refused, no score read.
func TestSlowedHealthIsNoOutage(t *testing.T) {
	c, xs, ids := outageCluster(t)
	release := sync.OnceFunc(replicated.Hold(c.holders["p2"]))
	defer release()
	decided := make(chan error, 1)
	go func() {
		var txn protocol.TxnID
		txn[0] = 0xee // a transaction p2 never prepared
		_, err := rpc.Call(ctx(t), c.dialer("p1"), "p2", &protocol.Decide{Txn: txn, Origin: 0, Commit: true})
		decided <- err
	}()
	select { // it no longer waits for the write lock behind the held pass
	case err := <-decided:
		if err != nil {
			t.Fatalf("p1's decision of an unknown transaction: %v", err)
		}
	case <-time.After(time.Second):
		t.Log("p1's decision of an unknown transaction waits for p2's rows")
	}
	y := templates(1, 777)[0]
	raise := chosen(t, c, xs, ids, y)
	l := replicated.Deviate(c.holders["p1"], y, len(xs), replicated.Deviation{Down: 1, Raise: raise, Delta: raiseDelta})
	if n := exact(t, c, xs, y, l); n > 0 || l.Err == nil {
		t.Fatalf("p2 up but slowed: answered %v, %d chosen rows' scores read (%v)", l.Answered, n, l.Err)
	}
	if !strings.Contains(l.Err.Error(), "entry p1 named p2 down") || !refused(l.Err) {
		t.Fatalf("p2 up but slowed: %v; want a refusal naming entry p1", l.Err)
	}
}

// TestRealOutageDeviantEntry: the same entry while the holder it names
// down is really stopped. Its queries are served, degraded, but the
// decider answers the best row only, with no value, tag or score: the
// entry reads no chosen row's score.
func TestRealOutageDeviantEntry(t *testing.T) {
	c, xs, ids := outageCluster(t)
	for _, down := range []int{1, 2} {
		name := c.p.Party(down).Name
		c.halt(name)
		for q := range 3 {
			y := templates(1, uint64(400+10*down+q))[0]
			raise := chosen(t, c, xs, ids, y)
			l := replicated.Deviate(c.holders["p1"], y, len(xs), replicated.Deviation{Down: down, Raise: raise, Delta: raiseDelta})
			if l.Err != nil {
				t.Fatalf("%s stopped, probe %d: %v", name, q, l.Err)
			}
			if exact(t, c, xs, y, l) > 0 || l.Opened || len(l.Answered) > 1 {
				t.Fatalf("%s stopped, probe %d: read %d chosen rows' scores from %v (values, tags or scores: %v)", name, q, len(l.Scores), l.Answered, l.Opened)
			}
		}
		c.start(name, c.p)
	}
}

// TestDegradedHidden: in a cluster that hides scores, with any one holder
// down, every query through any entry is answered, flagged degraded, with
// the decision: the best row when it reaches the threshold (at most one
// candidate), else a rejection; once the holder is back, answers are
// checked again and list every row at the threshold.
func TestDegradedHidden(t *testing.T) {
	c, xs, _ := outageCluster(t)
	probes := append(templates(2, 500), xs[4], xs[15], xs[26])
	decision := func(r *protocol.IdentifyOK, y []float32) {
		t.Helper()
		want := plain(t, c.p, xs, y)
		best := slices.Max(want)
		if r.Accepted != (best >= c.p.Threshold()) || len(r.Candidates) > 1 || r.Accepted != (len(r.Candidates) == 1) {
			t.Fatalf("best %d (threshold %d): answered %+v", best, c.p.Threshold(), r)
		}
		if r.Accepted {
			if _, row := rowOf(t, r.Candidates[0].ID); want[row] != best || r.Candidates[0].Score != 0 {
				t.Fatalf("answered %+v, plaintext best %d", r.Candidates[0], best)
			}
		}
	}
	accepted := 0
	for _, down := range []string{"p1", "p2", "p3"} {
		c.halt(down)
		for e := range 3 {
			entry := c.p.Party(e).Name
			for _, y := range probes {
				r, err := c.client("device", entry).Identify(ctx(t), y, 5)
				if err != nil {
					t.Fatalf("%s down, entry %s: %v", down, entry, err)
				}
				if !r.Degraded {
					t.Fatalf("%s down, entry %s: an answer not flagged degraded", down, entry)
				}
				decision(r, y)
				if r.Accepted {
					accepted++
				}
			}
		}
		c.start(down, c.p)
		waitCheckedHere(t, c, xs[0])
	}
	if accepted == 0 {
		t.Fatal("no degraded answer accepted a row; the test shows nothing")
	}
}

// rowOf parses an id "pK-i" of enrollAll: the origin's index and the row
// index in the order of enrollAll's templates (10 rows an origin).
func rowOf(t *testing.T, id string) (int, int) {
	t.Helper()
	var k, i int
	if _, err := fmt.Sscanf(id, "p%d-%d", &k, &i); err != nil {
		t.Fatalf("candidate %q is no row of the test", id)
	}
	return k, 10*(k-1) + i
}

// waitCheckedHere waits until every entry answers checked again.
func waitCheckedHere(t *testing.T, c *cluster, y []float32) {
	t.Helper()
	for e := range 3 {
		entry := c.p.Party(e).Name
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			r, err := c.client("device", entry).Identify(ctx(t), y, 1)
			if err != nil {
				t.Fatalf("entry %s, the holders all back: %v", entry, err)
			}
			if !r.Degraded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("entry %s still answers degraded", entry)
			}
		}
	}
}

// TestDegradedLimit: each helper and the decider count the degraded
// queries they serve by entry, and serve one entry at most its limit:
// with degraded_rate 1 (a burst of 1) and every server's clock held
// still (no refill), p1's second degraded query is refused and counted
// (its turn is a second off, beyond the longest a query waits for one:
// DeciderWait/4 here), while p3's are still served.
func TestDegradedLimit(t *testing.T) {
	c := startCluster(t, config.Literal{Beta: 21, Timeout: config.Duration(8 * time.Second), DegradedRate: 1}, nil)
	xs, _ := enrollAll(t, c, 10, 7)
	dec := c.p.DeciderName()
	c.clock.hold(time.Now())
	c.halt("p2")
	if r, err := c.client("device", "p1").Identify(ctx(t), xs[0], 1); err != nil || !r.Degraded {
		t.Fatalf("p1's first degraded query: %v %+v", err, r)
	}
	_, err := c.client("device", "p1").Identify(ctx(t), xs[1], 1)
	if err == nil || !refused(err) || !strings.Contains(err.Error(), "degraded queries a second from entry p1") {
		t.Fatalf("p1's second degraded query: %v; want it refused for the limit", err)
	}
	if r, err := c.client("device", "p3").Identify(ctx(t), xs[2], 1); err != nil || !r.Degraded {
		t.Fatalf("p3's degraded query after p1's were refused: %v %+v", err, r)
	}
	for _, s := range []string{"p3", dec} {
		if n := c.counter(s, "idface_repl_degraded_served_total", "p1"); n != 1 {
			t.Fatalf("%s counts %v degraded queries served for p1, want 1", s, n)
		}
	}
	if n := c.counter(dec, "idface_repl_degraded_served_total", "p3"); n != 1 {
		t.Fatalf("the decider counts %v degraded queries served for p3, want 1", n)
	}
	if n := c.counter("p3", "idface_repl_degraded_refused_total", "limit") + c.counter(dec, "idface_repl_degraded_refused_total", "limit"); n < 1 {
		t.Fatal("p1's refusal for the limit was not counted")
	}
}

// TestTagsLostAskAgain: a helper that restarted between its part of a
// query and the decider's fetch of the answer's tags keeps none of them
// (as CI's TestRotateWithGrace met); the decider says ask again, and the
// entry runs the query once more under a fresh id and answers. Helpers
// that never keep them fail the identify after the entry's bounded runs,
// saying why. A fetch that names another query id (its first byte
// altered on the way) finds no tags at a helper that started within the
// tags' keep, as after a restart: the timeout of 2 minutes keeps them 8,
// longer than this test takes.
func TestTagsLostAskAgain(t *testing.T) {
	c := startCluster(t, config.Literal{Beta: 21, RevealScores: true, Timeout: config.Duration(2 * time.Minute)}, nil)
	xs, ids := enrollAll(t, c, 10, 3)
	dec := c.p.DeciderName()
	spoil := func(n int) []*askSpoiler {
		var ss []*askSpoiler
		for _, name := range []string{"p2", "p3"} {
			s := &askSpoiler{left: n}
			c.net.SetFault(dec, name, memnet.Fault{Corrupt: s.corrupt})
			ss = append(ss, s)
		}
		return ss
	}
	spoilt := spoil(1)
	r, err := c.client("device", "p1").Identify(ctx(t), xs[4], 1)
	if err != nil {
		t.Fatalf("an identify whose tags a helper lost once: %v", err)
	}
	for i, s := range spoilt {
		if s.left != 0 {
			t.Fatalf("the decider's first fetch from p%d was not altered", i+2)
		}
	}
	if len(r.Candidates) != 1 || r.Candidates[0].ID != ids[4] {
		t.Fatalf("answered %+v, want %s", r.Candidates, ids[4])
	}
	spoil(1000)
	_, err = c.client("device", "p1").Identify(ctx(t), xs[4], 1)
	if err == nil || !strings.Contains(err.Error(), "keeps no tags") {
		t.Fatalf("an identify whose tags the helpers never keep: %v, want a refusal that says so", err)
	}
}

// askSpoiler alters the first byte of the query id of the next left
// TagAsk frames a member writes.
type askSpoiler struct {
	mu   sync.Mutex
	left int
}

func (s *askSpoiler) corrupt(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := frameMsg(p, protocol.TTagAsk); ok && len(b) > 2 && s.left > 0 {
		s.left--
		b[2] ^= 0x01
	}
}

// TestAbandonedQueriesRaiseNoLimit (issue 47, from its review): the
// derived degraded limit counts checked queries the cluster answered,
// never ones an entry started and abandoned. Entry p1 runs 20 queries
// whose own part never reaches the decider (its link to the decider
// swallows every byte: the helpers' parts arrive, its own do not): the
// limits of the decider and of both helpers stay at the floor once the
// decider has given up on all 20. The same number of answered queries
// then raises them. Every server's clock is held still, so that
// every query lands in one window whatever the machine's speed. (Counting
// a query as its parts arrived, as the first version of the limit did,
// put the decider at 60 a second here; a helper that counted once it had
// sent its part put p2 and p3 at 60 after 40 abandoned queries, found by
// review.)
func TestAbandonedQueriesRaiseNoLimit(t *testing.T) {
	c, xs, _ := outageCluster(t)
	dec := c.p.DeciderName()
	c.clock.hold(time.Now())
	at := func(want func(uint32) bool, what string) {
		t.Helper()
		for _, name := range []string{dec, "p2", "p3"} {
			if got := c.degradedLimit(name); !want(got) {
				t.Fatalf("%s: %s's limit is %d a second", what, name, got)
			}
		}
	}
	at(func(l uint32) bool { return l == 20 }, "before any query (want the floor of 20)")
	const n = 20
	c.net.SetFault("p1", dec, memnet.Fault{Silent: true})
	var wg sync.WaitGroup
	for q := range n {
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx(t), 1500*time.Millisecond)
			defer cancel()
			if r, err := c.client("device", "p1").Identify(qctx, xs[q%len(xs)], 1); err == nil {
				t.Errorf("query %d answered (%+v) although its entry's part never reached the decider", q, r)
			}
		})
	}
	wg.Wait()
	c.net.SetFault("p1", dec, memnet.Fault{})
	if c.dec.Pending() == 0 {
		t.Fatal("no abandoned query reached the decider: the test would prove nothing")
	}
	// The decider gives each abandoned query up after its time (8 s here).
	for deadline := time.Now().Add(2 * time.Minute); c.dec.Pending() > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the decider still holds %d abandoned queries after two minutes", c.dec.Pending())
		}
	}
	at(func(l uint32) bool { return l == 20 }, fmt.Sprintf("after %d abandoned queries (want the floor of 20: abandoned queries are not counted)", n))
	for q := range n {
		if _, err := c.client("device", "p1").Identify(ctx(t), xs[q%len(xs)], 1); err != nil {
			t.Fatalf("answered query %d: %v", q, err)
		}
	}
	at(func(l uint32) bool { return l >= 30 }, fmt.Sprintf("after %d answered queries in one window (want at least 1.5 x %d = 30)", n, n))
}
