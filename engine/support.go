package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// AsError maps any error to a protocol error for the requester.
//
// A relayed refusal keeps its code, but for the codes a server only ever
// sets about itself and its own shards (CodeShardDown, CodeCountedDown):
// a peer's, relayed, would make a client ask another entry or a
// coordinator run a query again on a deviating server's say-so.
func AsError(err error, code protocol.Code) *protocol.Error {
	var e *protocol.Error
	if errors.As(err, &e) {
		if e.Code == protocol.CodeShardDown || e.Code == protocol.CodeCountedDown {
			return &protocol.Error{Code: protocol.CodeUnavailable, Msg: e.Msg}
		}
		return e
	}
	return protocol.Errorf(code, "%v", err)
}

// RandReader returns env's randomness, crypto/rand by default.
func (env Env) RandReader() io.Reader {
	if env.Rand != nil {
		return env.Rand
	}
	return rand.Reader
}

// NewTxnID draws a transaction id.
func (env Env) NewTxnID() (protocol.TxnID, error) {
	var t protocol.TxnID
	_, err := io.ReadFull(env.RandReader(), t[:])
	return t, err
}

// Broadcast sends req(k) to every server in to (in parallel) and checks
// each reply with ok; it returns the errors, indexed like to.
func Broadcast(ctx context.Context, d network.Dialer, to []string, req func(k int) protocol.Msg, ok func(protocol.Msg) error) []error {
	return BroadcastEach(ctx, d, to, req, func(_ int, m protocol.Msg) error { return ok(m) })
}

// BroadcastEach is Broadcast whose check also gets the index of the
// server that replied.
func BroadcastEach(ctx context.Context, d network.Dialer, to []string, req func(k int) protocol.Msg, ok func(k int, m protocol.Msg) error) []error {
	errs := make([]error, len(to))
	var wg sync.WaitGroup
	for k, name := range to {
		wg.Go(func() {
			resp, err := rpc.Call(ctx, d, name, req(k))
			if err == nil {
				err = ok(k, resp)
			}
			errs[k] = err
		})
	}
	wg.Wait()
	return errs
}

// Expect returns a reply check accepting only replies of type t.
func Expect(t protocol.Type) func(protocol.Msg) error {
	return func(m protocol.Msg) error {
		if m.Type() != t {
			return fmt.Errorf("unexpected answer %v", m.Type())
		}
		return nil
	}
}

// Outbox holds messages (decisions) that other servers have not
// acknowledged yet, per server, in order. They are retried in the
// background and before the next transaction, which must not start while
// a server still misses an earlier change.
type Outbox struct {
	mu   sync.Mutex
	q    map[string][]protocol.Msg
	net  network.Dialer
	log  *slog.Logger
	send time.Duration
	// failed is when each server last failed a delivery: a transaction's
	// flush does not wait for it again within holdoff (the background
	// retries do).
	failed map[string]time.Time
	// Delivered, when set, is called after each message a server confirms.
	Delivered func(to string, m protocol.Msg)
	kick      chan struct{} // Relay wakes Run
}

// holdoff is how long after a failed delivery a transaction's flush
// counts a server as missing without trying it again.
const holdoff = 5 * time.Second

// NewOutbox returns an empty outbox sending through env's network.
func NewOutbox(env Env) *Outbox {
	return &Outbox{q: map[string][]protocol.Msg{}, net: env.Net, log: env.Log, send: env.Params.Timeouts().OutboxSend, failed: map[string]time.Time{}, kick: make(chan struct{}, 1)}
}

// Add queues m for server to.
func (o *Outbox) Add(to string, m protocol.Msg) {
	o.queue(to, m)
	o.log.Warn("message not delivered; will retry", "to", to, "type", m.Type())
}

func (o *Outbox) queue(to string, m protocol.Msg) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.q[to] = append(o.q[to], m)
}

// Relay queues m for server to as Add does, without a warning: a change
// relayed to a party that may have missed it (engine/rowtxn/relay.go) is
// routine, not a failed delivery.
func (o *Outbox) Relay(to string, m protocol.Msg) {
	o.queue(to, m)
	select { // delivered at once (Run), not at the next retry
	case o.kick <- struct{}{}:
	default:
	}
}

