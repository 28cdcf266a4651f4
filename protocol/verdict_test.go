package protocol

import (
	"errors"
	"fmt"
	"testing"
)

// TestVerdict: a verdict opens under its probe's key and shard alone, says
// what was sealed, and any change to it, another key (a component
// altered by a holder) or another shard's nonce is ErrVerdict.
func TestVerdict(t *testing.T) {
	c := [3][VerdictKeySize]byte{{1}, {2}, {3}}
	key := VerdictKey([16]byte{7}, c)
	for _, refused := range []bool{false, true} {
		v := SealVerdict(key, 3, refused)
		if len(v) != VerdictSize {
			t.Fatalf("a verdict of %d bytes, want %d", len(v), VerdictSize)
		}
		if got, err := OpenVerdict(key, 3, v); err != nil || got != refused {
			t.Fatalf("sealed refused=%v, opened %v %v", refused, got, err)
		}
		if _, err := OpenVerdict(key, 2, v); !errors.Is(err, ErrVerdict) {
			t.Fatalf("another shard's nonce: %v", err)
		}
		for i := range v {
			w := append([]byte(nil), v...)
			w[i] ^= 0x40
			if _, err := OpenVerdict(key, 3, w); !errors.Is(err, ErrVerdict) {
				t.Fatalf("byte %d altered: %v", i, err)
			}
		}
		if _, err := OpenVerdict(key, 3, v[:VerdictSize-1]); !errors.Is(err, ErrVerdict) {
			t.Fatalf("a short verdict: %v", err)
		}
		bad := c
		bad[1][5] ^= 1
		if _, err := OpenVerdict(VerdictKey([16]byte{7}, bad), 3, v); !errors.Is(err, ErrVerdict) {
			t.Fatalf("a component altered: %v", err)
		}
		if _, err := OpenVerdict(VerdictKey([16]byte{8}, c), 3, v); !errors.Is(err, ErrVerdict) {
			t.Fatalf("another cluster's key: %v", err)
		}
	}
}

// TestIsRefusedHidden: only the device's own refusal by its verdict
// counts (RefusedByVerdict, wrapped or not); an error with the same code
// and text, as a server could send it, does not.
func TestIsRefusedHidden(t *testing.T) {
	forged := Errorf(CodeInconsistent, "p2: %s (%v)", RefusedHidden, ErrVerdict)
	own := RefusedByVerdict(Errorf(CodeInconsistent, "%s", RefusedHidden))
	if IsRefusedHidden(forged) || IsRefusedHidden(nil) || IsRefusedHidden(fmt.Errorf("searching: %w", forged)) {
		t.Fatal("an error from the wire was taken for the device's verdict")
	}
	if !IsRefusedHidden(own) || !IsRefusedHidden(fmt.Errorf("searching: %w", own)) {
		t.Fatal("the device's refusal by its verdict was not known")
	}
	var pe *Error
	if !errors.As(own, &pe) || pe.Code != CodeInconsistent || own.Error() != pe.Error() {
		t.Fatalf("the refusal does not read as the protocol error it wraps: %v", own)
	}
}
