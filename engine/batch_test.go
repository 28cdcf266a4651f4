package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBatcher: every request gets its own result; no batch holds more
// than Max; a lone request waits about Wait, not more; at most Flights
// batches run at once, and requests that arrive meanwhile gather into
// the next; a caller whose context ends gets its error.
func TestBatcher(t *testing.T) {
	var running, most atomic.Int32
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	run := func(_ context.Context, items []int) []int {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		sizes = append(sizes, len(items))
		mu.Unlock()
		<-release
		out := make([]int, len(items))
		for i, x := range items {
			out[i] = 2 * x
		}
		return out
	}
	b := NewBatcher(4, 20*time.Millisecond, 1, time.Minute, run)
	close(release) // batches end at once, for the lone request
	t0 := time.Now()
	if got, err := b.Do(context.Background(), 21); err != nil || got != 42 {
		t.Fatalf("a lone request: %v %v", got, err)
	}
	if el := time.Since(t0); el < 15*time.Millisecond {
		t.Fatalf("a lone request ran after %v, before the wait", el)
	}

	release = make(chan struct{})
	sizes = nil
	b = NewBatcher(4, time.Millisecond, 1, time.Minute, run)
	var wg sync.WaitGroup
	got := make([]int, 11)
	first := make(chan struct{})
	wg.Go(func() { got[0], _ = b.Do(context.Background(), 0); close(first) })
	for running.Load() == 0 { // the first batch runs, holding its flight
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < 11; i++ {
		wg.Go(func() { got[i], _ = b.Do(context.Background(), i) })
	}
	time.Sleep(50 * time.Millisecond) // all ten gather (4, 4, 2) behind the flight
	close(release)
	wg.Wait()
	for i, g := range got {
		if g != 2*i {
			t.Fatalf("request %d got %d", i, g)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most.Load() != 1 {
		t.Fatalf("%d batches ran at once with one flight", most.Load())
	}
	total := 0
	for _, n := range sizes[1:] {
		if n > 4 {
			t.Fatalf("a batch of %d, max 4", n)
		}
		total += n
	}
	if total != 10 || len(sizes) != 4 {
		t.Fatalf("batches %v: want 1 then 4, 4, 2", sizes)
	}

	// Weighed (max 4): 1 and 2 together; 3 would make 6, so it opens the
	// next batch and the first runs; 9 runs alone, and closes 3's.
	var wsizes []int
	var wmu sync.Mutex
	wb := NewBatcher(4, 30*time.Millisecond, 4, time.Minute, func(_ context.Context, items []int) []int {
		wmu.Lock()
		wsizes = append(wsizes, len(items))
		wmu.Unlock()
		return items
	}).Weighed(func(x int) int { return x })
	var wwg sync.WaitGroup
	for _, x := range []int{1, 2, 3, 9} {
		wwg.Go(func() {
			if got, err := wb.Do(context.Background(), x); err != nil || got != x {
				t.Errorf("weighed %d: %v %v", x, got, err)
			}
		})
		time.Sleep(2 * time.Millisecond) // in this order
	}
	wwg.Wait()
	slices.Sort(wsizes)
	if fmt.Sprint(wsizes) != "[1 1 2]" {
		t.Fatalf("weighed batches %v, want [1 1 2] (1+2 | 3 | 9)", wsizes)
	}

	stuck := NewBatcher(4, time.Millisecond, 1, 100*time.Millisecond, func(ctx context.Context, items []int) []int { <-ctx.Done(); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := stuck.Do(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller that gives up: %v", err)
	}
	short := NewBatcher(4, time.Millisecond, 1, time.Minute, func(context.Context, []int) []int { return nil })
	if _, err := short.Do(context.Background(), 1); !errors.Is(err, errShort) {
		t.Fatalf("a batch without results: %v", err)
	}
}

// TestBatcherEager: an eager batcher runs a lone request on an idle entry
// at once, and gathers the requests that arrive while a batch runs into
// the next (which starts when the first ends, before its Wait).
func TestBatcherEager(t *testing.T) {
	release := make(chan struct{})
	var sizes []int
	var mu sync.Mutex
	run := func(_ context.Context, items []int) []int {
		mu.Lock()
		sizes = append(sizes, len(items))
		mu.Unlock()
		<-release
		return items
	}
	b := NewBatcher(8, time.Hour, 2, time.Minute, run).Eager()
	var wg sync.WaitGroup
	wg.Go(func() { b.Do(context.Background(), 0) })
	for {
		mu.Lock()
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			break // the lone request ran at once, not after an hour
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i <= 5; i++ {
		wg.Go(func() { b.Do(context.Background(), i) })
	}
	for { // they gather: the entry is busy
		b.mu.Lock()
		n := 0
		if len(b.queue) == 1 {
			n = b.queue[0].weight
		}
		b.mu.Unlock()
		if n == 5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	if len(sizes) != 1 {
		t.Fatalf("batches %v started while one ran and the wait had not passed", sizes)
	}
	mu.Unlock()
	close(release)
	wg.Wait()
	if !slices.Equal(sizes, []int{1, 5}) {
		t.Fatalf("batch sizes %v, want [1 5]", sizes)
	}
}
