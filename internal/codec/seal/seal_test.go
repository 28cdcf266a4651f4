package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func binding() Binding {
	return Binding{Cluster: [16]byte{1, 2, 3}, Holder: "p2", Mode: "blind", Context: []byte("nonce|ids")}
}

func key(t *testing.T) *PrivateKey {
	t.Helper()
	k, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRoundTrip(t *testing.T) {
	k := key(t)
	for _, n := range []int{0, 1, 32, 512, 70000} {
		pt := bytes.Repeat([]byte{byte(n)}, n)
		ct, err := Seal(k.Public(), binding(), pt)
		if err != nil {
			t.Fatal(err)
		}
		if len(ct) != n+Overhead {
			t.Fatalf("n=%d: %d bytes sealed, want %d", n, len(ct), n+Overhead)
		}
		got, err := Open(k, binding(), ct, n)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("n=%d: %v", n, err)
		}
	}
	if len(k.Public().k.Bytes()) != PublicKeySize {
		t.Fatalf("public key of %d bytes", len(k.Public().k.Bytes()))
	}
}

func TestRefused(t *testing.T) {
	k, other := key(t), key(t)
	b := binding()
	pt := []byte("a holder's share of one row")
	ct, err := Seal(k.Public(), b, pt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other, b, ct, len(pt)); !errors.Is(err, ErrOpen) {
		t.Errorf("another holder's key opened it: %v", err)
	}
	wrong := map[string]Binding{}
	for name, f := range map[string]func(*Binding){
		"holder":  func(b *Binding) { b.Holder = "p3" },
		"cluster": func(b *Binding) { b.Cluster[15] ^= 1 },
		"mode":    func(b *Binding) { b.Mode = "replicated" },
		"context": func(b *Binding) { b.Context = []byte("nonce|idt") },
		// Length prefixes keep field boundaries: moving a byte across fails.
		"boundary": func(b *Binding) { b.Holder, b.Mode = "p2b", "lind" },
	} {
		w := binding()
		f(&w)
		wrong[name] = w
	}
	for name, w := range wrong {
		if _, err := Open(k, w, ct, len(pt)); !errors.Is(err, ErrOpen) {
			t.Errorf("opened with another %s: %v", name, err)
		}
	}
	for i := range ct {
		for _, bit := range []byte{1, 0x80} {
			c := bytes.Clone(ct)
			c[i] ^= bit
			if _, err := Open(k, b, c, len(pt)); !errors.Is(err, ErrOpen) {
				t.Fatalf("byte %d flipped (%#x) opened: %v", i, bit, err)
			}
		}
	}
	if _, err := Open(k, b, ct[:len(ct)-1], len(pt)); err == nil {
		t.Error("a truncated part opened")
	}
}

func TestSizeCheckedFirst(t *testing.T) {
	k := key(t)
	for _, n := range []int{0, Overhead - 1, Overhead + 33} {
		_, err := Open(k, binding(), make([]byte, n), 32)
		if err == nil || errors.Is(err, ErrOpen) || !strings.Contains(err.Error(), "holds 32 bytes at most") {
			t.Errorf("%d bytes: %v, want a size refusal", n, err)
		}
	}
	if _, err := ParsePublicKey(strings.Repeat("A", maxPublicText+1)); err == nil {
		t.Error("an oversized public key parsed")
	}
	if _, err := ParseKey("seal.key", make([]byte, MaxKeyFile+1)); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("oversized key file: %v", err)
	}
}

func TestPublicKeyText(t *testing.T) {
	k := key(t)
	s := k.Public().String()
	p, err := ParsePublicKey(s)
	if err != nil || !p.Equal(k.Public()) {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"", "x25519:" + s[len(Suite)+1:], s[:len(s)-4], s[:len(s)-2] + "!=", Suite + ":"} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("%.30q parsed", bad)
		}
	}
}

func TestKeyFile(t *testing.T) {
	k := key(t)
	b := MarshalKey(k)
	got, err := ParseKey("seal.key", b)
	if err != nil || !got.Public().Equal(k.Public()) {
		t.Fatalf("%v", err)
	}
	// Every flipped byte is caught, as damage, never as another key.
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x04
		if _, err := ParseKey("seal.key", c); err == nil {
			t.Fatalf("byte %d flipped: parsed", i)
		}
	}
	if _, err := ParseKey("seal.key", b[:len(b)-3]); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("truncated: %v", err)
	}
	v2 := strings.Replace(string(b), " v1 ", " v2 ", 1)
	if _, err := ParseKey("seal.key", []byte(v2)); err == nil || !strings.Contains(err.Error(), "this idface reads") {
		t.Errorf("another version: %v", err)
	}
}

func TestGenerateKeyFromReader(t *testing.T) {
	a, err := GenerateKey(bytes.NewReader(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateKey(bytes.NewReader(make([]byte, 32)))
	if !a.Public().Equal(b.Public()) {
		t.Error("one seed, two keys")
	}
	if _, err := GenerateKey(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Error("a short reader made a key")
	}
}

// BenchmarkSeal and BenchmarkOpen: one holder's part of a 64-row batch of
// seeds (the size a non-entry holder gets), sealed and opened.
func BenchmarkSeal(b *testing.B) {
	k, _ := GenerateKey(nil)
	pt := make([]byte, 1+64*32)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Seal(k.Public(), binding(), pt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	k, _ := GenerateKey(nil)
	pt := make([]byte, 1+64*32)
	ct, _ := Seal(k.Public(), binding(), pt)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(k, binding(), ct, len(pt)); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse: no input panics the key decoders, and what parses encodes
// back to the same text.
func FuzzParse(f *testing.F) {
	k, _ := GenerateKey(bytes.NewReader(make([]byte, 32)))
	f.Add(MarshalKey(k), k.Public().String())
	f.Add([]byte(keyHeader+"\n\n\n"), Suite+":")
	f.Fuzz(func(t *testing.T, file []byte, pub string) {
		if k, err := ParseKey("f", file); err == nil && !bytes.Equal(MarshalKey(k), file) {
			t.Fatalf("key file not canonical: %q", file)
		}
		if p, err := ParsePublicKey(pub); err == nil && p.String() != pub {
			t.Fatalf("public key not canonical: %q", pub)
		}
	})
}
