package tests

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/internal/codec/store"
)

// TestFsck: a stopped party's log with a damaged share of a live row, and
// one with a torn tail. fsck names the lost row's id and says what to do;
// --repair cuts the torn tail and keeps its bytes; the party then starts.
func TestFsck(t *testing.T) {
	dir, _ := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 40, 17)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "10", "--quiet")
	must(t, "cluster", "down", "--cluster", dir)
	if out := must(t, "fsck", "--cluster", dir, "--party", "p2"); !strings.Contains(out, "intact") || !strings.Contains(out, "live         40") {
		t.Fatalf("fsck of a healthy party:\n%s", out)
	}
	log := filepath.Join(dir, "homes", "p2", "data", "shares.log")
	good, _ := os.ReadFile(log)
	b, err := store.ReadBinding(log)
	if err != nil || b.Member != "p2" || b.Mode != "2pc" || b.Generation != 1 {
		t.Fatalf("p2's log is bound to %v (%v)", b, err)
	}
	hl := store.HeaderLen(b)

	// p1's log restored into p2's home (issue 17 item 1): fsck names the
	// owner, the server refuses to start.
	p1log, _ := os.ReadFile(filepath.Join(dir, "homes", "p1", "data", "shares.log"))
	os.WriteFile(log, p1log, 0o600)
	out, _, code := idface(t, "fsck", "--cluster", dir, "--party", "p2")
	if code == 0 || !strings.Contains(out, `belongs to member "p1"`) || !strings.Contains(out, "Restore p2's own backup") {
		t.Fatalf("fsck of p1's log in p2's home: exit %d\n%s", code, out)
	}
	if _, errs, code := idface(t, "cluster", "up", "--cluster", dir, "--timeout", "10s"); code == 0 || !strings.Contains(errs, "exited") {
		t.Fatalf("p2 started on p1's log: %d %s", code, errs)
	}
	must(t, "cluster", "down", "--cluster", dir)

	// A log of format 1 (no binding): refused until 'fsck --adopt' binds it.
	v1 := []byte("idfacelg\x00\x01\x00\x01") // magic, format 1, kind 1 (shares), CRC
	v1 = append(binary.BigEndian.AppendUint32(v1, store.Checksum(v1)), good[hl:]...)
	os.WriteFile(log, v1, 0o600)
	if out, _, code := idface(t, "fsck", "--cluster", dir, "--party", "p2"); code == 0 || !strings.Contains(out, "--adopt") {
		t.Fatalf("fsck of a format-1 log: exit %d\n%s", code, out)
	}
	if out := must(t, "fsck", "--cluster", dir, "--party", "p2", "--adopt"); !strings.Contains(out, `adopt: `+log+` is bound to member "p2"`) || !strings.Contains(out, "live         40") {
		t.Fatalf("fsck --adopt:\n%s", out)
	}
	if again, _ := os.ReadFile(log); string(again) != string(good) {
		t.Fatal("the adopted log differs from the log p2 wrote")
	}

	// A flipped share bit of a live row in the first record's tail.
	bad := append([]byte(nil), good...)
	var tail int64 = -1
	store.Scan(log, b, func(e store.Entry) error {
		if tail < 0 && len(e.Tail) > 0 {
			tail = e.TailOffset
		}
		return nil
	})
	bad[tail+5] ^= 1
	os.WriteFile(log, bad, 0o600)
	out, _, code = idface(t, "fsck", "--cluster", dir, "--party", "p2")
	if code == 0 || !strings.Contains(out, "fails its checksum") || !strings.Contains(out, "idface delete --id person-") {
		t.Fatalf("fsck of a damaged share: exit %d\n%s", code, out)
	}
	if _, errs, code := idface(t, "cluster", "up", "--cluster", dir, "--timeout", "10s"); code == 0 || !strings.Contains(errs, "exited") {
		t.Fatalf("a party with a damaged share started: %d %s", code, errs)
	}
	must(t, "cluster", "down", "--cluster", dir)

	// A torn tail: half of a record appended by a crash.
	os.WriteFile(log, append(append([]byte(nil), good...), good[hl:hl+44]...), 0o600)
	out, _, code = idface(t, "fsck", "--cluster", dir, "--party", "p2")
	if code == 0 || !strings.Contains(out, "torn tail of 44 bytes") {
		t.Fatalf("fsck of a torn tail: exit %d\n%s", code, out)
	}
	out = must(t, "fsck", "--cluster", dir, "--party", "p2", "--repair")
	if !strings.Contains(out, "cut a torn tail of 44 bytes") {
		t.Fatalf("repair:\n%s", out)
	}
	must(t, "fsck", "--cluster", dir, "--party", "p2")
	must(t, "cluster", "up", "--cluster", dir)
	if ids := must(t, "fsck", "--cluster", dir, "--party", "p1", "--rows", "p1:0-2"); !strings.Contains(ids, `p1 row 1: "person-1" live=true`) {
		t.Fatalf("--rows:\n%s", ids)
	}
}

// TestSecondServeRefused: a second server process on a running server's
// home (which would interleave writes to its log) is refused as already
// running, not with "bind: address already in use"; so is fsck --repair.
func TestSecondServeRefused(t *testing.T) {
	dir, _ := newCluster(t, "2pc", 2, "--metrics") // its metrics port is taken too: the lock must speak first
	_, errs, code := idface(t, "serve", "--cluster", dir, "--party", "p1")
	if code == 0 || !strings.Contains(errs, "in use by another idface process (idface serve, pid") || !strings.Contains(errs, "already running") {
		t.Fatalf("a second serve: exit %d, %q", code, errs)
	}
	if _, errs, code := idface(t, "fsck", "--cluster", dir, "--party", "p1", "--repair"); code == 0 || !strings.Contains(errs, "already running") {
		t.Fatalf("fsck --repair beside a running server: exit %d, %q", code, errs)
	}
	must(t, "cluster", "down", "--cluster", dir)
	must(t, "fsck", "--cluster", dir, "--party", "p1", "--repair")
}
