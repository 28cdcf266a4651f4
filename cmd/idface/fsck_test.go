package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/modes/hemode"
)

// TestFsckHEBindings (issue 17, item 7): fsck reports what an HE local
// server's public key, row log and group files and the key server's key
// pair are bound to, and whether that matches; a group file of another
// server, a public key replaced by another key and a key file of another
// cluster are problems that name the file.
func TestFsckHEBindings(t *testing.T) {
	tau := 0.25
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeHE, Dim: 64, Beta: 16, Tau: &tau,
		Timeout: config.Duration(15 * time.Second)}, 2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Client("client", "").Enroll(ctx, inproc.Items(inproc.Templates(10, 64, 1), "a")); err != nil {
		t.Fatal(err)
	}
	c.StopAll()
	env := func(name string) engine.Env {
		return engine.Env{Params: c.P, Self: name, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(error) {}}
	}
	local := func(want ...string) []string {
		t.Helper()
		var out bytes.Buffer
		srv, err := modes.ServerOf(c.P, "p1")
		if err != nil {
			t.Fatal(err)
		}
		problems, err := srv.Fsck(env("p1"), c.DataDir("p1"), engine.FsckOptions{}, &out)
		if err != nil {
			t.Fatal(err)
		}
		all := out.String() + strings.Join(problems, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Fatalf("fsck of p1 does not say %q:\n%s", w, all)
			}
		}
		return problems
	}
	keyServer := func(want ...string) []string {
		t.Helper()
		var out bytes.Buffer
		srv, err := modes.ServerOf(c.P, "key")
		if err != nil {
			t.Fatal(err)
		}
		problems, err := srv.Fsck(env("key"), c.DataDir("key"), engine.FsckOptions{}, &out)
		if err != nil {
			t.Fatal(err)
		}
		all := out.String() + strings.Join(problems, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Fatalf("fsck of the key server does not say %q:\n%s", w, all)
			}
		}
		return problems
	}
	if pr := local("public key", `key server "key"`, "the row log is bound to public key", `server "p1"`, "mode he", "generation 1", "bound as above"); len(pr) > 0 {
		t.Fatalf("an intact local server: %v", pr)
	}
	if pr := keyServer("both files bound to cluster", `key server "key"`, "matches this cluster", "fingerprint"); len(pr) > 0 {
		t.Fatalf("an intact key server: %v", pr)
	}
	g0 := filepath.Join(c.DataDir("p1"), "groups", "g000000.ct")
	own, _ := os.ReadFile(g0)
	other, _ := os.ReadFile(filepath.Join(c.DataDir("p2"), "groups", "g000000.ct"))
	os.WriteFile(g0, other, 0o600)
	if pr := local(g0, `server "p2", not "p1"`); len(pr) != 1 {
		t.Fatalf("p2's group file at p1: %v", pr)
	}
	os.WriteFile(g0, own, 0o600)

	pkPath := filepath.Join(c.DataDir("p1"), "public.key")
	pk, _ := os.ReadFile(pkPath)
	_, otherPK, err := hemode.Scheme(c.P).GenKeys()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pkPath, heidface.MarshalKeyFile(heidface.PublicKeyFile, hemode.KeyBinding(c.P), otherPK), 0o644)
	if pr := local("rows.log records public key", "public.key holds"); len(pr) == 0 {
		t.Fatal("a replaced public key is no problem")
	}
	os.WriteFile(pkPath, pk, 0o644)

	kpk := filepath.Join(c.DataDir("key"), "public.key")
	kb, _ := os.ReadFile(kpk)
	key, _, err := heidface.ParseKeyFile(kb, heidface.PublicKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	foreign := hemode.KeyBinding(c.P)
	foreign.Cluster[0] ^= 1
	os.WriteFile(kpk, heidface.MarshalKeyFile(heidface.PublicKeyFile, foreign, key), 0o644)
	if pr := keyServer(kpk, "belongs to cluster", "another cluster"); len(pr) != 1 {
		t.Fatalf("a key file of another cluster: %v", pr)
	}
}
