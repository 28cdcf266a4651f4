package engine

import "sync"

// Buffers lends byte buffers for the vectors a decider reads from its
// peers: two or three of about a megabyte per identification at 10^6
// rows, which grown afresh for each (network.ReadGrowing from nil:
// doubling, copying, then collected) cost a blind decider more than
// deciding does. A buffer is lent only as capacity to read into, never
// allocated at a peer's word: Get returns nil when none is free, and the
// read grows its own as bytes arrive.
type Buffers struct{ pool sync.Pool }

// Get returns an empty buffer of capacity at least n, or nil.
func (b *Buffers) Get(n int) []byte {
	if p, ok := b.pool.Get().(*[]byte); ok {
		if cap(*p) >= n {
			return (*p)[:0]
		}
		b.pool.Put(p)
	}
	return nil
}

// Put returns buf for another read; its contents are then anyone's.
func (b *Buffers) Put(buf []byte) {
	if cap(buf) > 0 {
		buf = buf[:0]
		b.pool.Put(&buf)
	}
}
