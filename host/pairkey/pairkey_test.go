package pairkey_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"strings"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/members"
	"github.com/idface/idface/host/pairkey"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network/quicnet"
)

// cluster is a three-server cluster (with an operator) with real
// identities; it returns the params and each member's private key.
func cluster(t *testing.T, id string) (*config.Params, map[string]crypto.PrivateKey) {
	t.Helper()
	keys := map[string]crypto.PrivateKey{}
	member := func(name, addr, role string) config.Member {
		ident, err := quicnet.GenerateIdentity(name)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(ident.CertPEM, ident.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = pair.PrivateKey
		m := config.Member{Name: name, Addr: addr, Role: role, Cert: string(ident.CertPEM), Pin: ident.Pin}
		if addr != "" { // a server: blind mode's holders need a seal key
			sk, err := seal.GenerateKey(nil)
			if err != nil {
				t.Fatal(err)
			}
			m.Seal = sk.Public().String()
		}
		return m
	}
	p, err := config.New(config.Literal{Mode: config.ModeBlind, ClusterID: id,
		Parties: []config.Member{member("p1", "127.0.0.1:1", ""), member("p2", "127.0.0.1:2", "")},
		Decider: func() *config.Member { m := member("decider", "127.0.0.1:3", ""); return &m }(),
		Clients: []config.Member{member("op", "", config.RoleOperator)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return p, keys
}

// TestPairKeys: two servers derive the same key from their own private
// key and the other's certificate; every pair has its own; clients get
// none; the key depends on the cluster id.
func TestPairKeys(t *testing.T) {
	p, keys := cluster(t, "000102030405060708090a0b0c0d0e0f")
	derived := map[string]map[string][32]byte{}
	for _, s := range []string{"p1", "p2", "decider"} {
		k, err := pairkey.Derive(p, s, keys[s])
		if err != nil {
			t.Fatal(err)
		}
		if len(k) != 2 {
			t.Fatalf("%s: keys with %d servers, want 2", s, len(k))
		}
		if _, ok := k["op"]; ok {
			t.Fatalf("%s shares a key with a client", s)
		}
		derived[s] = k
	}
	if derived["p1"]["p2"] != derived["p2"]["p1"] || derived["p1"]["decider"] != derived["decider"]["p1"] {
		t.Fatal("the two ends of a pair derived different keys")
	}
	if derived["p1"]["p2"] == derived["p1"]["decider"] || derived["p1"]["p2"] == derived["p2"]["decider"] {
		t.Fatal("two pairs share a key")
	}
	// The same secret in another cluster gives another key.
	a, _ := pairkey.Key([]byte("secret"), [16]byte{1}, "p1", "p2")
	b, _ := pairkey.Key([]byte("secret"), [16]byte{2}, "p1", "p2")
	c, _ := pairkey.Key([]byte("secret"), [16]byte{1}, "p2", "p1")
	if a == b || a != c {
		t.Fatal("the key does not follow the cluster id, or depends on the order of the names")
	}
	// No identity key: no keys (the server compares nothing); a key that
	// is not ECDSA P-256: refused with what to do.
	if k, err := pairkey.Derive(p, "p1", nil); err != nil || len(k) != 0 {
		t.Fatalf("without a key: %v %v", k, err)
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := pairkey.Derive(p, "p1", ed); err == nil || !strings.Contains(err.Error(), "party rotate") {
		t.Fatalf("an Ed25519 identity: %v", err)
	}
}

// TestServerWithoutCertificate: a server whose certificate the cluster
// config lacks ("-", once an in-process test member's) cannot reach the
// derivation: the config is refused, naming the server, where Derive
// used to skip it for in-process tests (which now give every member a
// real identity) and later failed on it. With its certificate, the
// server derives the key it shares with it.
func TestServerWithoutCertificate(t *testing.T) {
	id, err := quicnet.GenerateIdentity("p1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	p1 := config.Member{Name: "p1", Addr: "127.0.0.1:1", Cert: string(id.CertPEM), Pin: id.Pin}
	op := members.Member(t, "op", "", config.RoleOperator)
	p2 := members.Member(t, "p2", "127.0.0.1:2", "")
	noCert := p2
	noCert.Cert = "-"
	if _, err := config.New(config.Literal{Mode: config.Mode2PC, Parties: []config.Member{p1, noCert}, Clients: []config.Member{op}}, ""); err == nil || !strings.Contains(err.Error(), "p2") {
		t.Fatalf("a server without a certificate: %v", err)
	}
	p, err := config.New(config.Literal{Mode: config.Mode2PC, Parties: []config.Member{p1, p2}, Clients: []config.Member{op}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := pairkey.Derive(p, "p1", pair.PrivateKey); err != nil || len(k) != 1 {
		t.Fatalf("with p2's certificate: %v %v", k, err)
	}
}
