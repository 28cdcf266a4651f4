package rowtxn

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/members"
	"github.com/idface/idface/protocol"
)

// slowShares is a share store whose row counts take a while to read, like
// a large store: it widens the moment in which a waiter reads the digest,
// so that commits racing the wait land there often.
type slowShares struct {
	*memShares
	read time.Duration
}

func (s slowShares) Live() int {
	busy(s.read)
	return s.memShares.Live()
}

// busy waits d without sleeping (a sleep would let the scheduler round it
// up to much more).
func busy(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// newTestCore is party p1 of a three-party cluster (d = 70, 32-byte
// shares) with the given request timeout; reading a segment's live count
// takes read.
func newTestCore(t *testing.T, timeout, read time.Duration) *Core[slowShares] {
	t.Helper()
	p, err := config.New(config.Literal{Mode: testMode, Dim: 70, Timeout: config.Duration(timeout),
		Parties: []config.Member{members.Member(t, "p1", "a", ""), members.Member(t, "p2", "b", ""), members.Member(t, "p3", "c", "")}}, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(engine.Env{Params: p, Self: "p1", Metrics: prometheus.NewRegistry(), Log: slog.New(slog.DiscardHandler),
		PairKeys: map[string][32]byte{"p2": {7}, "p3": {8}}}, Options[slowShares]{
		ShareSize: 32, NewShares: func() (slowShares, error) { return slowShares{&memShares{size: 32}, read}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sealed is a row map as p2 sends it to c (p1).
func sealed(t *testing.T, c *Core[slowShares], g protocol.Digest) protocol.Digest {
	t.Helper()
	s, err := c.SealFor("p2", g)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// putRow is origin 1's transaction adding row seq.
func putRow(seq int) *protocol.Prepare {
	return &protocol.Prepare{Txn: protocol.TxnID{byte(seq), byte(seq >> 8), 0xAA}, Origin: 1, Dim: 70, Base: uint32(seq),
		Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: uint32(seq), ID: fmt.Sprintf("r-%d", seq), Share: make([]byte, 32)}}}
}

// commit applies a decided transaction the way OnDecide does: under the
// write lock, through settle.
func commit(c *Core[slowShares], p *protocol.Prepare) error {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	return c.settle(&pendingTxn{prep: p, tail: -1}, true, false)
}

// TestAwaitDigestWakesOnConcurrentChange (audit: "lost wake-up in
// awaitDigest"): a helper waiting for its row map to reach the entry's
// digest is woken by the commit that makes it match, whenever that commit
// lands relative to the wait: before it starts, between reading the digest
// and blocking, or while it blocks. A wake-up lost in between would leave
// the waiter asleep until the digest wait ends and the query would be
// refused as inconsistent; here every wait must succeed well before that.
func TestAwaitDigestWakesOnConcurrentChange(t *testing.T) {
	const read = 10 * time.Microsecond // a digest read takes 3 of them
	c := newTestCore(t, 4*time.Second, read)
	deadline := c.p.Timeouts().DigestWait // 1 s
	if deadline < time.Second {
		t.Fatalf("digest wait %v: too short to tell a wake-up from the deadline", deadline)
	}
	// The digest the waiter wants comes from a second row map one commit
	// ahead of c.
	ahead, err := newState(70, 32, 3, c.p.ClusterID(), func() (*memShares, error) { return &memShares{size: 32}, nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		err  *protocol.Error
		took time.Duration
	}
	const iterations = 200
	begin := time.Now()
	for i := range iterations {
		p := putRow(i)
		if _, _, err := ahead.apply(&pendingTxn{prep: p, tail: -1}); err != nil {
			t.Fatal(err)
		}
		want := sealed(t, c, ahead.digest())
		c.RLock()
		same := sealed(t, c, c.Digest()).Equal(want)
		c.RUnlock()
		if same {
			t.Fatalf("iteration %d: the digest matches before the change", i)
		}
		// Both goroutines run at once (one per core) before either goes
		// on: started one after the other, the waiter could read and
		// block before the commit even began, and nothing would race.
		start := make(chan struct{})
		var running atomic.Int32
		together := func() {
			<-start
			running.Add(1)
			for running.Load() < 2 {
				runtime.Gosched()
			}
		}
		res := make(chan result, 1)
		go func() {
			together()
			t0 := time.Now()
			err := c.AwaitDigest(ctx, "p2", want)
			res <- result{err, time.Since(t0)}
		}()
		applied := make(chan error, 1)
		go func() {
			together()
			switch {
			case i%20 == 0: // the waiter is (almost surely) blocked already
				time.Sleep(2 * time.Millisecond)
			default: // shift the commit across the waiter's read-then-block
				busy(time.Duration(i%16) * read / 4)
			}
			applied <- commit(c, p)
		}()
		close(start)
		if err := <-applied; err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil {
			t.Fatalf("iteration %d: the waiter returned %v after %v (digest wait %v): the commit that made the digests match did not wake it", i, r.err, r.took, deadline)
		}
		if r.took >= deadline/2 {
			t.Fatalf("iteration %d: the waiter took %v of its %v: it was not woken by the commit", i, r.took, deadline)
		}
	}
	t.Logf("%d waits in %v", iterations, time.Since(begin))
}

// TestAwaitDigestRefusesALastingDifference: the other half of the
// contract: a digest that never comes is refused at the deadline, and a
// cancelled request stops waiting at once.
func TestAwaitDigestRefusesALastingDifference(t *testing.T) {
	c := newTestCore(t, 400*time.Millisecond, 0) // digest wait 100 ms
	ahead, _ := newState(70, 32, 3, c.p.ClusterID(), func() (*memShares, error) { return &memShares{size: 32}, nil })
	ahead.apply(&pendingTxn{prep: putRow(0), tail: -1})
	want := sealed(t, c, ahead.digest())
	t0 := time.Now()
	err := c.AwaitDigest(context.Background(), "p2", want)
	if err == nil || err.Code != protocol.CodeInconsistent {
		t.Fatalf("a digest that never comes: %v", err)
	}
	if took := time.Since(t0); took < c.p.Timeouts().DigestWait {
		t.Fatalf("refused after %v, before the digest wait of %v", took, c.p.Timeouts().DigestWait)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.AwaitDigest(ctx, "p2", want); err == nil || err.Code != protocol.CodeUnavailable {
		t.Fatalf("a cancelled wait: %v", err)
	}
	// A digest that matches already is accepted at once.
	c.RLock()
	have := c.Digest()
	c.RUnlock()
	if err := c.AwaitDigest(context.Background(), "p2", sealed(t, c, have)); err != nil {
		t.Fatal(err)
	}
}

// TestAwaitDigestWantsTheSealedDigest (review 17, item 6): the row map an
// entry sends is sealed with the key the two servers share. The same row
// map unsealed (its set hash keyed only with the cluster id, which clients
// hold), or sealed for another pair, is refused: nothing but the pair key
// makes a digest that a helper accepts.
func TestAwaitDigestWantsTheSealedDigest(t *testing.T) {
	c := newTestCore(t, 400*time.Millisecond, 0)
	if err := commit(c, putRow(0)); err != nil {
		t.Fatal(err)
	}
	c.RLock()
	g := c.Digest()
	c.RUnlock()
	fromP3, err := c.SealFor("p3", g)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]protocol.Digest{"unsealed": g, "sealed for p3": fromP3} {
		if err := c.AwaitDigest(context.Background(), "p2", want); err == nil || err.Code != protocol.CodeInconsistent {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if err := c.AwaitDigest(context.Background(), "p2", sealed(t, c, g)); err != nil {
		t.Fatal(err)
	}
	// No key, no comparison: a server does not compare with itself or
	// with a server it shares no key with.
	if _, err := c.SealFor("p1", g); err == nil {
		t.Fatal("sealed a digest for itself")
	}
}
