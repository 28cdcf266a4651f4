package hemode_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/modes/hemode"
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

// TestGroupFilesBound (issue 17, item 7): group files were checked for
// their magic and d only, so swapping g000000.ct and g000001.ct of a
// Paillier cluster made a-0 answer as a-409 and back. Now every group
// file is bound to the cluster, its server, the mode, the public key, the
// generation and its group number, and records the slots it holds: a
// swapped file, another server's copy, a file under another key or of
// another generation, a stale backup of a file, a row log older than its
// files and a missing file all stop the server with the file named and
// what to do. With its own files back it answers as before.
func TestGroupFilesBound(t *testing.T) {
	tau := 0.25
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeHE, Scheme: "paillier", Dim: dim, Beta: 16, Tau: &tau,
		Timeout: config.Duration(30 * time.Second)}, 2))
	gr := hemode.Scheme(c.P).GroupRows()
	xs := templates(gr+20, 23)
	cl := c.Client("client", "")
	if err := cl.Enroll(ctx(t), items(xs[:gr+10], "a")); err != nil {
		t.Fatal(err)
	}
	file := func(name string, g int) string {
		return filepath.Join(c.DataDir(name), "groups", fmt.Sprintf("g%06d.ct", g))
	}
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	staleGroup := read(file("p1", 1)) // slots 0..9 of group 1
	staleLog := read(filepath.Join(c.DataDir("p2"), "rows.log"))
	more := items(xs[gr+10:], "b")
	if err := cl.Enroll(ctx(t), more); err != nil {
		t.Fatal(err)
	}
	c.Stop("p1")
	g0, g1 := read(file("p1", 0)), read(file("p1", 1))
	restore := func() {
		os.WriteFile(file("p1", 0), g0, 0o600)
		os.WriteFile(file("p1", 1), g1, 0o600)
	}
	os.WriteFile(file("p1", 0), g1, 0o600)
	os.WriteFile(file("p1", 1), g0, 0o600)
	refusedToStart(t, c, "p1", "swapped group files", file("p1", 0), "group 1, not 0", "backup")
	restore()
	os.WriteFile(file("p1", 0), read(file("p2", 0)), 0o600)
	refusedToStart(t, c, "p1", "another local server's group file", file("p1", 0), `server "p2", not "p1"`)
	restore()
	os.WriteFile(file("p1", 1), staleGroup, 0o600)
	refusedToStart(t, c, "p1", "a stale group file", file("p1", 1), "older than the log")
	restore()
	// Headers rewritten: under another key, of another generation.
	s := hemode.Scheme(c.P)
	rebind := func(change func(*heidface.GroupHeader)) {
		t.Helper()
		h, grp, err := s.ReadGroup(bytes.NewReader(g0), nil)
		if err != nil {
			t.Fatal(err)
		}
		change(&h)
		var buf bytes.Buffer
		if err := s.WriteGroup(&buf, h, grp); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(file("p1", 0), buf.Bytes(), 0o600)
	}
	rebind(func(h *heidface.GroupHeader) { h.Key[0] ^= 1 })
	refusedToStart(t, c, "p1", "a group file under another public key", file("p1", 0), "public key")
	rebind(func(h *heidface.GroupHeader) { h.Generation = 2 })
	refusedToStart(t, c, "p1", "a group file of another generation", file("p1", 0), "generation 2, not 1")
	rebind(func(h *heidface.GroupHeader) { h.Cluster[0] ^= 1 })
	refusedToStart(t, c, "p1", "a group file of another cluster", file("p1", 0), "cluster")
	restore()
	os.Remove(file("p1", 1))
	refusedToStart(t, c, "p1", "a missing group file", file("p1", 1), "is missing", "live rows")
	restore()
	// A participant whose row log is older than its group files.
	c.Stop("p2")
	p2log := filepath.Join(c.DataDir("p2"), "rows.log")
	current := read(p2log)
	os.WriteFile(p2log, staleLog, 0o600)
	refusedToStart(t, c, "p2", "a row log older than the group files", file("p2", 1), "the log is older than the file")
	os.WriteFile(p2log, current, 0o600)
	for _, name := range []string{"p2", "p1"} {
		if err := c.TryRestart(name); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitSettled()
	for _, name := range []string{"p1", "p2"} {
		for _, q := range []struct {
			x  []float32
			id string
		}{{xs[0], "a-0"}, {xs[gr], fmt.Sprintf("a-%d", gr)}, {xs[gr+15], "b-5"}} {
			r, err := c.Client("device", name).Identify(ctx(t), q.x, 1)
			if err != nil || len(r.Candidates) != 1 || r.Candidates[0].ID != q.id {
				t.Fatalf("%s: %+v %v, want %s", name, r, err, q.id)
			}
		}
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
	bind, err := store.ReadBinding(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Scan(path, bind, func(e store.Entry) error {
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