// Len counts the unacknowledged messages.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ms := range o.q {
		n += len(ms)
	}
	return n
}

// Flush delivers every queued message in order; it fails naming the
// servers that still have not acknowledged. Callers serialise flushes (the
// engine's transaction lock); the queue stays readable meanwhile (Len,
// health), because network calls run without the outbox's lock.
func (o *Outbox) Flush(ctx context.Context) error {
	missing := o.flush(ctx, true)
	if len(missing) == 0 {
		return nil
	}
	var l []string
	for _, to := range slices.Sorted(maps.Keys(missing)) {
		l = append(l, fmt.Sprintf("%s (%s)", to, missing[to]))
	}
	return fmt.Errorf("servers have not confirmed an earlier change: %s", strings.Join(l, ", "))
}

// FlushMissing is Flush returning the servers that still miss a message
// (each with the reason). Unless retry, a server that failed a delivery
// within the last few seconds is not tried again (a change that may go on
// without it need not wait for its timeout each time).
func (o *Outbox) FlushMissing(ctx context.Context, retry bool) map[string]string {
	return o.flush(ctx, retry)
}

func (o *Outbox) flush(ctx context.Context, force bool) map[string]string {
	o.mu.Lock()
	queued := make(map[string][]protocol.Msg, len(o.q))
	for to, ms := range o.q {
		queued[to] = append([]protocol.Msg(nil), ms...)
	}
	o.mu.Unlock()
	missing := map[string]string{}
	for _, to := range slices.Sorted(maps.Keys(queued)) {
		o.mu.Lock()
		last, failed := o.failed[to]
		o.mu.Unlock()
		if !force && failed && time.Since(last) < holdoff {
			missing[to] = fmt.Sprintf("did not answer %v ago", time.Since(last).Round(time.Millisecond))
			continue
		}
		sent := 0
		for _, m := range queued[to] {
			cctx, cancel := context.WithTimeout(ctx, o.send)
			_, err := rpc.Call(cctx, o.net, to, m)
			cancel()
			if err != nil {
				missing[to] = err.Error()
				o.mu.Lock()
				o.failed[to] = time.Now()
				o.mu.Unlock()
				break
			}
			sent++
			if o.Delivered != nil {
				o.Delivered(to, m)
			}
		}
		o.mu.Lock()
		if sent == len(queued[to]) {
			delete(o.failed, to)
		}
		if rest := o.q[to][sent:]; len(rest) == 0 {
			delete(o.q, to)
		} else {
			o.q[to] = rest
		}
		o.mu.Unlock()
	}
	return missing
}

// Run retries every interval while ctx lives, whenever txn (the lock that
// serialises this server's transactions) is free. A server that failed a
// delivery lately is first asked for its health, without the lock, and
// tried again only once it answers: a flush to a server that is down
// would hold the lock for the send timeout, and every change arriving
// meanwhile would wait that long for a server it goes on without.
func (o *Outbox) Run(ctx context.Context, txn *sync.Mutex, every time.Duration) {
	EveryOr(ctx, every, o.kick, func() {
		if o.Len() == 0 || !o.answering(ctx) {
			return
		}
		if txn.TryLock() {
			if len(o.flush(ctx, false)) == 0 {
				o.log.Info("outstanding decisions delivered")
			}
			txn.Unlock()
		}
	})
}

// answering asks each queued server that failed within holdoff whether
// it answers now (no lock held): one that answers is tried at the next
// flush, one that does not stays failed (a transaction goes on without
// it at once). It reports whether any queued server is worth a flush.
func (o *Outbox) answering(ctx context.Context) bool {
	o.mu.Lock()
	var lately, fresh []string
	for to := range o.q {
		if last, failed := o.failed[to]; failed && time.Since(last) < holdoff {
			lately = append(lately, to)
		} else {
			fresh = append(fresh, to)
		}
	}
	o.mu.Unlock()
	worth := len(fresh) > 0
	for _, to := range lately {
		cctx, cancel := context.WithTimeout(ctx, min(o.send, time.Second))
		_, err := rpc.Call(cctx, o.net, to, &protocol.Health{})
		cancel()
		var refusal *protocol.Error // an answer, even a refusal (a holder that stands down), is a server up
		o.mu.Lock()
		if err != nil && !errors.As(err, &refusal) {
			o.failed[to] = time.Now()
		} else {
			delete(o.failed, to)
			worth = true
		}
		o.mu.Unlock()
	}
	return worth
}

