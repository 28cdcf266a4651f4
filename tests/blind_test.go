package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestBlindCLI drives blind mode through the CLI as a user would: a
// cluster of share holders and a decider, enrollment through one entry,
// identification through another with exact scores in a research cluster,
// bytes_total, deletion, a restart of every server.
func TestBlindCLI(t *testing.T) {
	for _, mu := range []int{2, 3} {
		t.Run(fmt.Sprintf("mu=%d", mu), func(t *testing.T) {
			dir, cfg := newCluster(t, "blind", mu, "--reveal-scores")
			if cfg.DeciderName() != "decider" || cfg.Ring().Bits != 8 {
				t.Fatalf("decider %q, ring %d", cfg.DeciderName(), cfg.Ring().Bits)
			}
			d := newDataset(t, t.TempDir(), 300, 41)
			must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "64", "--quiet")
			rows := transformRows(t, d.gallery, d.names, cfg.Alpha())
			q := filepath.Join(t.TempDir(), "q.npy")
			writeNpy(t, q, d.queries[:20])
			check := func(rows []plainRow, entry string) {
				t.Helper()
				rs := parseResults(t, must(t, "identify", "--cluster", dir, "--entry", entry, "--templates", q, "--top", "3", "--json"))
				for i, r := range rs {
					want := plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), 4)
					for j, w := range want[:3] {
						// The decider never sees rows, so rows with equal scores
						// come in random order: the id must match where the
						// score is not tied.
						tied := j > 0 && want[j-1].score == w.score || want[j+1].score == w.score
						if r.Candidates[j].Score != w.score || !tied && r.Candidates[j].ID != w.id {
							t.Fatalf("query %d candidate %d: %s/%d, plaintext %s/%d", i, j, r.Candidates[j].ID, r.Candidates[j].Score, w.id, w.score)
						}
					}
					// mu vectors of one byte per row into the decider, plus the
					// query and framing.
					if r.BytesTotal < uint64(mu*300) || r.BytesTotal > uint64(mu*300+3000) {
						t.Fatalf("query %d: bytes_total %d for %d rows and mu = %d", i, r.BytesTotal, 300, mu)
					}
				}
			}
			check(rows, cfg.Party(mu-1).Name)
			must(t, "delete", "--cluster", dir, "--entry", cfg.Party(mu-1).Name, "--id", "person-3")
			live := append(append([]plainRow{}, rows[:3]...), rows[4:]...)
			check(live, "p1")
			must(t, "cluster", "down", "--cluster", dir)
			if out := must(t, "fsck", "--cluster", dir, "--party", "p2"); !strings.Contains(out, "intact") || !strings.Contains(out, "erased shares 1") {
				t.Fatalf("fsck of a holder:\n%s", out)
			}
			if out := must(t, "fsck", "--cluster", dir, "--party", "decider"); !strings.Contains(out, "keeps no data") {
				t.Fatalf("fsck of the decider:\n%s", out)
			}
			must(t, "cluster", "up", "--cluster", dir)
			check(live, "p1")
			if st := must(t, "cluster", "status", "--cluster", dir); !strings.Contains(st, "decider") || !strings.Contains(st, "all servers agree") {
				t.Fatalf("status:\n%s", st)
			}
		})
	}
}
