package blind_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
)

// TestShards runs a sharded cluster (every holder and the decider as a
// coordinator and three shards) beside an unsharded one on the same rows:
// every answer, scores and ranks, equals the unsharded cluster's and the
// plaintext; rows land on their shards only; a deletion reaches its
// shard; a shard that is down fails the queries, naming it, until it is
// back.
func TestShards(t *testing.T) {
	for _, reveal := range []bool{true, false} {
		t.Run(fmt.Sprintf("reveal=%v", reveal), func(t *testing.T) {
			const S = 3
			sharded := start(t, 2, config.Literal{Beta: 21, Shards: S, RevealScores: reveal})
			whole := start(t, 2, config.Literal{Beta: 21, RevealScores: reveal})
			xs := templates(90, 11)
			all := items(xs, "r")
			inproc.EnrollSplit(t, []*inproc.Cluster{sharded, whole}, all, 50, "p1", "p2") // through both entries
			sharded.CheckShards(t, "p1", all)
			deleted := ""
			check := func() {
				t.Helper()
				for q := range 8 {
					y := xs[q*11]
					want := plain(t, sharded.P, xs, y)
					for _, topK := range []int{1, 5, 90} {
						a, err := sharded.Client("device", "p2").Identify(ctx(t), y, topK)
						if err != nil {
							t.Fatal(err)
						}
						b, err := whole.Client("device", "p2").Identify(ctx(t), y, topK)
						if err != nil {
							t.Fatal(err)
						}
						if len(a.Candidates) != len(b.Candidates) || a.Accepted != b.Accepted || a.ScoresHidden != b.ScoresHidden {
							t.Fatalf("probe %d top %d: sharded %+v, unsharded %+v", q, topK, a, b)
						}
						for j, cd := range a.Candidates {
							var i int
							fmt.Sscanf(cd.ID, "r-%d", &i)
							if cd.ID == deleted || want[i] < sharded.P.Threshold() && !reveal {
								t.Fatalf("probe %d: %s answered (plaintext %d, deleted %q)", q, cd.ID, want[i], deleted)
							}
							if reveal && (int(cd.Score) != want[i] || cd.Score != b.Candidates[j].Score) {
								t.Fatalf("probe %d top %d: #%d %s scored %d, plaintext %d, unsharded #%d %d", q, topK, j, cd.ID, cd.Score, want[i], j, b.Candidates[j].Score)
							}
						}
						if !reveal && len(a.Candidates) > 0 && a.Candidates[0].ID != b.Candidates[0].ID {
							// Ties aside (none here: the best row is the probe itself), the best is the same row.
							t.Fatalf("probe %d: best %s sharded, %s unsharded", q, a.Candidates[0].ID, b.Candidates[0].ID)
						}
						if a.BytesTotal == 0 {
							t.Fatal("no bytes_total")
						}
					}
				}
			}
			check()
			deleted = "r-22"
			for _, cl := range []*inproc.Cluster{sharded, whole} {
				if err := cl.Client("client", "p2").Delete(ctx(t), deleted); err != nil {
					t.Fatal(err)
				}
			}
			check()

			// A shard holds its own ids only, and answers only its coordinator.
			sharded.CheckShardRefusals(t, "p1", "p2", "r-1", xs[0])

			// A helper shard down: every query fails, naming it, and
			// recovers when it is back.
			down := config.ShardName("p1", 1)
			sharded.Stop(down)
			_, err := sharded.Client("device", "p2").Identify(ctx(t), xs[0], 1)
			if err == nil || !strings.Contains(err.Error(), down) {
				t.Fatalf("with %s down: %v", down, err)
			}
			sharded.Restart(down)
			check()
			// A holder shard's vector never reaches its decider shard: the
			// queries fail naming shard 1 (the other shards' merges wait
			// for it and say so), never blaming a shard whose parts came.
			sharded.Net.SetFault("p2", "decider#1", memnet.Fault{Silent: true}) // memnet names the dialer by its certificate
			_, err = sharded.Client("device", "p2").Identify(ctx(t), xs[0], 1)
			if err == nil || !strings.Contains(err.Error(), "shard 1") {
				t.Fatalf("with p2#1's vector lost: %v", err)
			}
			t.Logf("with p2#1's vector lost: %v", err)
			sharded.Net.SetFault("p2", "decider#1", memnet.Fault{})
			check()
			// The decider's coordinator down: no shard's answer can be merged.
			sharded.Stop("decider")
			_, err = sharded.Client("device", "p2").Identify(ctx(t), xs[0], 1)
			if err == nil || !strings.Contains(err.Error(), "decider") {
				t.Fatalf("with the decider's coordinator down: %v", err)
			}
			sharded.Restart("decider")
			check()
		})
	}
}
