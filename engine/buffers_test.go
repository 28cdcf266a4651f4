package engine

import (
	"bytes"
	"testing"

	"github.com/idface/idface/network"
)

// TestBuffers: nothing is lent before something was returned, a lent
// buffer is empty and at least as large as asked, a smaller one is not
// lent for a larger read. (A sync.Pool may drop what it is given, and
// does at random under the race detector: a returned buffer is lent
// again on some try, not on every one.)
func TestBuffers(t *testing.T) {
	var b Buffers
	if got := b.Get(10); got != nil {
		t.Fatalf("an empty pool lent %d bytes", cap(got))
	}
	lent := false
	for range 50 {
		b.Put(make([]byte, 5, 100))
		if got := b.Get(200); got != nil {
			t.Fatalf("lent %d bytes for a read of 200", cap(got))
		}
		if got := b.Get(100); got != nil {
			if len(got) != 0 || cap(got) < 100 {
				t.Fatalf("lent len %d cap %d for a read of 100", len(got), cap(got))
			}
			lent = true
		}
	}
	if !lent {
		t.Fatal("a returned buffer was never lent again in 50 tries")
	}
	b.Put(nil) // nothing to keep
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
