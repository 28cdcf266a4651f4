package heidface_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/codec/store"
)

// TestHEKeyFilesBound (issue 17, item 7): the key server's pair and a
// local server's copy of the public key are bound to the cluster and its
// key server; a pair of another cluster or key server is refused with the
// file named and what to do, and so is a key file of format 1.
func TestHEKeyFilesBound(t *testing.T) {
	s, err := heidface.New("", 64, 42, 16)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	bind := heidface.KeyBinding{Cluster: [16]byte{1, 2, 3}, KeyServer: "key"}
	k, err := heidface.LoadKeyPair(dir, s, bind, log) // first setup: generated
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heidface.LoadKeyPair(dir, s, bind, log); err != nil {
		t.Fatal(err)
	}
	local := heidface.KeyFile{filepath.Join(t.TempDir(), "public.key"), bind}
	if err := local.Save(heidface.PublicKeyFile, k.Public); err != nil {
		t.Fatal(err)
	}
	if fp, err := local.Fingerprint(); err != nil || fp != heidface.Fingerprint(k.Public) {
		t.Fatalf("fingerprint: %v", err)
	}
	for name, other := range map[string]heidface.KeyBinding{
		"another cluster":    {Cluster: [16]byte{1, 2, 4}, KeyServer: "key"},
		"another key server": {Cluster: bind.Cluster, KeyServer: "key2"},
	} {
		_, err := heidface.LoadKeyPair(dir, s, other, log)
		var be *store.FileBindingError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), filepath.Join(dir, "secret.key")) || !strings.Contains(err.Error(), "belongs to "+bind.String()) ||
			!strings.Contains(err.Error(), "will not generate a new key pair") {
			t.Fatalf("a key pair of %s: %v", name, err)
		}
		if _, err := (heidface.KeyFile{local.Path, other}).Load(heidface.PublicKeyFile); !errors.As(err, &be) || !strings.Contains(err.Error(), local.Path) {
			t.Fatalf("a public key of %s at a local server: %v", name, err)
		}
	}
	b, _ := os.ReadFile(local.Path)
	b[4] = 1
	os.WriteFile(local.Path, b, 0o644)
	if _, err := local.Load(heidface.PublicKeyFile); err == nil || !strings.Contains(err.Error(), "format 1;") || !strings.Contains(err.Error(), local.Path) {
		t.Fatalf("a key file of format 1: %v", err)
	}
}
