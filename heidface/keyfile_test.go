package heidface

import (
	"bytes"
	"strings"
	"testing"
)

func TestKeyFiles(t *testing.T) {
	p, _ := NewParams(64, 42, 21)
	sk, pk := GenKeys(p)
	skb, _ := sk.MarshalBinary()
	pkb, _ := pk.MarshalBinary()
	bind := KeyBinding{Cluster: [16]byte{9, 8}, KeyServer: "key"}
	f := MarshalKeyFile(SecretKeyFile, bind, skb)
	if got, b, err := ParseKeyFile(f, SecretKeyFile); err != nil || !bytes.Equal(got, skb) || b != bind {
		t.Fatalf("round trip: %v %+v", err, b)
	}
	if _, _, err := ParseKeyFile(f, PublicKeyFile); err == nil {
		t.Fatal("secret key file read as a public key")
	}
	for _, cut := range []int{0, 5, 13, 22, 23, 27, len(f) / 2, len(f) - 1} {
		if _, _, err := ParseKeyFile(f[:cut], SecretKeyFile); err == nil {
			t.Fatalf("key file truncated to %d accepted", cut)
		}
	}
	for _, at := range []int{3, 10, 20, 22, 24, len(f) / 2, len(f) - 2} {
		bad := bytes.Clone(f)
		bad[at] ^= 4
		if _, _, err := ParseKeyFile(bad, SecretKeyFile); err == nil {
			t.Fatalf("key file with byte %d changed accepted", at)
		}
	}
	old := bytes.Clone(f)
	old[4] = 1
	if _, _, err := ParseKeyFile(old, SecretKeyFile); err == nil || !strings.Contains(err.Error(), "format 1;") || !strings.Contains(err.Error(), "earlier idface") {
		t.Fatalf("key file format 1: %v", err)
	}
	sk2, err := UnmarshalSecretKey(p, skb)
	if err != nil {
		t.Fatal(err)
	}
	pk2, err := UnmarshalPublicKey(p, pkb)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckKeyPair(p, sk2, pk2); err != nil {
		t.Fatal(err)
	}
	other, _ := GenKeys(p)
	if err := CheckKeyPair(p, other, pk2); err == nil {
		t.Fatal("a secret key of another pair passed the check")
	}
	if _, err := UnmarshalSecretKey(p, skb[:len(skb)/2]); err == nil {
		t.Fatal("half a secret key accepted")
	}
	if Fingerprint(pkb) == Fingerprint(skb) {
		t.Fatal("fingerprints collide")
	}
}
