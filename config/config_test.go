package config_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/members"
	"github.com/idface/idface/modes/hemode"

	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
)

// member is a server member with a real certificate and its pin.
func member(t *testing.T, name, addr string) config.Member {
	t.Helper()
	return members.Member(t, name, addr, "")
}

// operator is a client member with the operator role.
func operator(t *testing.T, name string) config.Member {
	t.Helper()
	return members.Member(t, name, "", config.RoleOperator)
}

func twoParty(t *testing.T) config.Literal {
	return config.Literal{Mode: config.Mode2PC, Parties: []config.Member{member(t, "p1", "127.0.0.1:1"), member(t, "p2", "127.0.0.1:2")},
		Clients: []config.Member{operator(t, "client")}}
}

func TestDefaults(t *testing.T) {
	def := twoParty(t)
	p, err := config.New(def, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if p.Dim() != 512 || p.Alpha() != 341 || p.Beta() != 63 || p.Tau() != config.DefaultTau || p.Block() != config.DefaultBlock ||
		p.Timeouts().Request != config.DefaultTimeout || p.MaxTopK() != config.DefaultMaxTopK || hemode.Scheme(p) != nil {
		t.Fatalf("defaults: %+v", p.Literal())
	}
	if n, w := p.Batch(); n != config.DefaultBatchMax || w != config.DefaultBatchWait {
		t.Fatalf("batch %d, %v", n, w)
	}
	if p.Threshold() != 44 { // least integer above 0.3*sqrt(341*63) = 43.97
		t.Fatalf("threshold %d", p.Threshold())
	}
	if c, ok := p.Client(""); !ok || c.Name != "client" || config.ClientRole(c) != config.RoleOperator {
		t.Fatal("the first operator is not the default client")
	}
	if p.Pins()[def.Clients[0].Pin].Role != network.RoleOperator || p.Pins()[def.Parties[1].Pin].Role != network.RoleParty {
		t.Fatal("pins")
	}
	// Zero is a threshold, not "unset".
	lit := twoParty(t)
	zero := 0.0
	lit.Tau = &zero
	if p, _ := config.New(lit, ""); p.Tau() != 0 {
		t.Fatal("tau 0 became the default")
	}
	// config.Params are immutable: changing a returned literal changes nothing.
	l := p.Literal()
	l.Parties[0].Name = "changed"
	*l.Tau = 0.9
	if p.Party(0).Name != "p1" || p.Tau() != config.DefaultTau {
		t.Fatal("params changed through a copy")
	}
}

func TestRejects(t *testing.T) {
	for name, f := range map[string]func(*config.Literal){
		"mode":         func(l *config.Literal) { l.Mode = "3pc" },
		"2pc of 3":     func(l *config.Literal) { l.Parties = append(l.Parties, member(t, "p3", "a:3")) },
		"dim":          func(l *config.Literal) { l.Dim = 5000 },
		"beta":         func(l *config.Literal) { l.Dim, l.Beta = 64, 65 },
		"tau":          func(l *config.Literal) { t := 1.5; l.Tau = &t },
		"block":        func(l *config.Literal) { l.Block = 10 },
		"timeout":      func(l *config.Literal) { l.Timeout = config.Duration(time.Millisecond) },
		"top-k":        func(l *config.Literal) { l.MaxTopK = 5000 },
		"batch":        func(l *config.Literal) { l.BatchMax = 33 },
		"batch wait":   func(l *config.Literal) { l.BatchWait = config.Duration(time.Second) },
		"same name":    func(l *config.Literal) { l.Parties[1].Name = "p1" },
		"same pin":     func(l *config.Literal) { l.Clients[0].Cert, l.Clients[0].Pin = l.Parties[0].Cert, l.Parties[0].Pin },
		"no addr":      func(l *config.Literal) { l.Parties[1].Addr = "" },
		"role":         func(l *config.Literal) { l.Clients[0].Role = "admin" },
		"no role":      func(l *config.Literal) { l.Clients[0].Role = "" },
		"server role":  func(l *config.Literal) { l.Parties[0].Role = config.RoleDevice },
		"metrics":      func(l *config.Literal) { l.Parties[0].Metrics = "0.0.0.0:9100" },
		"key server":   func(l *config.Literal) { k := member(t, "key", "a:9"); l.KeyServer = &k },
		"cluster id":   func(l *config.Literal) { l.ClusterID = "xyz" },
		"version":      func(l *config.Literal) { l.Version = 4 },
		"degraded":     func(l *config.Literal) { l.DegradedRate = 0.5 },
		"degraded NaN": func(l *config.Literal) { l.DegradedRate = math.NaN() },
	} {
		lit := twoParty(t)
		f(&lit)
		if _, err := config.New(lit, ""); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestMemberCertificates (issue 37, item 6): every member has a real
// certificate and the pin is that certificate's: a cluster.json whose
// "cert" is "-" (once an in-process test member without a certificate)
// is refused, naming the member, as is a pin of another certificate and a
// certificate two members share.
func TestMemberCertificates(t *testing.T) {
	for name, c := range map[string]struct {
		f    func(*config.Literal)
		want []string
	}{
		"no cert":            {func(l *config.Literal) { l.Parties[1].Cert = "-" }, []string{"p2", "not a PEM certificate", "pub.json"}},
		"no cert (operator)": {func(l *config.Literal) { l.Clients[0].Cert = "-" }, []string{"client", "not a PEM certificate"}},
		"wrong pin":          {func(l *config.Literal) { l.Parties[0].Pin = l.Parties[1].Pin }, []string{"p1", "the certificate's pin is", "pub.json"}},
		"same pin":           {func(l *config.Literal) { l.Clients[0].Cert, l.Clients[0].Pin = l.Parties[1].Cert, l.Parties[1].Pin }, []string{`"client"`, "used twice"}},
	} {
		dir := t.TempDir()
		lit := twoParty(t)
		c.f(&lit)
		b, err := json.Marshal(lit)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, config.File), b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = config.Load(dir)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the refusal %q does not mention %q", name, err, w)
			}
		}
	}
}

