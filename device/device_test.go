package device_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os/exec"
	"strings"
	"testing"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/device"
	"github.com/idface/idface/harness/members"
	"github.com/idface/idface/protocol"
)

// TestEverySealedModeHasAPart: a mode whose declaration says Sealed has a
// Sealer, one that says HideProbes a ProbeHider, and no part serves a mode
// that does not say so (the client would make shares no server takes).
func TestEverySealedModeHasAPart(t *testing.T) {
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		p := device.Of(m)
		if s.Sealed != (p.Seal != nil) || s.HideProbes != (p.Hide != nil) {
			t.Errorf("mode %s: sealed %v hides probes %v, but its device part seals %v hides %v", m, s.Sealed, s.HideProbes, p.Seal != nil, p.Hide != nil)
		}
	}
	for _, p := range device.Parts {
		if _, err := config.Spec(p.Mode); err != nil {
			t.Errorf("device part of %s: %v", p.Mode, err)
		}
	}
}

// TestClientLinksNoEngine: a program that enrolls and identifies (client,
// the gateway) links the modes' declarations and device parts, never a
// server engine, the server, lattigo or Prometheus.
func TestClientLinksNoEngine(t *testing.T) {
	// This test's own binary too: it checks every mode's configuration and
	// makes its shares below (TestSharesWithoutEngines).
	var deps []string
	for _, args := range [][]string{{"github.com/idface/idface/client", "github.com/idface/idface/gateway"}, {"-test", "github.com/idface/idface/device"}} {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list (this test needs the go command): %v: %s", err, out)
		}
		deps = append(deps, strings.Fields(string(out))...)
	}
	if len(deps) < 20 {
		t.Fatalf("go list -deps gave %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		for _, banned := range []string{"github.com/idface/idface/engine", "github.com/idface/idface/modes", "github.com/idface/idface/server", "github.com/tuneinsight/lattigo", "github.com/prometheus/"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the client links %s", d)
			}
		}
	}
}

// TestSharesWithoutEngines: a program that links no engine (this test's
// binary: TestClientLinksNoEngine) checks every mode's configuration, and
// makes the sealed shares and hidden probes of the modes that take them.
func TestSharesWithoutEngines(t *testing.T) {
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		lit := config.Literal{Mode: m, Dim: 64}
		for _, slot := range s.Members(s.DefaultParties) {
			mb := members.Member(t, slot.Name, "127.0.0.1:1", "")
			switch slot.Role {
			case config.RoleKeyServer:
				lit.KeyServer = &mb
			case config.RoleDecider:
				lit.Decider = &mb
			default:
				lit.Parties = append(lit.Parties, mb)
			}
		}
		lit.Clients = []config.Member{members.Member(t, "device", "", config.RoleDevice)}
		p, err := config.New(lit, t.TempDir())
		if err != nil {
			t.Fatalf("mode %s: %v", m, err)
		}
		x := make([]float32, 64)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		if s.Sealed {
			parts, err := client.SealShares(p, 0, [16]byte{1}, []protocol.Item{{ID: "a", Template: x}})
			if err != nil || len(parts) != p.Mu() {
				t.Errorf("mode %s: %d sealed parts, %v; want %d", m, len(parts), err, p.Mu())
			}
		}
		if s.HideProbes {
			lit.HideProbes = true
			hp, err := config.New(lit, t.TempDir())
			if err != nil {
				t.Fatalf("mode %s, hidden probes: %v", m, err)
			}
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			probe, err := client.HideProbe(hp, key, "device", x, 1)
			if err != nil || len(probe.Parts) != hp.Mu() {
				t.Errorf("mode %s: hidden probe %v", m, err)
			}
		}
	}
}
