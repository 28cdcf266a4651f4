package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
)

// TestReplicatedHiddenProbes: a replicated cluster made with
// --hide-probes --beta 63, every server a real process: `idface identify`
// answers every probe with the plaintext's scores (the query is T_beta, so the
// answers are those of the cluster without --hide-probes), through every
// entry (a template sent as a plain identify is refused: the in-process
// TestHiddenWrongForm); `cluster status`
// says probes are hidden; with a holder killed, hidden probes are refused
// with the holder named, never answered, and answered again after its
// restart.
func TestReplicatedHiddenProbes(t *testing.T) {
	dir, cfg := newCluster(t, "replicated", 3, "--reveal-scores", "--hide-probes", "--beta", "63")
	if !cfg.HideProbes() {
		t.Fatal("cluster init --hide-probes made a cluster that shows probes")
	}
	d := newDataset(t, t.TempDir(), 120, 43)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "64", "--quiet")
	rows := transformRows(t, d.gallery, d.names, cfg.Alpha())
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:8])
	for _, entry := range []string{"p1", "p2", "p3"} {
		rs := parseResults(t, must(t, "identify", "--cluster", dir, "--entry", entry, "--templates", q, "--top", "3", "--json"))
		if len(rs) != 8 {
			t.Fatalf("%s: %d results for 8 probes", entry, len(rs))
		}
		for i, r := range rs {
			want := plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), 4)
			for j, w := range want[:3] {
				tied := j > 0 && want[j-1].score == w.score || want[j+1].score == w.score
				if r.Candidates[j].Score != w.score || !tied && r.Candidates[j].ID != w.id {
					t.Fatalf("%s query %d candidate %d: %s/%d, plaintext %s/%d", entry, i, j, r.Candidates[j].ID, r.Candidates[j].Score, w.id, w.score)
				}
			}
		}
	}
	status := must(t, "cluster", "status", "--cluster", dir)
	if !strings.Contains(status, "probes are hidden") {
		t.Fatalf("cluster status does not say probes are hidden:\n%s", status)
	}

	dev, err := cluster.Client(cfg, "device", "p1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// p3 killed: every hidden probe is refused naming it.
	if err := cluster.Kill(cfg, "p3"); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r, err := dev.Identify(ctx, d.queries[i], 1)
		if err == nil || !strings.Contains(err.Error(), "p3") {
			t.Fatalf("query %d with p3 killed: %v %+v", i, err, r)
		}
	}
	must(t, "cluster", "up", "--cluster", dir)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, err := dev.Identify(ctx, d.queries[0], 1)
		if err == nil {
			if r.Degraded || len(r.Candidates) != 1 {
				t.Fatalf("after p3's restart: %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p3 restarted, hidden probes still refused: %v", err)
		}
	}
}