func TestSaveLoadAndOldFiles(t *testing.T) {
	dir := t.TempDir()
	lit := twoParty(t)
	lit.ClusterID = strings.Repeat("ab", 16)
	lit.Timeout = config.Duration(10 * time.Second)
	if err := config.Save(dir, lit); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(dir)
	if err != nil || p.ClusterID() != [16]byte{0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab} || p.Serial() != 1 {
		t.Fatal(err)
	}
	var back map[string]any
	b, _ := json.Marshal(p.Literal())
	json.Unmarshal(b, &back)
	if back["timeout"] != "10s" {
		t.Fatalf("timeout written as %v", back["timeout"])
	}
	// A configuration of the earlier layout (keys in the cluster directory).
	old := `{"version":1,"mode":"2pc","parties":[],"clients":[]}`
	os.WriteFile(filepath.Join(dir, config.File), []byte(old), 0o644)
	if _, err := config.Load(dir); err == nil || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("old config: %v", err)
	}
	if _, err := config.Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cluster init") {
		t.Fatalf("missing config: %v", err)
	}
}

// TestKeyFetchTimeouts: the public-key fetch's attempt and pause are
// configuration, with their documented defaults, and fit the whole wait.
func TestKeyFetchTimeouts(t *testing.T) {
	p, err := config.New(twoParty(t), "")
	if err != nil {
		t.Fatal(err)
	}
	to := p.Timeouts()
	if to.KeyFetchTry != config.DefaultKeyFetchTry || to.KeyFetchPause != config.DefaultKeyFetchPause {
		t.Fatalf("key fetch attempt %v, pause %v; defaults %v, %v", to.KeyFetchTry, to.KeyFetchPause, config.DefaultKeyFetchTry, config.DefaultKeyFetchPause)
	}
	if config.DefaultKeyFetchTry != 5*time.Second || config.DefaultKeyFetchPause != 200*time.Millisecond {
		t.Fatalf("the documented defaults are 5 s and 200 ms, not %v and %v", config.DefaultKeyFetchTry, config.DefaultKeyFetchPause)
	}
	if to.KeyFetchTry <= 0 || to.KeyFetchPause <= 0 || to.KeyFetchTry+to.KeyFetchPause > to.KeyFetch {
		t.Fatalf("attempt %v + pause %v do not fit the key fetch of %v", to.KeyFetchTry, to.KeyFetchPause, to.KeyFetch)
	}
}

