package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// TestBlindSealedEnrollment: a blind cluster made by 'cluster init' gives
// every share holder a seal key (0600, published in the configuration);
// bulk enrollment through the CLI is sealed end to end over QUIC and the
// rows identify as the plaintext says; a plain enrollment, which would
// show the entry the templates, is refused; a holder whose seal key is
// damaged refuses to start, saying so, and starts again once restored.
func TestBlindSealedEnrollment(t *testing.T) {
	dir, cfg := newCluster(t, "blind", 2, "--reveal-scores")
	keys := map[string][]byte{}
	for k, m := range cfg.Parties() {
		h, err := home.Open(cluster.HomeDir(dir, m.Name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(h.Dir, "seal.key")
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v (mode %v)", path, err, fi.Mode().Perm())
		}
		key, err := h.SealKey()
		if err != nil {
			t.Fatal(err)
		}
		pub, ok := cfg.SealKey(k)
		if !ok || !pub.Equal(key.Public()) {
			t.Fatalf("the configuration does not publish %s's seal key", m.Name)
		}
		keys[m.Name], _ = os.ReadFile(path)
	}

	d := newDataset(t, t.TempDir(), 200, 77)
	must(t, "enroll", "--cluster", dir, "--entry", "p2", "--ids", d.ids, "--templates", d.enroll, "--batch", "48", "--quiet")
	rows := transformRows(t, d.gallery, d.names, cfg.Alpha())
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:15])
	check := func(entry string) {
		t.Helper()
		rs := parseResults(t, must(t, "identify", "--cluster", dir, "--entry", entry, "--templates", q, "--top", "2", "--json"))
		if len(rs) != 15 {
			t.Fatalf("%d answers for 15 queries", len(rs))
		}
		for i, r := range rs {
			want := plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), 2)
			if len(r.Candidates) == 0 || r.Candidates[0].Score != want[0].score ||
				want[0].score != want[1].score && r.Candidates[0].ID != want[0].id {
				t.Fatalf("query %d via %s: %+v, plaintext %v", i, entry, r.Candidates, want)
			}
		}
	}
	check("p1")
	check("p2")

	// A plain Enroll is not served in blind mode.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := rpc.Call(ctx, dialAs(t, cfg, "client"), "p1", &protocol.Enroll{Items: []protocol.Item{{ID: "plain", Template: d.gallery[0]}}})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("a plain enrollment: %v", err)
	}

	must(t, "cluster", "down", "--dir", dir)
	path := filepath.Join(cluster.HomeDir(dir, "p2"), "seal.key")
	bad := []byte(strings.Replace(string(keys["p2"]), "\n", "\nA", 1))
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, rc := idface(t, "cluster", "up", "--dir", dir)
	logB, _ := os.ReadFile(filepath.Join(dir, "logs", "p2.log"))
	if rc == 0 || !strings.Contains(out+errOut+string(logB), "damaged") {
		t.Fatalf("a damaged seal key: exit %d\n%s%s\nlog:\n%s", rc, out, errOut, logB)
	}
	idface(t, "cluster", "down", "--dir", dir)
	if err := os.WriteFile(path, keys["p2"], 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, "cluster", "up", "--dir", dir)
	check("p2")
}
