package main

import (
	"path/filepath"
	"testing"

	"github.com/idface/idface/config"
)

// TestAssembleSettingsNew: a new configuration (no file at --out yet)
// with --tau takes the cosine given and a fresh cluster id; the file not
// being there is no error (a refactoring once returned it).
func TestAssembleSettingsNew(t *testing.T) {
	tau := 0.2
	out := filepath.Join(t.TempDir(), "cluster.json")
	got, err := assembleSettings(config.Literal{Mode: "2pc", Tau: &tau}, map[string]bool{"tau": true}, out, "")
	if err != nil || got.ClusterID == "" || got.Tau == nil || *got.Tau != 0.2 {
		t.Fatalf("a new cluster with --tau: %+v, %v", got, err)
	}
}
