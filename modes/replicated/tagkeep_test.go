package replicated

import (
	"testing"
	"time"
)

// TestTagKeepQuota: an entry that floods queries whose tags are never
// fetched evicts only its own oldest (by count and by bytes); another
// entry's tags stay until fetched, once, or until they expire.
func TestTagKeepQuota(t *testing.T) {
	k := &tagKeep{keep: time.Minute}
	other := [16]byte{0xff}
	k.put(1, other, make([]byte, 400))
	for i := range 3 * maxKeptPerEntry {
		k.put(0, [16]byte{byte(i), byte(i >> 8), byte(i >> 16)}, make([]byte, 40))
	}
	if n := len(k.by[0].kept); n > maxKeptPerEntry {
		t.Fatalf("entry 0 keeps %d queries, past %d", n, maxKeptPerEntry)
	}
	if len(k.by[0].order) > maxKeptPerEntry+1 {
		t.Fatalf("entry 0's order holds %d", len(k.by[0].order))
	}
	big := tagQuota(1<<20, k.batch) / (1 << 20) // queries of 1 MiB within the quota
	for i := range 2 * big {
		k.put(0, [16]byte{1, byte(i), byte(i >> 8)}, make([]byte, 1<<20))
	}
	if b := k.by[0].bytes; b > tagQuota(1<<20, k.batch) {
		t.Fatalf("entry 0 keeps %d bytes, past its quota %d", b, tagQuota(1<<20, k.batch))
	}
	if tags, ok := k.take(other); !ok || len(tags) != 400 {
		t.Fatal("entry 1's tags went with entry 0's flood")
	}
	if _, ok := k.take(other); ok {
		t.Fatal("tags handed over twice")
	}
	k.keep = time.Millisecond
	k.put(1, other, make([]byte, 4))
	time.Sleep(5 * time.Millisecond)
	if _, ok := k.take(other); ok {
		t.Fatal("tags handed over after they expired")
	}
	if len(k.by[0].kept) != 0 || k.by[0].bytes != 0 {
		t.Fatalf("entry 0's expired tags still held (%d, %d bytes) after a fetch", len(k.by[0].kept), k.by[0].bytes)
	}
	// Two batches of the largest size in flight fit, whatever the rows.
	k = &tagKeep{keep: time.Minute, batch: 32}
	n := 2*32 + 8
	for i := range n {
		k.put(0, [16]byte{2, byte(i)}, make([]byte, 8<<20))
	}
	if len(k.by[0].kept) != n {
		t.Fatalf("%d of %d queries of 8 MiB kept, for batches of 32", len(k.by[0].kept), n)
	}
}
