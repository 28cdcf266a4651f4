package tests

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
	shares "github.com/idface/idface/sharing/replicated"
)

// TestReplicatedAlteredShares: a replicated holder run by a real process
// whose stored shares were altered by its operator (one row's own share,
// the unit checksum made to match, so the log opens as intact): every query through the cluster is refused, the decider naming
// the pair that holds the altered share; none is answered, rightly or
// wrongly. With that holder stopped the other two answer correctly,
// degraded.
func TestReplicatedAlteredShares(t *testing.T) {
	dir, cfg, d, cl := replicatedCluster(t, 40, 23)
	var err error
	want := make([]*protocol.IdentifyOK, 6)
	for i := range want {
		if want[i], err = cl.Identify(context.Background(), d.queries[i], 1); err != nil || !want[i].Accepted {
			t.Fatalf("query %d: %v %+v", i, err, want[i])
		}
	}

	// p2's operator adds 1 to every element of row 7's own share (s_2), so
	// that every ternary query (an odd number, beta, of +-1 coefficients)
	// changes that row's share-score: a change at positions a query does
	// not use would not change its answer.
	if err := cluster.Kill(cfg, "p2"); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "homes", "p2", "data", "shares.log")
	b, err := store.ReadBinding(log)
	if err != nil {
		t.Fatal(err)
	}
	var tail int64 = -1
	if _, err := store.Scan(log, b, func(e store.Entry) error {
		if tail < 0 && len(e.Tail) > 0 {
			tail = e.TailOffset
		}
		return nil
	}); err != nil || tail < 0 {
		t.Fatalf("no shares in p2's log (%v)", err)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ring().Bits != 8 {
		t.Fatalf("a ring of %d bits; the alteration below is for k = 8", cfg.Ring().Bits)
	}
	pair := 2 * cfg.Dim()             // a holder's two shares of a row, a byte an element
	size := pair + shares.TrailerSize // and the row's trailer (salts, record)
	unit := raw[tail+int64(7*(size+4)):][:size+4]
	for j := range pair / 2 { // k = 8: one byte an element
		unit[j]++
	}
	binary.BigEndian.PutUint32(unit[size:], store.Checksum(unit[:size]))
	if err := os.WriteFile(log, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, "cluster", "up", "--cluster", dir)
	if out, _, _ := idface(t, "fsck", "--cluster", dir, "--party", "p2", "--json"); strings.Contains(out, "checksum") {
		t.Fatalf("the altered log does not open as intact; the test alters the wrong bytes:\n%s", out)
	}

	// The entry's connection to p2 died with it: until its probe sees p2
	// again (about a second) it answers without p2, degraded and right.
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := cl.Identify(context.Background(), d.queries[0], 1)
		if err != nil {
			break
		}
		if !r.Degraded || !slices.Equal(r.Candidates, want[0].Candidates) {
			t.Fatalf("with p2's share altered: answered %+v", r)
		}
		if time.Now().After(deadline) {
			t.Fatal("the entry never uses p2 again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range want {
		r, err := cl.Identify(context.Background(), d.queries[i], 1)
		if err == nil {
			t.Fatalf("query %d with p2's share altered: answered %+v", i, r)
		}
		if !strings.Contains(err.Error(), "p1/p2") || !strings.Contains(err.Error(), "disagree") {
			t.Fatalf("query %d with p2's share altered: %v; want the pair p1/p2 named", i, err)
		}
	}

	// Without p2 the two others answer, degraded, as before the change,
	// once the helper and the decider find p2 down by their own contact
	// (a query before that is refused, never answered wrongly).
	if err := cluster.Kill(cfg, "p2"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, err := cl.Identify(context.Background(), d.queries[0], 1)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with p2 killed a minute ago, queries are still refused: %v", err)
		}
	}
	for i := range want {
		r, err := cl.Identify(context.Background(), d.queries[i], 1)
		if err != nil || !r.Degraded || r.Accepted != want[i].Accepted || !slices.Equal(r.Candidates, want[i].Candidates) {
			t.Fatalf("query %d with p2 stopped: %v %+v, want %+v degraded", i, err, r, want[i])
		}
	}
}