// Every calls f at every tick of the interval until ctx ends (an engine's
// background work).
func Every(ctx context.Context, every time.Duration, f func()) { EveryOr(ctx, every, nil, f) }

// EveryOr is Every that also runs f at once when wake receives (a server
// that asks to be brought up to date need not wait for the next tick).
func EveryOr(ctx context.Context, every time.Duration, wake <-chan struct{}, f func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		case <-wake:
			f()
		}
	}
}

// Parallel runs f over [0, n) cut into contiguous ranges, one per core and
// at least minPer items each; it returns the first error.
func Parallel(n, minPer int, f func(lo, hi int) error) error {
	workers := max(min(runtime.GOMAXPROCS(0), n/max(minPer, 1)), 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() { errs[g] = f(n*g/workers, n*(g+1)/workers) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CheckItems validates a batch's ids: well-formed and unique in the batch.
func CheckItems(items []protocol.Item) *protocol.Error {
	if len(items) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty enrollment")
	}
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if err := protocol.CheckID(it.ID); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "item %d: %v", i, err)
		}
		if seen[it.ID] {
			return protocol.Errorf(protocol.CodeDuplicate, "id %q appears twice in the batch", it.ID)
		}
		seen[it.ID] = true
	}
	return nil
}

// TransformBatch applies T_a to every item's template on all cores.
func TransformBatch(items []protocol.Item, d, a int) ([]template.Ternary, error) {
	zs := make([]template.Ternary, len(items))
	err := Parallel(len(items), 64, func(lo, hi int) error {
		tr, err := template.NewTransformer(d, a)
		if err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			zs[i] = template.NewTernary(d)
			if err := template.Apply(tr, items[i].Template, zs[i]); err != nil {
				return fmt.Errorf("item %d (%s): %w", i, items[i].ID, err)
			}
		}
		return nil
	})
	return zs, err
}

// Transformers pools T_beta transformers for queries (one per goroutine).
type Transformers struct {
	pool sync.Pool
}

// NewTransformers returns a pool for T_a on dimension d.
func NewTransformers(d, a int) *Transformers {
	t := &Transformers{}
	t.pool.New = func() any {
		tr, _ := template.NewTransformer(d, a)
		return tr
	}
	return t
}

// Apply transforms x into a new ternary vector.
func (t *Transformers) Apply(x []float32) (template.Ternary, error) {
	tr := t.pool.Get().(*template.Transformer)
	defer t.pool.Put(tr)
	y := template.NewTernary(tr.Dim())
	return y, template.Apply(tr, x, y)
}

// LogEvery lets a log line repeated by a peer or a client through at
// most once an interval per key (an entry and what the line says, say),
// so that a retry loop cannot flood the log; the events held back are
// counted and reported with the next line. Keys must be few (party
// names), since each is kept. The zero value logs every 10 s.
type LogEvery struct {
	Every  time.Duration
	mu     sync.Mutex
	logged map[string]time.Time
	quiet  map[string]int
}

// Due counts one event of key and reports whether to log it, with the
// events since the last line (this one included): the first, then at
// most one a l.Every.
func (l *LogEvery) Due(key string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged == nil {
		l.logged, l.quiet = map[string]time.Time{}, map[string]int{}
	}
	every := l.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	l.quiet[key]++
	if t, ok := l.logged[key]; ok && time.Since(t) < every {
		return 0, false
	}
	n := l.quiet[key]
	l.logged[key], l.quiet[key] = time.Now(), 0
	return n, true
}
