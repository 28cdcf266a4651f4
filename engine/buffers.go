package engine

import (
	"slices"
	"sync"
)

// Buffers lends byte buffers for the vectors a decider reads from its
// peers: two or three of about a megabyte per identification at 10^6
// rows, which grown afresh for each (network.ReadGrowing from nil:
// doubling, copying, then collected) cost a blind decider more than
// deciding does. A buffer is lent only as capacity to read into, never
// allocated at a peer's word: Get returns nil when none is free, and the
// read grows its own as bytes arrive.
//
// A free list, not a sync.Pool: a pool is emptied by every collection,
// and a decider that reads megabytes per query collects often enough
// that most reads found it empty (a profile of a blind decider at 10^6
// rows: a third of its CPU in growslice, memclr and madvise). The list
// keeps at most keepBuffers buffers and keepBytes bytes (MaxKeepBytes
// when zero); what does not fit is left to the collector.
type Buffers struct {
	// KeepBytes caps the bytes kept between reads (0: MaxKeepBytes).
	KeepBytes int

	mu    sync.Mutex
	free  [][]byte
	bytes int
}

// MaxKeepBytes is the default cap on the bytes a Buffers keeps idle: the
// vectors of a few dozen queries in flight at 10^6 rows and k = 16.
const MaxKeepBytes = 256 << 20

// keepBuffers caps how many buffers are kept.
const keepBuffers = 64

// Get returns an empty buffer of capacity at least n, or nil. Of the kept
// buffers that fit it lends the smallest, so a small read does not take
// a large buffer from a large one.
func (b *Buffers) Get(n int) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := -1
	for i, f := range b.free {
		if cap(f) >= n && (at < 0 || cap(f) < cap(b.free[at])) {
			at = i
		}
	}
	if at < 0 {
		return nil
	}
	buf := b.free[at]
	last := len(b.free) - 1
	b.free[at], b.free[last] = b.free[last], nil
	b.free = b.free[:last]
	b.bytes -= cap(buf)
	return buf[:0]
}

// Put returns buf for another read; its contents are then anyone's. It
// is kept while the caps allow, else dropped (the smallest kept buffers
// make room for a larger one).
func (b *Buffers) Put(buf []byte) {
	c := cap(buf)
	if c == 0 {
		return
	}
	limit := b.KeepBytes
	if limit <= 0 {
		limit = MaxKeepBytes
	}
	if c > limit {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// What room buf needs: the smallest kept buffers, if all of them are
	// smaller than buf; otherwise buf is not kept and nothing is dropped.
	order := make([]int, len(b.free))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cap(b.free[x]) - cap(b.free[y]) })
	n, bytes := len(b.free), b.bytes
	drop := 0
	for n >= keepBuffers || bytes+c > limit {
		if drop == len(order) || cap(b.free[order[drop]]) >= c {
			return // every buffer it would push out is at least as useful
		}
		n, bytes = n-1, bytes-cap(b.free[order[drop]])
		drop++
	}
	if drop > 0 {
		gone := map[int]bool{}
		for _, i := range order[:drop] {
			gone[i] = true
		}
		kept := b.free[:0]
		for i, f := range b.free {
			if !gone[i] {
				kept = append(kept, f)
			}
		}
		clear(b.free[len(kept):])
		b.free = kept
	}
	b.free = append(b.free, buf[:0])
	b.bytes = bytes + c
}
