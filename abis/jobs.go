package abis

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3"
)

// maxBrowse bounds the messages one pendingJobs counts at the broker (a
// browse reads each message's body); browseWait bounds its time.
const (
	maxBrowse       = 100_000
	browseWait      = 10 * time.Second
	unsubscribeWait = 5 * time.Second
)

// jobs is what pendingJobs counts: the requests the adapter holds
// (received from the broker, not yet answered) and, while Serve runs,
// those still queued at the broker, found by browsing the inbound queue
// with ActiveMQ's STOMP queue browser (a subscription with "browser:
// true", which consumes nothing and ends with a message whose "browser"
// header is "end"). A message counted as held is not counted again when
// the browse meets it (the broker may show a message it has dispatched
// but the adapter has not yet answered): held messages are known by
// their message-id.
type jobs struct {
	mu     sync.Mutex
	held   map[string]int // message-id -> copies held (a redelivery may overlap)
	browse func(ctx context.Context, skip func(id string) bool) (int, error)
}

// take and done count a request received from the broker as held, and
// no longer held once answered.
func (j *jobs) take(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.held == nil {
		j.held = map[string]int{}
	}
	j.held[id]++
}

func (j *jobs) done(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.held[id]--; j.held[id] <= 0 {
		delete(j.held, id)
	}
}

// serving sets how the broker's queue is browsed (nil: not served from
// a broker, so only what the adapter holds is counted).
func (j *jobs) serving(browse func(ctx context.Context, skip func(id string) bool) (int, error)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.browse = browse
}

// count is the requests held and queued, not counting the one asking.
// Held messages are taken as they are before the browse: one taken up
// during it is met by the browse and counted once there.
func (j *jobs) count(ctx context.Context) (int, error) {
	j.mu.Lock()
	held := maps.Clone(j.held)
	browse := j.browse
	j.mu.Unlock()
	n := 0
	for _, c := range held {
		n += c
	}
	if browse != nil {
		ctx, cancel := context.WithTimeout(ctx, browseWait)
		defer cancel()
		queued, err := browse(ctx, func(id string) bool { return held[id] > 0 })
		if err != nil {
			return 0, err
		}
		n += queued
	}
	return max(n-1, 0), nil // not counting this one
}

// Queued counts the messages waiting on queue dest of an ActiveMQ broker
// (whose STOMP browses a queue: another broker may consume it), but for
// those whose message-id skip names (nil: none), counting no further
// than limit messages seen: an error if the browse does not end within
// ctx. It consumes nothing. ActiveMQ browses what it holds in memory (and
// up to its destination policy's maxBrowsePageSize, 400 by default, from
// its store): where the queue outgrows the broker's memory, the count is
// a lower bound (docs/ABIS.md).
func Queued(ctx context.Context, conn *stomp.Conn, dest string, limit int, skip func(id string) bool) (int, error) {
	sub, err := conn.Subscribe(dest, stomp.AckAuto, stomp.SubscribeOpt.Header("browser", "true"))
	if err != nil {
		return 0, fmt.Errorf("abis: browsing %s at the broker: %w", dest, err)
	}
	defer func() {
		// The connection hands every subscription's messages over one
		// goroutine: what the broker still sends this one is drained,
		// or the adapter's own subscription would stall behind it.
		go func() {
			for range sub.C {
			}
		}()
		sub.Unsubscribe()
	}()
	n, seen := 0, 0
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("abis: browsing %s at the broker: %d messages seen, then no end: %w", dest, seen, ctx.Err())
		case msg, ok := <-sub.C:
			switch {
			case !ok || msg == nil:
				return 0, fmt.Errorf("abis: browsing %s at the broker: the browse ended without its end mark", dest)
			case msg.Err != nil:
				return 0, fmt.Errorf("abis: browsing %s at the broker: %w", dest, msg.Err)
			case msg.Header.Get("browser") == "end":
				return n, nil
			}
			if seen++; seen > limit {
				return n, nil // counted up to the bound (docs/ABIS.md)
			}
			if id := msg.Header.Get("message-id"); id == "" || skip == nil || !skip(id) {
				n++
			}
		}
	}
}
