package config_test

import (
	"strings"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network/quicnet"
)

func descriptor(t *testing.T, name, role, addr string) config.Descriptor {
	t.Helper()
	id, err := quicnet.GenerateIdentity(name)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Descriptor{Name: name, Role: role, Addr: addr, Cert: string(id.CertPEM), Pin: id.Pin}
	if config.ServerRole(role) { // as 'party init' makes it
		k, err := seal.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Seal = k.Public().String()
	}
	return d
}

// TestAssembleDropsOldMembers: settings taken from an earlier configuration
// (members included) are assembled with the descriptors given now only:
// the old decider does not count as a second one, and a member left out
// (a removed device) is gone.
func TestAssembleDropsOldMembers(t *testing.T) {
	descs := []config.Descriptor{
		descriptor(t, "h1", config.RoleShareHolder, "127.0.0.1:1"),
		descriptor(t, "h2", config.RoleShareHolder, "127.0.0.1:2"),
		descriptor(t, "k", config.RoleDecider, "127.0.0.1:3"),
		descriptor(t, "ops", config.RoleOperator, ""),
		descriptor(t, "gate", config.RoleDevice, ""),
	}
	first, err := config.Assemble(config.Literal{Mode: config.ModeBlind, Dim: 128, GalleryLevels: "4:2,6,19,58", ClusterID: "00112233445566778899aabbccddeeff"}, descs)
	if err != nil {
		t.Fatal(err)
	}
	if first.Decider == nil || first.Decider.Name != "k" || len(first.Clients) != 2 {
		t.Fatalf("assembled %+v", first)
	}
	first.Serial++
	second, err := config.Assemble(first, descs[:4])
	if err != nil {
		t.Fatalf("re-assembling from the earlier literal: %v", err)
	}
	if second.Decider == nil || second.Decider.Name != "k" || len(second.Parties) != 2 || len(second.Clients) != 1 || second.Clients[0].Name != "ops" {
		t.Fatalf("re-assembled parties %v decider %v clients %v", second.Parties, second.Decider, second.Clients)
	}
	if second.Parties[0].Seal != descs[0].Seal {
		t.Fatal("the seal key did not reach the configuration")
	}
	if second.GalleryLevels != "4:2,6,19,58" {
		t.Fatalf("gallery levels %q", second.GalleryLevels)
	}
}

// TestBlindNeedsSealKeys: a blind share holder whose descriptor has no
// seal key (a home made before sealed enrollment) is refused, naming the
// fix; a damaged key is refused too.
func TestBlindNeedsSealKeys(t *testing.T) {
	descs := []config.Descriptor{
		descriptor(t, "h1", config.RoleShareHolder, "127.0.0.1:1"),
		descriptor(t, "h2", config.RoleShareHolder, "127.0.0.1:2"),
		descriptor(t, "k", config.RoleDecider, "127.0.0.1:3"),
	}
	lit := config.Literal{Mode: config.ModeBlind, Dim: 128}
	descs[1].Seal = ""
	if _, err := config.Assemble(lit, descs); err == nil || !strings.Contains(err.Error(), "party rotate") {
		t.Fatalf("no seal key: %v", err)
	}
	descs[1].Seal = descs[0].Seal[:len(descs[0].Seal)-8] + "AAAAAAA="
	if _, err := config.Assemble(lit, descs); err == nil {
		t.Fatal("a damaged seal key was accepted")
	}
}

// TestAssembleMetrics: a server's descriptor names its loopback metrics
// address and the assembled configuration carries it to 'serve'; a public
// address, or one on a client, is refused.
func TestAssembleMetrics(t *testing.T) {
	h1 := descriptor(t, "h1", config.RoleShareHolder, "10.0.0.1:7443")
	h1.Metrics = "127.0.0.1:9464"
	h2 := descriptor(t, "h2", config.RoleShareHolder, "10.0.0.2:7443")
	lit, err := config.Assemble(config.Literal{Mode: config.Mode2PC, ClusterID: "00112233445566778899aabbccddeeff"}, []config.Descriptor{h1, h2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := config.New(lit, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := p.Server("h1"); m.Metrics != "127.0.0.1:9464" {
		t.Errorf("h1 metrics %q, want the descriptor's 127.0.0.1:9464", m.Metrics)
	}
	if m, _ := p.Server("h2"); m.Metrics != "" {
		t.Errorf("h2 metrics %q, want none (its descriptor names none)", m.Metrics)
	}
	public := h2
	public.Metrics = "0.0.0.0:9464"
	ops := descriptor(t, "ops", config.RoleOperator, "")
	ops.Metrics = "127.0.0.1:9464"
	for _, d := range []config.Descriptor{public, ops} {
		if err := d.Check(); err == nil {
			t.Errorf("%s with metrics %s accepted", d.Name, d.Metrics)
		}
	}
}
