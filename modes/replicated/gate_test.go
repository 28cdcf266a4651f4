package replicated

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/protocol"
)

// TestLimiter: an entry gets its burst at once, then one turn every
// 1/rate, waiting at most the given wait for it (a turn further off is
// refused and takes nothing); each entry has its own bucket; with no
// rate the burst is all.
func TestLimiter(t *testing.T) {
	l := newLimiter(10, 3)
	now := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		if d, ok := l.reserve(0, now, 0); !ok || d != 0 {
			t.Fatalf("turn %d of the burst: %v %v", i, d, ok)
		}
	}
	if d, ok := l.reserve(0, now, 50*time.Millisecond); ok {
		t.Fatalf("a turn 100 ms off, waiting at most 50 ms: taken (%v)", d)
	}
	if d, ok := l.reserve(0, now, time.Second); !ok || d != 100*time.Millisecond {
		t.Fatalf("the next turn: %v %v, want 100 ms", d, ok)
	}
	if d, ok := l.reserve(0, now, time.Second); !ok || d != 200*time.Millisecond {
		t.Fatalf("the turn after, owed: %v %v, want 200 ms", d, ok)
	}
	if _, ok := l.reserve(1, now, 0); !ok {
		t.Fatal("another entry waits for the first one's turns")
	}
	later := now.Add(time.Hour)
	for i := range 3 { // refilled to the burst, no more
		if _, ok := l.reserve(0, later, 0); !ok {
			t.Fatalf("an hour later, turn %d", i)
		}
	}
	if _, ok := l.reserve(0, later, 0); ok {
		t.Fatal("more than the burst after an hour")
	}
	l.set(0, 1)
	if _, ok := l.reserve(0, now, 0); !ok {
		t.Fatal("no rate: the burst refused")
	}
	if _, ok := l.reserve(0, later, time.Hour); ok {
		t.Fatal("no rate: a turn after the burst")
	}
	if err := l.take(context.Background(), 0, later, time.Hour); !errors.Is(err, errLimit) {
		t.Fatalf("take over the limit: %v", err)
	}
}

// TestReach: a failed contact confirms a holder down without a new one
// (while it is recent), a successful one is not kept (every question
// contacts the holder again), and concurrent questions share one contact;
// a holder that answers with a refusal is reachable.
func TestReach(t *testing.T) {
	var mu sync.Mutex
	var pings int
	var answer error
	release := make(chan struct{})
	r := &reach{wait: time.Second, failed: map[string]time.Time{}, flight: map[string]chan struct{}{},
		ping: func(context.Context, string) error {
			mu.Lock()
			wait := release
			mu.Unlock()
			<-wait
			mu.Lock()
			defer mu.Unlock()
			pings++
			return answer
		}}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return pings
	}
	set := func(err error) {
		mu.Lock()
		answer = err
		mu.Unlock()
	}
	close(release)
	if r.down("p2") || count() != 1 {
		t.Fatalf("a holder that answers: down, or %d contacts", count())
	}
	if r.down("p2") || count() != 2 {
		t.Fatalf("asked again: %d contacts, want a new one", count())
	}
	set(errors.New("no route"))
	if !r.down("p2") {
		t.Fatal("a holder that cannot be reached: not down")
	}
	n := count()
	if !r.down("p2") || count() > n+1 { // at most a contact in the background
		t.Fatalf("a recent failure: %d contacts, want at most one more", count()-n)
	}
	// A holder that refuses is up.
	r.failed = map[string]time.Time{}
	set(protocol.Errorf(protocol.CodeUnavailable, "busy"))
	if r.down("p3") {
		t.Fatal("a holder that refuses: down")
	}
	// Concurrent questions share a contact.
	set(errors.New("no route"))
	mu.Lock()
	release = make(chan struct{})
	mu.Unlock()
	r.failed = map[string]time.Time{}
	n = count()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if !r.down("p1") {
				t.Error("not down")
			}
		})
	}
	for {
		r.mu.Lock()
		_, started := r.flight["p1"]
		r.mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	close(release)
	mu.Unlock()
	wg.Wait()
	if count() != n+1 {
		t.Fatalf("4 concurrent questions made %d contacts", count()-n)
	}
}

// TestDerivedDegradedLimit (issue 47 item 1): without degraded_rate, an
// entry's degraded limit is 1.5 times the busiest second of checked
// queries of every entry together in the last 60 seconds that had any, at least 20 a
// second: an outage costs a busy cluster no throughput, and an entry that
// speeds up only once a holder is down stays at the cluster's old pace;
// an outage, however long, keeps the pace of the minute before it.
func TestDerivedDegradedLimit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := newRates(func() time.Time { return now })
	l := newLimiter(degradedFloor, degradedFloor)
	l.rateOf = r.derived
	if rate, burst := l.limits(0); rate != degradedFloor || burst != degradedFloor {
		t.Fatalf("no checked query yet: %v, %v; want the floor", rate, burst)
	}
	for range 1000 { // 100 a second for 10 s at entry 0
		r.observe()
		now = now.Add(10 * time.Millisecond)
	}
	if rate, burst := l.limits(0); rate != 150 || burst != 150 {
		t.Fatalf("after 100 checked queries a second: %v, %v; want 150", rate, burst)
	}
	if rate, _ := l.limits(1); rate != 150 {
		t.Fatalf("entry 1, idle: %v; want the cluster's 150 (its clients may move to it)", rate)
	}
	// An outage: the entry's degraded queries are not counted, and 150 a
	// second are served, not more.
	served := 0
	for i := range 400 {
		if _, ok := l.reserve(0, now.Add(time.Duration(i)*time.Millisecond), 0); ok {
			served++
		}
	}
	if want := 150 + 0.4*150; float64(served) < want-2 || float64(served) > want+1 { // the burst, and 0.4 s of refill
		t.Fatalf("400 degraded queries in 0.4 s: %d served; want the burst of 150 and 0.4 s of refill at 150 a second (%v)", served, want)
	}
	// A long outage keeps the pace before it, at every server alike:
	// the windows move on with checked queries only (before, a minute on
	// the limit fell to the floor: 50 ms a query).
	now = now.Add(time.Duration(3*rateWindows) * rateWindow)
	if rate, _ := l.limits(0); rate != 150 {
		t.Fatalf("three minutes into an outage: %v; want the 150 of the minute before it", rate)
	}
	// A few answered checked queries (the holder back for a moment)
	// leave the pace before them in place: they are windows of their own.
	for range 3 {
		r.observe()
		now = now.Add(2 * rateWindow)
	}
	if rate, _ := l.limits(0); rate != 150 {
		t.Fatalf("three checked queries three minutes into an outage: %v; want the 150 of the minute before it", rate)
	}
	// An hour on, that pace no longer sets the limit (rateHorizon).
	now = now.Add(rateHorizon)
	if rate, _ := l.limits(0); rate != degradedFloor {
		t.Fatalf("an hour after the last checked query: %v; want the floor", rate)
	}
	now = now.Add(-rateHorizon)
	// Checked queries again, at 10 a second for over a minute: the
	// windows before them are gone, the limit is the floor.
	for range 700 {
		r.observe()
		now = now.Add(100 * time.Millisecond)
	}
	if rate, _ := l.limits(0); rate != degradedFloor {
		t.Fatalf("a minute of 10 checked queries a second: %v; want the floor (15 is below it)", rate)
	}
}
