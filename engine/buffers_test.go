package engine

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/idface/idface/network"
)

// TestBuffers: nothing is lent before something was returned, a lent
// buffer is empty and at least as large as asked, a smaller one is not
// lent for a larger read, a returned buffer is lent again after a
// collection (a sync.Pool's was not), and the caps hold.
func TestBuffers(t *testing.T) {
	var b Buffers
	if got := b.Get(10); got != nil {
		t.Fatalf("an empty list lent %d bytes", cap(got))
	}
	b.Put(make([]byte, 5, 100))
	if got := b.Get(200); got != nil {
		t.Fatalf("lent %d bytes for a read of 200", cap(got))
	}
	runtime.GC()
	runtime.GC()
	got := b.Get(100)
	if got == nil || len(got) != 0 || cap(got) < 100 {
		t.Fatalf("lent len %d cap %d for a read of 100 after two collections, want an empty buffer of 100", len(got), cap(got))
	}
	if again := b.Get(1); again != nil {
		t.Fatalf("one buffer lent twice")
	}
	b.Put(nil) // nothing to keep

	// The smallest that fits is lent.
	b.Put(make([]byte, 0, 1000))
	b.Put(make([]byte, 0, 300))
	if got := b.Get(200); cap(got) != 300 {
		t.Fatalf("lent cap %d for a read of 200, want the 300 (the smallest that fits)", cap(got))
	}
	b.Get(1)

	// Caps: bytes and count.
	small := Buffers{KeepBytes: 1000}
	small.Put(make([]byte, 0, 2000)) // larger than the cap: dropped
	if got := small.Get(1); got != nil {
		t.Fatalf("kept a buffer of %d bytes over a cap of 1000", cap(got))
	}
	small.Put(make([]byte, 0, 600))
	small.Put(make([]byte, 0, 300))
	small.Put(make([]byte, 0, 700)) // room made by dropping the smaller ones
	if small.bytes > 1000 {
		t.Fatalf("keeps %d bytes over a cap of 1000", small.bytes)
	}
	if got := small.Get(700); cap(got) != 700 {
		t.Fatalf("the larger buffer was not kept (lent cap %d for 700)", cap(got))
	}
	// A buffer that would not be kept pushes nothing out: with 100 and
	// 900 kept under a cap of 1000, a 500 is dropped and both stay.
	mixed := Buffers{KeepBytes: 1000}
	mixed.Put(make([]byte, 0, 100))
	mixed.Put(make([]byte, 0, 900))
	mixed.Put(make([]byte, 0, 500))
	if len(mixed.free) != 2 || mixed.bytes != 1000 {
		t.Fatalf("after 100, 900 and 500 under a cap of 1000: %d buffers, %d bytes; want the 100 and the 900", len(mixed.free), mixed.bytes)
	}
	var many Buffers
	for range 2 * keepBuffers {
		many.Put(make([]byte, 0, 10))
	}
	if len(many.free) != keepBuffers {
		t.Fatalf("keeps %d buffers, want at most %d", len(many.free), keepBuffers)
	}
}

// BenchmarkReadVector reads a decider's vector (1 MB: one holder's at
// 10^6 rows and k = 8) into a fresh growing buffer, as deciders did, and
// into a lent one.
func BenchmarkReadVector(b *testing.B) {
	const n = 1 << 20
	src := bytes.Repeat([]byte{7}, n)
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(n)
		for b.Loop() {
			if _, err := network.ReadGrowing(bytes.NewReader(src), nil, n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lent", func(b *testing.B) {
		var bufs Buffers
		b.ReportAllocs()
		b.SetBytes(n)
		for b.Loop() {
			v, err := network.ReadGrowing(bytes.NewReader(src), bufs.Get(n), n)
			if err != nil {
				b.Fatal(err)
			}
			bufs.Put(v)
		}
	})
}
