package hemode_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/template"
)

// TestShards runs two local servers and the key server as a coordinator
// and three shards each against the same cluster unsharded: every answer
// has the plaintext's best rows in the unsharded order (ties aside),
// before and after a deletion; a shard holds its own ids only and answers
// only its coordinator; a local server's shard, a key server's shard or
// the key server's coordinator down fails queries naming it, and the
// cluster answers again once it is back.
func TestShards(t *testing.T) {
	const S = 3
	tau := 0.25
	lit := func(shards int) config.Literal {
		return inproc.Literal(config.Literal{Mode: config.ModeHE, Dim: dim, Beta: 16, Tau: &tau, Shards: shards,
			Timeout: config.Duration(15 * time.Second)}, 2)
	}
	sharded, whole := inproc.Start(t, lit(S)), inproc.Start(t, lit(0))
	xs := templates(60, 21)
	all := items(xs, "r")
	ids := make([]string, len(all))
	for i, it := range all {
		ids[i] = it.ID
	}
	for _, cl := range []*inproc.Cluster{sharded, whole} {
		// Two batches, through the sequencer and a participant: each
		// spans every shard (the client splits it).
		if err := cl.Client("client", "p1").Enroll(ctx(t), all[:35]); err != nil {
			t.Fatal(err)
		}
		if err := cl.Client("client", "p2").Enroll(ctx(t), all[35:]); err != nil {
			t.Fatal(err)
		}
	}
	sharded.CheckShards(t, "p1", all)
	sharded.CheckShards(t, "p2", all)
	deleted := map[int]bool{}
	check := func() {
		t.Helper()
		live := append([]string(nil), ids...)
		for r := range deleted {
			live[r] = ""
		}
		for q := range 6 {
			y := xs[q*9]
			for _, topK := range []int{1, 3, 10} {
				for _, entry := range []string{"p1", "p2"} {
					a, err := sharded.Client("device", entry).Identify(ctx(t), y, topK)
					if err != nil {
						t.Fatalf("probe %d top %d at %s: %v", q, topK, entry, err)
					}
					b, err := whole.Client("device", entry).Identify(ctx(t), y, topK)
					if err != nil {
						t.Fatal(err)
					}
					want := best(t, sharded.P, xs, live, y, topK)
					if len(a.Candidates) != len(want) || a.Accepted != (len(want) > 0) || !a.ScoresHidden || a.BytesTotal == 0 {
						t.Fatalf("probe %d top %d at %s: %+v, plaintext %v", q, topK, entry, a, want)
					}
					inproc.SameAnswer(t, sharded.P, plainScores(sharded.P, xs, y), deleted, a, b)
				}
			}
		}
	}
	check()
	deleted[22] = true
	for _, cl := range []*inproc.Cluster{sharded, whole} {
		if err := cl.Client("client", "p2").Delete(ctx(t), "r-22"); err != nil {
			t.Fatal(err)
		}
	}
	check()

	// A shard holds its own ids only, and answers only its coordinator.
	sharded.CheckShardRefusals(t, "p1", "p2", "r-1", xs[0])

	// A local server's shard, a key server shard, the key server's
	// coordinator down: queries fail naming it, and recover.
	for _, down := range []string{config.ShardName("p1", 1), config.ShardName("key", 2), "key"} {
		sharded.Stop(down)
		_, err := sharded.Client("device", "p1").Identify(ctx(t), xs[0], 1)
		if err == nil || !strings.Contains(err.Error(), down) {
			t.Fatalf("with %s down: %v", down, err)
		}
		t.Logf("with %s down: %v", down, err)
		sharded.Restart(down)
		check()
	}
	// One shard's ciphertexts never reach its key server shard: the
	// other shards' merges wait for it and name it.
	sharded.Net.SetFault("p2", "key#1", memnet.Fault{Silent: true}) // memnet names the dialer by its certificate
	_, err := sharded.Client("device", "p2").Identify(ctx(t), xs[0], 1)
	if err == nil || !strings.Contains(err.Error(), "shard 1") {
		t.Fatalf("with p2#1's query lost: %v", err)
	}
	t.Logf("with p2#1's query lost: %v", err)
	sharded.Net.SetFault("p2", "key#1", memnet.Fault{})
	check()
}

// plainScores are the plaintext scores of probe y against every row.
func plainScores(p *config.Params, rows [][]float32, y []float32) []int {
	ty, _ := template.Transform(y, p.Beta())
	out := make([]int, len(rows))
	for i, x := range rows {
		tx, _ := template.Transform(x, p.Alpha())
		out[i] = tx.Dot(ty)
	}
	return out
}
