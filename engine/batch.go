package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Batcher groups concurrent requests at an entry into batches, so that a
// mode scores them in one pass over its shares (issue 19 item 4: up to 32
// hidden probes per pass of the dense kernel, which is then bound by
// compute rather than by memory). The answers are those of the requests
// run one by one: a batch only shares the pass.
//
// A request that finds no batch gathering opens one; the batch runs once
// it holds Max requests or Wait after it opened, whichever is first, but
// never while Flights batches are running: then it keeps gathering (to
// Max) until one ends. A lone request on an idle entry so waits Wait at
// most; under load the batches grow to what arrives while the others run.
type Batcher[T, R any] struct {
	max, flights int
	wait         time.Duration
	run          func(ctx context.Context, items []T) []R
	timeout      time.Duration
	weight       func(T) int // an item's share of max (default 1)
	eager        bool        // an idle batcher runs a gathering batch at once

	mu      sync.Mutex
	queue   []*batch[T, R] // gathering, oldest first; all but the last are full
	running int
}

type batch[T, R any] struct {
	items  []T
	weight int // the items' total
	res    []R
	due    bool // Wait has passed since it opened
	timer  *time.Timer
	done   chan struct{}
}

// NewBatcher makes a Batcher of at most maxItems requests per batch,
// waiting at most wait, with at most flights batches running; run must
// return one result per item, in order, and is given a context of
// timeout (the requests' callers may give up; the batch still ends).
func NewBatcher[T, R any](maxItems int, wait time.Duration, flights int, timeout time.Duration, run func(ctx context.Context, items []T) []R) *Batcher[T, R] {
	return &Batcher[T, R]{max: max(1, maxItems), wait: wait, flights: max(1, flights), timeout: timeout, run: run}
}

// Weighed makes a batch full once its items' weights (at least 1 each)
// reach max, rather than their number; an item heavier than max runs in
// a batch of its own.
func (b *Batcher[T, R]) Weighed(weight func(T) int) *Batcher[T, R] {
	b.weight = weight
	return b
}

// Eager runs a gathering batch at once when no batch is running: a lone
// request on an idle entry never waits, and under load batches gather
// while others run (at most Wait, as before). For a mode whose pass costs
// far more than Wait, where holding an idle entry's request buys nothing.
func (b *Batcher[T, R]) Eager() *Batcher[T, R] {
	b.eager = true
	return b
}

func (b *Batcher[T, R]) weigh(item T) int {
	if b.weight == nil {
		return 1
	}
	return max(1, b.weight(item))
}

// errShort is a batch whose run returned too few results: a bug in the
// mode, reported to the requests it left without one.
var errShort = errors.New("internal error: a batch returned fewer results than it had requests")

// Do adds item to a batch and returns its result, or ctx's error if the
// caller's context ends first.
func (b *Batcher[T, R]) Do(ctx context.Context, item T) (R, error) {
	w := b.weigh(item)
	b.mu.Lock()
	var bt *batch[T, R]
	if n := len(b.queue); n > 0 && b.queue[n-1].weight+w <= b.max {
		bt = b.queue[n-1]
	} else {
		bt = &batch[T, R]{done: make(chan struct{}), due: b.wait <= 0}
		b.queue = append(b.queue, bt)
		if !bt.due {
			bt.timer = time.AfterFunc(b.wait, func() {
				b.mu.Lock()
				bt.due = true
				b.startLocked()
				b.mu.Unlock()
			})
		}
	}
	i := len(bt.items)
	bt.items = append(bt.items, item)
	bt.weight += w
	b.startLocked()
	b.mu.Unlock()
	var zero R
	select {
	case <-bt.done:
		if i >= len(bt.res) {
			return zero, errShort
		}
		return bt.res[i], nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// startLocked runs the oldest gathering batches that are full or due
// while flights are free.
func (b *Batcher[T, R]) startLocked() {
	for len(b.queue) > 0 && b.running < b.flights {
		bt := b.queue[0]
		if !bt.due && bt.weight < b.max && len(b.queue) == 1 && !(b.eager && b.running == 0) { // still open
			return
		}
		b.queue = b.queue[1:]
		b.running++
		if bt.timer != nil {
			bt.timer.Stop()
		}
		go b.runBatch(bt)
	}
}

func (b *Batcher[T, R]) runBatch(bt *batch[T, R]) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	bt.res = b.run(ctx, bt.items)
	cancel()
	close(bt.done)
	b.mu.Lock()
	b.running--
	b.startLocked()
	b.mu.Unlock()
}
