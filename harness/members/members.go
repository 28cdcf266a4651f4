// Package members makes configuration members with real certificates
// for tests.
package members

import (
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network/quicnet"
)

// Member is a configuration member named name, at address addr (none for
// a client) with role role (none for a party), whose certificate is a
// fresh self-signed one, as 'party init' and 'client init' make, and whose
// pin is that certificate's. A server (one with an address) also gets a
// seal key, which the parties of a mode with sealed enrollment need. The
// private keys are dropped: for members whose keys a test needs, generate
// the identity with quicnet.GenerateIdentity (or run the cluster with
// harness/inproc).
func Member(tb testing.TB, name, addr, role string) config.Member {
	tb.Helper()
	id, err := quicnet.GenerateIdentity(name)
	if err != nil {
		tb.Fatal(err)
	}
	m := config.Member{Name: name, Addr: addr, Role: role, Cert: string(id.CertPEM), Pin: id.Pin}
	if addr != "" {
		k, err := seal.GenerateKey(nil)
		if err != nil {
			tb.Fatal(err)
		}
		m.Seal = k.Public().String()
	}
	return m
}
