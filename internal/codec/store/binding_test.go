package store

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBindingRefusesAnotherMembersLog: a log restored into another
// member's home, another cluster's, another mode's, written under another
// HE key or of another generation is refused at open, by Scan and by
// ScanAll (issue 17 item 1: bfed9c1's header held magic, format and kind
// only, so p1's log replayed as p2's).
func TestBindingRefusesAnotherMembersLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shares.log")
	own := bnd(KindShares)
	writeLog(t, path, records(3))
	others := map[string]func(*Binding){
		"member":     func(b *Binding) { b.Member = "p2" },
		"cluster":    func(b *Binding) { b.Cluster[15] ^= 1 },
		"mode":       func(b *Binding) { b.Mode = "blind" },
		"kind":       func(b *Binding) { b.Kind = KindBlind },
		"key":        func(b *Binding) { b.Key[0] = 1 },
		"generation": func(b *Binding) { b.Generation = 2 },
	}
	for name, change := range others {
		want := own
		change(&want)
		_, _, err := Open(path, want, func(Entry) error { t.Fatalf("%s: a record was replayed", name); return nil })
		var be *BindingError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "Restore") {
			t.Fatalf("%s: opened a log bound to %v as %v: %v", name, own, want, err)
		}
		if _, err := Scan(path, want, func(Entry) error { return nil }); !errors.As(err, &be) {
			t.Fatalf("%s: Scan: %v", name, err)
		}
		if _, err := ScanAll(path, want, func(Entry) error { return nil }); !errors.As(err, &be) {
			t.Fatalf("%s: ScanAll: %v", name, err)
		}
	}
	own.Generation = 1
	got, l, rep, err := collect(path, KindShares)
	if err != nil || len(got) != 3 || rep.Binding != own {
		t.Fatalf("own log: %d records, %v, %v", len(got), rep.Binding, err)
	}
	l.Close()
	if b, err := ReadBinding(path); err != nil || b != own {
		t.Fatalf("ReadBinding: %v %v", b, err)
	}
	if _, _, err := Open(path, own, func(Entry) error { return nil }); err != nil {
		t.Fatalf("generation 1 expected: %v", err)
	}
}

// TestBindingHeaderDamage: a flipped byte anywhere in the binding is
// damage, never another binding taken at face value.
func TestBindingHeaderDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	writeLog(t, path, records(2))
	good, _ := os.ReadFile(path)
	for i := 12; i < testHeaderLen; i++ {
		b := append([]byte(nil), good...)
		b[i] ^= 0x40
		os.WriteFile(path, b, 0o600)
		_, _, _, err := collect(path, KindShares)
		var de *DamageError
		if !errors.As(err, &de) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// TestAdoptFormat1 is the migration test: a format-1 log (testdata, as
// bfed9c1 wrote it) is refused with what to do, Adopt binds it, and the
// same records replay.
func TestAdoptFormat1(t *testing.T) {
	f, err := os.Open("testdata/log_v1.hex")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Scan() // comment line
	sc.Scan()
	f.Close()
	v1, err := hex.DecodeString(sc.Text())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rows.log")
	os.WriteFile(path, v1, 0o600)
	var fe *FormatError
	if _, _, _, err := collect(path, KindHERows); !errors.As(err, &fe) || !strings.Contains(err.Error(), "--adopt") {
		t.Fatalf("format 1 opened: %v", err)
	}
	if err := Adopt(path, bnd(KindShares)); err == nil {
		t.Fatal("adopted a kind-2 log as kind 1")
	}
	if err := Adopt(path, bnd(KindHERows)); err != nil {
		t.Fatal(err)
	}
	got, l, rep, err := collect(path, KindHERows)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if len(got) != 2 || string(got[0].Sealed) != "sealed" || got[1].Type != 2 || string(got[1].Tail) != "\x01\x02\x03\x04" || !got[1].TailIntact || rep.Binding.Generation != 1 {
		t.Fatalf("after adopt: %+v %+v", got, rep)
	}
	// Adopting again checks the binding and changes nothing.
	if err := Adopt(path, bnd(KindHERows)); err != nil {
		t.Fatal(err)
	}
	other := bnd(KindHERows)
	other.Member = "p2"
	if err := Adopt(path, other); err == nil {
		t.Fatal("a bound log adopted by another member")
	}
}
