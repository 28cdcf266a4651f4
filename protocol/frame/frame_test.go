package frame

import (
	"bytes"
	"testing"
)

// TestHeader pins the header: 4 bytes, big-endian, the message's length.
func TestHeader(t *testing.T) {
	for _, n := range []int{0, 1, 300, 1 << 24, 1<<32 - 1} {
		h := Append(nil, n)
		var p [Header]byte
		Put(p[:], n)
		if len(h) != Header || !bytes.Equal(h, p[:]) || Len(h) != n {
			t.Fatalf("n=%d: header %x / %x reads %d", n, h, p, Len(h))
		}
	}
	if got := Append(nil, 0x01020304); !bytes.Equal(got, []byte{1, 2, 3, 4}) {
		t.Fatalf("header %x, want 01020304", got)
	}
	if Size(10) != 14 {
		t.Fatalf("Size(10) = %d", Size(10))
	}
}