// TestReplicatedRebuild: a holder's data directory is deleted (its home
// kept); an enrollment goes on meanwhile; `idface party rebuild` restores
// it from the two others; after `cluster up` every answer is checked and
// identical to the answers before, the new row is found, and every
// holder's row map agrees (cluster status exit 0); `idface reshare` then
// refreshes every share and the answers stay.
func TestReplicatedRebuild(t *testing.T) {
	dir, cfg, d, cl := replicatedCluster(t, 50, 29)
	var err error
	want := make([]*protocol.IdentifyOK, 8)
	for i := range want {
		if want[i], err = cl.Identify(context.Background(), d.queries[i], 2); err != nil || want[i].Degraded {
			t.Fatalf("query %d: %v %+v", i, err, want[i])
		}
	}
	if err := cluster.Kill(cfg, "p2"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "homes", "p2", "data")); err != nil {
		t.Fatal(err)
	}
	late := slices.Clone(d.queries[0])
	for j := range late {
		late[j] = -late[j] // matches no probe of want
	}
	q := filepath.Join(t.TempDir(), "late.npy")
	writeNpy(t, q, [][]float32{late})
	must(t, "enroll", "--cluster", dir, "--id", "late", "--template", q)

	out := must(t, "party", "rebuild", "--cluster", dir, "--party", "p2")
	if !strings.Contains(out, "rows restored") || !strings.Contains(out, "rebuilt") {
		t.Fatalf("party rebuild:\n%s", out)
	}
	if _, errs, code := idface(t, "party", "rebuild", "--cluster", dir, "--party", "p2"); code == 0 || !strings.Contains(errs, "already exists") {
		t.Fatalf("a second rebuild over the rebuilt log: exit %d: %s", code, errs)
	}
	must(t, "cluster", "up", "--cluster", dir)
	for deadline := time.Now().Add(15 * time.Second); ; {
		r, err := cl.Identify(context.Background(), late, 1)
		if err == nil && !r.Degraded && len(r.Candidates) == 1 && r.Candidates[0].ID == "late" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the rebuild: %v %+v", err, r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := range want {
		r, err := cl.Identify(context.Background(), d.queries[i], 2)
		if err != nil || r.Degraded || !slices.Equal(r.Candidates, want[i].Candidates) {
			t.Fatalf("query %d after the rebuild: %v %+v, before %+v", i, err, r, want[i])
		}
	}
	if out, _, code := idface(t, "cluster", "status", "--cluster", dir, "--json"); code != 0 || !strings.Contains(out, `"agreement":"agree"`) {
		t.Fatalf("cluster status after the rebuild: exit %d\n%s", code, out)
	}
	// Then the reshare (the rebuilt holder's lost disk may be a thief's):
	// every answer stays.
	if out := must(t, "reshare", "--cluster", dir); !strings.Contains(out, "p1: the 51 rows of its segment reshared at every holder (deleted ones included); now epoch 1") {
		t.Fatalf("reshare:\n%s", out)
	}
	for i := range want {
		r, err := cl.Identify(context.Background(), d.queries[i], 2)
		if err != nil || r.Degraded || !slices.Equal(r.Candidates, want[i].Candidates) {
			t.Fatalf("query %d after the reshare: %v %+v, before %+v", i, err, r, want[i])
		}
	}
}

// replicatedCluster starts a replicated cluster of real processes with
// people enrolled and a device's client through p1.
func replicatedCluster(t *testing.T, people int, seed uint64) (string, *config.Params, *dataset, *client.Client) {
	t.Helper()
	dir, cfg := newCluster(t, "replicated", 3)
	d := newDataset(t, t.TempDir(), people, seed)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	cl, err := cluster.Client(cfg, "device", "p1")
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg, d, cl
}
