package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFsck: a stopped party's log with a damaged share of a live row, and
// one with a torn tail. fsck names the lost row's id and says what to do;
// --repair cuts the torn tail and keeps its bytes; the party then starts.
func TestFsck(t *testing.T) {
	dir, _ := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 40, 17)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "10", "--quiet")
	must(t, "cluster", "down", "--dir", dir)
	if out := must(t, "fsck", "--cluster", dir, "--party", "p2"); !strings.Contains(out, "intact") || !strings.Contains(out, "live         40") {
		t.Fatalf("fsck of a healthy party:\n%s", out)
	}
	log := filepath.Join(dir, "homes", "p2", "data", "shares.log")
	good, _ := os.ReadFile(log)

	// A flipped share bit of a live row in the first record's tail.
	bad := append([]byte(nil), good...)
	bad[16+20+200] ^= 1
	os.WriteFile(log, bad, 0o600)
	out, _, code := idface(t, "fsck", "--cluster", dir, "--party", "p2")
	if code == 0 || !strings.Contains(out, "fails its checksum") || !strings.Contains(out, "idface delete --id person-") {
		t.Fatalf("fsck of a damaged share: exit %d\n%s", code, out)
	}
	if _, errs, code := idface(t, "cluster", "up", "--dir", dir, "--timeout", "10s"); code == 0 || !strings.Contains(errs, "exited") {
		t.Fatalf("a party with a damaged share started: %d %s", code, errs)
	}
	must(t, "cluster", "down", "--dir", dir)

	// A torn tail: half of a record appended by a crash.
	os.WriteFile(log, append(append([]byte(nil), good...), good[16:60]...), 0o600)
	out, _, code = idface(t, "fsck", "--cluster", dir, "--party", "p2")
	if code == 0 || !strings.Contains(out, "torn tail of 44 bytes") {
		t.Fatalf("fsck of a torn tail: exit %d\n%s", code, out)
	}
	out = must(t, "fsck", "--cluster", dir, "--party", "p2", "--repair")
	if !strings.Contains(out, "cut a torn tail of 44 bytes") {
		t.Fatalf("repair:\n%s", out)
	}
	must(t, "fsck", "--cluster", dir, "--party", "p2")
	must(t, "cluster", "up", "--dir", dir)
	if ids := must(t, "fsck", "--cluster", dir, "--party", "p1", "--rows", "p1:0-2"); !strings.Contains(ids, `p1 row 1: "person-1" live=true`) {
		t.Fatalf("--rows:\n%s", ids)
	}
}
