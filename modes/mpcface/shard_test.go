package mpcface_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// TestShards runs a sharded 2PC and MPC cluster (every party as a
// coordinator and three shards) beside an unsharded one on the same rows:
// every answer has the unsharded cluster's candidates (the same scores,
// and ids where scores are not tied), whether scores are revealed or not,
// alone or batched; rows land on their shards only; a deletion reaches its
// shard; a shard that is down or silent fails the queries, naming it,
// until it is back.
func TestShards(t *testing.T) {
	for _, c := range []struct {
		mu     int
		reveal bool
	}{{2, true}, {2, false}, {3, true}} {
		t.Run(fmt.Sprintf("mu=%d/reveal=%v", c.mu, c.reveal), func(t *testing.T) {
			const S = 3
			mode := config.ModeMPC
			if c.mu == 2 {
				mode = config.Mode2PC
			}
			tau := 0.2
			lit := func(shards int) config.Literal {
				return inproc.Literal(config.Literal{Mode: mode, Dim: dim, Beta: 21, Tau: &tau, Shards: shards,
					Timeout: config.Duration(5 * time.Second), MaxTopK: 1000, Block: 4096, RevealScores: c.reveal,
					BatchMax: 8, BatchWait: config.Duration(20 * time.Millisecond)}, c.mu)
			}
			sharded, whole := inproc.Start(t, lit(S)), inproc.Start(t, lit(0))
			xs := templates(150, 51)
			all := items(xs, "r")
			last := sharded.P.Party(c.mu - 1).Name
			inproc.EnrollSplit(t, []*inproc.Cluster{sharded, whole}, all, 90, "p1", last) // through two entries
			sharded.CheckShards(t, last, all)

			deleted := map[int]bool{}
			probes := append(templates(6, 52), xs[7], xs[99])
			topKs := []int{1, 5, 150}
			same := func(i int, a, b *protocol.IdentifyOK) {
				t.Helper()
				inproc.SameAnswer(t, sharded.P, plainScores(t, sharded.P, xs, probes[i]), deleted, a, b)
				if a.BytesSent == 0 || a.BytesRecv == 0 || a.BytesSent+a.BytesRecv != a.BytesTotal {
					t.Fatalf("probe %d: the entry's bytes sent %d and received %d, of %d in all", i, a.BytesSent, a.BytesRecv, a.BytesTotal)
				}
			}
			check := func() {
				t.Helper()
				for i, y := range probes {
					for _, topK := range topKs {
						a, err := sharded.Client("device", last).Identify(ctx(t), y, topK)
						if err != nil {
							t.Fatal(err)
						}
						b, err := whole.Client("device", last).Identify(ctx(t), y, topK)
						if err != nil {
							t.Fatal(err)
						}
						same(i, a, b)
					}
				}
				if a, err := sharded.Client("device", "p1").Identify(ctx(t), xs[99], 1); err != nil || !a.Accepted || a.Candidates[0].ID != "r-99" {
					t.Fatalf("a genuine probe: %+v, %v", a, err)
				}
			}
			check()
			// Concurrent identifies: each shard batches them.
			got := make([]*protocol.IdentifyOK, len(probes))
			errs := make([]error, len(probes))
			var wg sync.WaitGroup
			for i, y := range probes {
				wg.Go(func() { got[i], errs[i] = sharded.Client("device", last).Identify(ctx(t), y, 5) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for i, y := range probes {
				b, err := whole.Client("device", last).Identify(ctx(t), y, 5)
				if err != nil {
					t.Fatal(err)
				}
				same(i, got[i], b)
			}

			deleted[7] = true
			for _, cl := range []*inproc.Cluster{sharded, whole} {
				if err := cl.Client("client", last).Delete(ctx(t), "r-7"); err != nil {
					t.Fatal(err)
				}
			}
			for _, topK := range topKs {
				a, err := sharded.Client("device", last).Identify(ctx(t), xs[7], topK)
				if err != nil {
					t.Fatal(err)
				}
				b, err := whole.Client("device", last).Identify(ctx(t), xs[7], topK)
				if err != nil {
					t.Fatal(err)
				}
				same(len(probes)-2, a, b)
			}

			// A shard holds its own ids only, and answers only its coordinator.
			sharded.CheckShardRefusals(t, "p1", last, "r-1", xs[0])
			// A batch spanning shards is refused by the coordinator.
			spanning := &protocol.Enroll{Items: all[:1]}
			for _, it := range all[1:] { // the placement is keyed anew in every run: pick ids of two shards
				if sharded.P.ShardOf(it.ID) != sharded.P.ShardOf(all[0].ID) {
					spanning.Items = append(spanning.Items, it)
					break
				}
			}
			spanning.Auth = sharded.Sign(protocol.OpPut, spanning.IDs()...)
			if _, err := rpc.Call(ctx(t), sharded.Dialer("client"), "p1", spanning); err == nil || !strings.Contains(err.Error(), "one shard") {
				t.Fatalf("an enrollment spanning shards: %v", err)
			}

			// A helper shard down: every query fails, naming it, and
			// recovers when it is back.
			down := config.ShardName("p1", 1)
			sharded.Stop(down)
			_, err := sharded.Client("device", last).Identify(ctx(t), xs[0], 1)
			if err == nil || !strings.Contains(err.Error(), down) {
				t.Fatalf("with %s down: %v", down, err)
			}
			t.Logf("with %s down: %v", down, err)
			sharded.Restart(down)
			check()
			// A helper shard that never sends its columns: the query fails
			// naming the shard, in time.
			sharded.Net.SetFault(last, "p1#2", memnet.Fault{Silent: true})
			t0 := time.Now()
			_, err = sharded.Client("device", last).Identify(ctx(t), xs[0], 1)
			if err == nil || !strings.Contains(err.Error(), "shard 2") {
				t.Fatalf("with p1#2 silent: %v", err)
			}
			t.Logf("with p1#2 silent (%v): %v", time.Since(t0).Round(time.Millisecond), err)
			sharded.Net.SetFault(last, "p1#2", memnet.Fault{})
			check()
		})
	}
}
