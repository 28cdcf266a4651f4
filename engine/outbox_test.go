package engine_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

// TestOutboxRetryHoldsNoLockForADeadServer (issue 38 item 3): while a
// server that missed a decision stays down, the outbox's background
// retry asks it for its health without the transaction lock, so a change
// arriving meanwhile never waits for the send timeout of a server it
// goes on without. Before, every retry flushed with the lock held and
// each change waited up to the send timeout (5 s) for it. A request the
// dead server receives while the lock is held counts against the retry:
// one, the first delivery that found it down, is allowed.
func TestOutboxRetryHoldsNoLockForADeadServer(t *testing.T) {
	p, err := config.New(inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64, Timeout: config.Duration(200 * time.Millisecond)}, 2), "")
	if err != nil {
		t.Fatal(err)
	}
	n := memnet.New()
	ln, err := n.Listen("p2")
	if err != nil {
		t.Fatal(err)
	}
	var txn sync.Mutex
	var locked, free atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ln.Serve(ctx, func(ctx context.Context, s *network.Stream) { // reads a request, never answers
		if _, err := s.ReadFrame(1 << 16); err != nil {
			return
		}
		if txn.TryLock() {
			txn.Unlock()
			free.Add(1)
		} else {
			locked.Add(1)
		}
		<-ctx.Done()
	})
	o := engine.NewOutbox(engine.Env{Params: p, Self: "p1", Net: n.Dialer(network.Peer{Name: "p1", Role: network.RoleParty}), Log: slog.New(slog.DiscardHandler)})
	o.Add("p2", &protocol.Decide{Commit: true})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { o.Run(rctx, &txn, p.Timeouts().OutboxRetry); close(done) }()
	deadline := time.Now().Add(2 * time.Minute)
	for free.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	if locked.Load() > 1 || free.Load() < 4 {
		t.Fatalf("the dead server got %d requests while the transaction lock was held (1 allowed: the first delivery) and %d without it", locked.Load(), free.Load())
	}
	if o.Len() != 1 {
		t.Fatalf("%d messages queued, want the undelivered decision", o.Len())
	}
}