// TestCheckLoopback: what 'idface serve --pprof' accepts as its metrics
// address (profiles only on loopback), and what a configuration accepts
// as a member's metrics address.
func TestCheckLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9100", "127.1.2.3:0", "[::1]:9100", "localhost:9100", "[::ffff:127.0.0.1]:1"} {
		if err := config.CheckLoopback(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	for _, addr := range []string{
		"0.0.0.0:9100", "[::]:9100", ":9100", // every interface
		"10.0.0.5:9100", "192.168.1.1:6060", "[2001:db8::1]:9100", "8.8.8.8:80",
		"example.com:9100", "localhost.example.com:9100", "LOCALHOST.evil:1", // names other than localhost are not resolved
		"127.0.0.1", "localhost", "", // no port
		"[fe80::1%lo]:9100", // a zone is not a loopback address
	} {
		if err := config.CheckLoopback(addr); err == nil {
			t.Errorf("%q accepted as a loopback address", addr)
		}
	}
	// A configuration refuses a public metrics address the same way.
	lit := twoParty(t)
	lit.Parties[0].Metrics = "127.0.0.1:9100"
	if _, err := config.New(lit, ""); err != nil {
		t.Fatalf("loopback metrics address refused: %v", err)
	}
	lit.Parties[0].Metrics = "[::]:9100"
	if _, err := config.New(lit, ""); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("public metrics address: %v", err)
	}
}

// TestSchemeAndBatchCap: mode he takes a scheme ("" is BGV), other modes
// refuse one, an unknown scheme is refused, and an enrollment request
// carries at most four of the scheme's column groups.
func TestSchemeAndBatchCap(t *testing.T) {
	he := func(scheme string) config.Literal {
		key := member(t, "key", "127.0.0.1:2")
		return config.Literal{Mode: config.ModeHE, Parties: []config.Member{member(t, "p1", "127.0.0.1:1")}, KeyServer: &key,
			Clients: []config.Member{operator(t, "client")}, Scheme: scheme}
	}
	for scheme, want := range map[string]struct {
		name  string
		batch int
	}{"": {"bgv", protocol.MaxBatch}, "bgv": {"bgv", protocol.MaxBatch}, "paillier": {"paillier", 4 * 341}} {
		p, err := config.New(he(scheme), "")
		if err != nil {
			t.Fatal(err)
		}
		if hemode.Scheme(p).Name() != want.name || p.MaxEnrollBatch() != want.batch {
			t.Errorf("scheme %q: %s, batch cap %d; want %s, %d", scheme, hemode.Scheme(p).Name(), p.MaxEnrollBatch(), want.name, want.batch)
		}
	}
	if _, err := config.New(he("ckks"), ""); err == nil {
		t.Error("scheme ckks accepted")
	}
	lit := twoParty(t)
	lit.Scheme = "paillier"
	if _, err := config.New(lit, ""); err == nil {
		t.Error("a scheme outside mode he accepted")
	}
	if p, _ := config.New(twoParty(t), ""); p.MaxEnrollBatch() != protocol.MaxBatch {
		t.Error("2pc batch cap")
	}
}

// TestClientWithoutRoleRefused (review 17, item 9): a client entry of
// cluster.json without a role used to become an operator, allowed to
// enroll and delete though no one had said so. It is refused at load with
// a message that names the client and the two roles to choose from.
func TestClientWithoutRoleRefused(t *testing.T) {
	dir := t.TempDir()
	lit := twoParty(t)
	lit.Clients = append(lit.Clients, members.Member(t, "gate", "", "")) // no role
	b, err := json.Marshal(lit)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(dir)
	if err == nil {
		t.Fatal("a client without a role was accepted")
	}
	for _, want := range []string{`"gate"`, "no role", config.RoleDevice, config.RoleOperator} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not mention %s", err, want)
		}
	}
	// With a role it loads, and the role is the one given.
	lit.Clients[1].Role = config.RoleDevice
	p, err := config.New(lit, dir)
	if err != nil {
		t.Fatal(err)
	}
	if gate := p.Pins()[lit.Clients[1].Pin]; gate.Role != network.RoleDevice {
		t.Fatalf("gate: %+v", gate)
	}
}
