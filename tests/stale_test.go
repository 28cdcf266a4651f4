package tests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/protocol"
)

// TestReplicatedStaleBackup (issue 35 item 4), real processes: p3's data
// directory is backed up, a person is deleted, and p3's data is restored
// from the backup. 'idface fsck' said "intact" and every identify was
// refused ("p3's rows differ from the entry's"). fsck now says the copy
// is stale, behind p1 and p2; started, p3 catches up from them: every
// answer is checked and is the answer before the deletion without the
// deleted person, found nowhere, and the row maps agree.
func TestReplicatedStaleBackup(t *testing.T) {
	dir, cfg, d, cl := replicatedCluster(t, 30, 31)
	want := make([]*protocol.IdentifyOK, 6)
	var err error
	for i := range want {
		if want[i], err = cl.Identify(context.Background(), d.queries[i], 2); err != nil || want[i].Degraded {
			t.Fatalf("query %d: %v %+v", i, err, want[i])
		}
	}
	data := filepath.Join(dir, "homes", "p3", "data")
	backup := filepath.Join(t.TempDir(), "p3-data")
	restore := func(from, to string) {
		t.Helper()
		if err := cluster.Kill(cfg, "p3"); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(to); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(to, os.DirFS(from)); err != nil {
			t.Fatal(err)
		}
	}
	restore(data, backup)
	must(t, "cluster", "up", "--cluster", dir)
	gone := d.names[0]
	must(t, "delete", "--cluster", dir, "--id", gone)
	restore(backup, data)

	out, errs, code := idface(t, "fsck", "--cluster", dir, "--party", "p3")
	if code == 0 || !strings.Contains(out, "stale: behind p1 and p2 on origin p1's changes (1 missing)") {
		t.Fatalf("fsck of p3's backup, older than a deletion: exit %d\n%s%s", code, out, errs)
	}
	must(t, "cluster", "up", "--cluster", dir)
	for i := range want {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := cl.Identify(context.Background(), d.queries[i], 2)
			if err == nil && !r.Degraded {
				if slices.ContainsFunc(r.Candidates, func(c protocol.Candidate) bool { return c.ID == gone }) {
					t.Fatalf("query %d after the catch-up found %s, deleted: %+v", i, gone, r)
				}
				if !slices.ContainsFunc(want[i].Candidates, func(c protocol.Candidate) bool { return c.ID == gone }) && !slices.Equal(r.Candidates, want[i].Candidates) {
					t.Fatalf("query %d after the catch-up: %+v, before %+v", i, r, want[i])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("query %d, p3 restored 30 s ago: %v %+v", i, err, r)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// (A peer's first request on its connection to p3's previous process
	// may time out: status asks again.)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out, _, code := idface(t, "cluster", "status", "--cluster", dir, "--json")
		if code == 0 && strings.Contains(out, `"agreement":"agree"`) {
			break
		}
		if strings.Contains(out, `"differs"`) || time.Now().After(deadline) {
			t.Fatalf("cluster status after the catch-up: exit %d\n%s", code, out)
		}
	}
}
