package hemode_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/internal/inproc"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/protocol"
)

// refusedToStart restarts name and wants it refused with an error that
// contains every one of want.
func refusedToStart(t *testing.T, c *inproc.Cluster, name, what string, want ...string) {
	t.Helper()
	err := c.TryRestart(name)
	if err == nil {
		c.Stop(name)
		t.Fatalf("%s: %s started", what, name)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %v\nwant it to say %q", what, err, w)
		}
	}
}

// TestLocalServerNeverAdoptsANewKey (issue 17, item 2): a local server
// with data but no public.key fetched whatever key the key server held
// then; after the key server had made a new key pair, 19 of 20 strangers
// were accepted, and the fingerprint check passed because the local
// server had just fetched the new key. Deleting public.key to fetch it
// again is a likely reaction to a mismatch error. Now a local server with
// data never fetches a key, and the row log records the key it is bound
// to, so a replaced public.key is refused too.
func TestLocalServerNeverAdoptsANewKey(t *testing.T) {
	c := start(t, 1)
	xs := templates(20, 21)
	if err := c.Client("client", "").Enroll(ctx(t), items(xs, "a")); err != nil {
		t.Fatal(err)
	}
	// The key server loses its key pair and starts with a new one.
	c.Stop("p1")
	c.Stop("key")
	for _, f := range []string{"secret.key", "public.key"} {
		if err := os.Remove(filepath.Join(c.DataDir("key"), f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.TryRestart("key"); err != nil {
		t.Fatal(err)
	}
	pk := filepath.Join(c.DataDir("p1"), "public.key")
	backup, err := os.ReadFile(pk)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(pk)
	refusedToStart(t, c, "p1", "public.key removed", "public.key is missing", "will not fetch", "backup")
	if _, err := os.Stat(pk); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the local server fetched a key: %v", err)
	}
	// The key server's new public key copied in by hand: the row log
	// records another key.
	fresh, err := os.ReadFile(filepath.Join(c.DataDir("key"), "public.key"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pk, fresh, 0o644)
	refusedToStart(t, c, "p1", "the key server's new public key", "rows.log", "records public key", "public.key holds", "backup")
	// public.key restored from the backup: the server starts, and the key
	// server (with its new key) refuses its queries instead of answering.
	os.WriteFile(pk, backup, 0o644)
	c.Restart("p1")
	_, err = c.Client("device", "").Identify(ctx(t), templates(1, 22)[0], 1)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInconsistent || !strings.Contains(pe.Msg, "public key") {
		t.Fatalf("a query under the old key: %v", err)
	}
}

// TestRowLogWithoutKeyRecordRefused: a row log written before the first
// record bound it to a public key (an earlier idface) is refused with what
// to do, never read as if it were bound to whatever public.key holds now.
func TestRowLogWithoutKeyRecordRefused(t *testing.T) {
	c := start(t, 1)
	if err := c.Client("client", "").Enroll(ctx(t), items(templates(5, 24), "a")); err != nil {
		t.Fatal(err)
	}
	c.Stop("p1")
	path := filepath.Join(c.DataDir("p1"), "rows.log")
	var offsets []int64
	if _, err := store.Scan(path, store.KindHERows, func(e store.Entry) error {
		offsets = append(offsets, e.Offset)
		return nil
	}); err != nil || len(offsets) < 2 {
		t.Fatalf("%v %v", offsets, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same log without its first record: the file header, then the
	// reservation and the decision.
	os.WriteFile(path, append(b[:offsets[0]:offsets[0]], b[offsets[1]:]...), 0o600)
	refusedToStart(t, c, "p1", "a row log without its key record", path, "earlier idface", "new cluster")
}
