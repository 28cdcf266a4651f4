package protocol

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/idface/idface/internal/codec/wire"
)

func TestAuthSignVerify(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cluster := [16]byte{1}
	ids := []string{"a", "b"}
	a, err := Sign(key, "op", cluster, OpPut, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Verify(&key.PublicKey, cluster, OpPut, ids) {
		t.Fatal("a fresh signature does not verify")
	}
	b, _ := Sign(key, "op", cluster, OpPut, ids)
	if a.Nonce == b.Nonce {
		t.Fatal("two signatures share a nonce")
	}
	// Any change of what was signed fails, and so does the id split
	// ("ab" is not "a","b").
	for name, ok := range map[string]bool{
		"cluster": a.Verify(&key.PublicKey, [16]byte{2}, OpPut, ids),
		"op":      a.Verify(&key.PublicKey, cluster, OpDelete, ids),
		"ids":     a.Verify(&key.PublicKey, cluster, OpPut, []string{"ab"}),
		"order":   a.Verify(&key.PublicKey, cluster, OpPut, []string{"b", "a"}),
		"nil key": a.Verify(nil, cluster, OpPut, ids),
	} {
		if ok {
			t.Errorf("a signature verified with another %s", name)
		}
	}
	a.Nonce[0] ^= 1
	if a.Verify(&key.PublicKey, cluster, OpPut, ids) {
		t.Fatal("a changed nonce verified")
	}
	// The encoding round-trips and bounds the signature.
	e := wire.Enc{}
	MarshalAuth(&e, b)
	if len(e.B) > MaxAuth {
		t.Fatalf("an Auth of %d bytes, bound %d", len(e.B), MaxAuth)
	}
	d := wire.Dec{B: e.B}
	if got := UnmarshalAuth(&d); d.Done() != nil || fmt.Sprint(got) != fmt.Sprint(b) {
		t.Fatalf("round trip: %+v %v", got, d.Err)
	}
}

// BenchmarkAuthVerify is what every party adds to an enrollment batch or
// a deletion: one ECDSA P-256 verification (the statement hash is over
// the batch's ids; 2048 ids here, the client's default batch).
func BenchmarkAuthVerify(b *testing.B) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ids := make([]string, 2048)
	for i := range ids {
		ids[i] = fmt.Sprintf("person-%d/sample-0", i)
	}
	a, _ := Sign(key, "op", [16]byte{1}, OpPut, ids)
	b.ReportAllocs()
	for b.Loop() {
		if !a.Verify(&key.PublicKey, [16]byte{1}, OpPut, ids) {
			b.Fatal("verify")
		}
	}
}

// TestSealedAuth: a sealed enrollment's signature covers the ids and every
// part's hash, and is not a plain enrollment's (nor the reverse).
func TestSealedAuth(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cluster, nonce := [16]byte{1}, [16]byte{5}
	ids := []string{"a", "b"}
	hashes := [][32]byte{PartHash([]byte("p1")), PartHash([]byte("p2"))}
	a, err := SignSealed(key, "op", cluster, nonce, ids, hashes)
	if err != nil {
		t.Fatal(err)
	}
	if !a.VerifySealed(&key.PublicKey, cluster, ids, hashes) {
		t.Fatal("a fresh signature does not verify")
	}
	swapped := [][32]byte{hashes[1], hashes[0]}
	for name, ok := range map[string]bool{
		"part":     a.VerifySealed(&key.PublicKey, cluster, ids, [][32]byte{hashes[0], PartHash([]byte("p3"))}),
		"order":    a.VerifySealed(&key.PublicKey, cluster, ids, swapped),
		"dropped":  a.VerifySealed(&key.PublicKey, cluster, ids, hashes[:1]),
		"ids":      a.VerifySealed(&key.PublicKey, cluster, []string{"a"}, hashes),
		"cluster":  a.VerifySealed(&key.PublicKey, [16]byte{2}, ids, hashes),
		"as plain": a.Verify(&key.PublicKey, cluster, OpPut, ids),
	} {
		if ok {
			t.Errorf("verified with another %s", name)
		}
	}
	plain, _ := Sign(key, "op", cluster, OpPut, ids)
	if plain.VerifySealed(&key.PublicKey, cluster, ids, nil) {
		t.Error("a plain enrollment's signature verified as sealed")
	}
	if string(SealContext(nonce, ids)) == string(SealContext(nonce, []string{"ab"})) {
		t.Error("the seal context does not separate ids")
	}
}

// TestProbeAuth: a hidden probe's signature covers the cluster, nonce,
// time, top-k and every part; each holder checks its own part against
// the signed hashes.
func TestProbeAuth(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cluster := [16]byte{1}
	m := &HiddenIdentify{TopK: 1, Nonce: [16]byte{2}, Time: 1_800_000_000, Parts: [][]byte{{1, 2}, {3, 4}, {5, 6}}}
	if err := SignProbe(key, "device", cluster, m); err != nil {
		t.Fatal(err)
	}
	a := m.Probe()
	for k, part := range m.Parts {
		if !a.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time, k, part) {
			t.Fatalf("holder %d refuses its genuine part", k)
		}
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	topK := a
	topK.TopK = 2
	hashes := a
	hashes.Hashes = append([][32]byte(nil), a.Hashes...)
	hashes.Hashes[1] = PartHash([]byte{9})
	for name, ok := range map[string]bool{
		"another part":    a.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time, 1, []byte{3, 5}),
		"another holder":  a.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time, 0, m.Parts[1]),
		"no such holder":  a.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time, 3, m.Parts[1]),
		"another cluster": a.VerifyProbe(&key.PublicKey, [16]byte{9}, m.Nonce, m.Time, 0, m.Parts[0]),
		"another nonce":   a.VerifyProbe(&key.PublicKey, cluster, [16]byte{3}, m.Time, 0, m.Parts[0]),
		"another time":    a.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time+1, 0, m.Parts[0]),
		"another top-k":   topK.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time, 0, m.Parts[0]),
		"another hash":    hashes.VerifyProbe(&key.PublicKey, cluster, m.Nonce, m.Time, 1, []byte{9}),
		"another key":     a.VerifyProbe(&other.PublicKey, cluster, m.Nonce, m.Time, 0, m.Parts[0]),
		"no key":          a.VerifyProbe(nil, cluster, m.Nonce, m.Time, 0, m.Parts[0]),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
}
