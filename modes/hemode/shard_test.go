package hemode_test

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/hemode"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
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
	inproc.EnrollSplit(t, []*inproc.Cluster{sharded, whole}, all, 35, "p1", "p2") // through the sequencer and a participant
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
	if err == nil || !strings.Contains(err.Error(), "shard 1") || !strings.Contains(err.Error(), "p2#1") {
		t.Fatalf("with p2#1's query lost: %v", err) // the key server's merge names its shard 1, the coordinator its own p2#1
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

// shardCluster is a sharded HE cluster (two local servers, S shards) with
// rows r-0..r-39 enrolled.
func shardCluster(t *testing.T, S int) (*inproc.Cluster, [][]float32, []protocol.Item) {
	tau := 0.25
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeHE, Dim: dim, Beta: 16, Tau: &tau, Shards: S,
		Timeout: config.Duration(15 * time.Second)}, 2))
	xs := templates(40, 21)
	all := items(xs, "r")
	if err := c.Client("client", "p1").Enroll(ctx(t), all); err != nil {
		t.Fatal(err)
	}
	return c, xs, all
}

// TestShardsAnswerOnlyTheMerged: a local server's shards receive from the
// key server's shards only the rows that made the merged answer, never
// the other rows of their shard that passed (a review found each shard
// receiving its own best, S times top K in all, before the fix).
func TestShardsAnswerOnlyTheMerged(t *testing.T) {
	const S = 3
	c, xs, _ := shardCluster(t, S)
	y := xs[0]
	seen := map[int]bool{}
	for i := 0; len(seen) < S; i++ { // the same template once in every shard
		id := fmt.Sprintf("dup-%d", i)
		if s := c.P.ShardOf(id); !seen[s] {
			seen[s] = true
			if err := c.Client("client", "p1").Enroll(ctx(t), []protocol.Item{{ID: id, Template: y}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, topK := range []int{1, 2} {
		var qid [16]byte
		if _, err := rand.Read(qid[:]); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		var wg sync.WaitGroup
		for s := range S {
			wg.Go(func() {
				ids, ranks, err := hemode.ShardQuery(ctx(t), c.Engine(config.ShardName("p1", s)), topK, y, qid)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("shard %d: %v", s, err)
				}
				for i, r := range ranks {
					if int(r) >= topK {
						t.Errorf("shard %d received %s with rank %d of top %d", s, ids[i], r, topK)
					}
				}
				got = append(got, ids...)
			})
		}
		wg.Wait()
		if len(got) != topK {
			t.Fatalf("top %d: the local shards received %v", topK, got)
		}
	}
}

// TestShardsMergeShare: one local server whose shards send queries that
// never complete at the merge (to some key server shards only, or a
// different id to each) holds at most its share of the merge, and the
// other local server's identifies are answered meanwhile. A review filled
// the merger with 128 such queries and p1 was refused before the first
// fix; another, at S = 2, with p2's queries spread over both key server
// shards, before the second.
func TestShardsMergeShare(t *testing.T) {
	for _, tc := range []struct{ S, to, n int }{{3, 2, 128}, {2, 2, 160}} {
		t.Run(fmt.Sprintf("S=%d", tc.S), func(t *testing.T) {
			c, xs, _ := shardCluster(t, tc.S)
			fps := make([][32]byte, tc.to)
			for s := range tc.to {
				pk, err := rpc.Call(ctx(t), c.Dialer(config.ShardName("p2", s)), "key", &protocol.PublicKeyRequest{})
				if err != nil {
					t.Fatal(err)
				}
				fps[s] = sha256.Sum256(pk.(*protocol.PublicKey).Key)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			refused := 0
			for i := range tc.n {
				s := i % tc.to
				var qid [16]byte
				rand.Read(qid[:])
				wg.Go(func() {
					_, err := rpc.Call(ctx(t), c.Dialer(config.ShardName("p2", s)), "key",
						&protocol.HEQuery{Key: fps[s], TopK: 1, CtBytes: uint32(hemode.Scheme(c.P).CiphertextBytes()), Query: qid})
					if err != nil && strings.Contains(err.Error(), "its share") {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				})
			}
			time.Sleep(300 * time.Millisecond)
			if a, err := c.Client("device", "p1").Identify(ctx(t), xs[3], 1); err != nil || !a.Accepted || a.Candidates[0].ID != "r-3" {
				t.Fatalf("p1's identify while p2's queries wait at the merge: %+v, %v", a, err)
			}
			wg.Wait()
			if refused == 0 {
				t.Fatalf("p2's %d incomplete queries were all held", tc.n)
			}
			t.Logf("%d of p2's %d incomplete queries refused", refused, tc.n)
		})
	}
}

// TestShardsMergePerLocalServer: the key server merges a query's shards
// only when they come from one local server. Shards of p1 and p2 sending
// one query id to every key server shard between them never complete a
// merge (before the fix they did, each answered with ranks among the
// other's scores); p2's part sent first does not spoil p1's query of its
// id; each local server's own query with one id is answered.
func TestShardsMergePerLocalServer(t *testing.T) {
	const S = 3
	c, _, _ := shardCluster(t, S)
	fps := make([][32]byte, S)
	for s := range S {
		pk, err := rpc.Call(ctx(t), c.Dialer(config.ShardName("p1", s)), "key", &protocol.PublicKeyRequest{})
		if err != nil {
			t.Fatal(err)
		}
		fps[s] = sha256.Sum256(pk.(*protocol.PublicKey).Key)
	}
	var qid [16]byte
	rand.Read(qid[:])
	ask := func(members []string) []error {
		errs := make([]error, S)
		var wg sync.WaitGroup
		for s := range S {
			wg.Go(func() {
				_, errs[s] = rpc.Call(ctx(t), c.Dialer(config.ShardName(members[s], s)), "key",
					&protocol.HEQuery{Key: fps[s], TopK: 1, CtBytes: uint32(hemode.Scheme(c.P).CiphertextBytes()), Query: qid})
			})
		}
		wg.Wait()
		return errs
	}
	for s, err := range ask([]string{"p2", "p1", "p1"}) {
		if err == nil || !strings.Contains(err.Error(), "did not report in time") {
			t.Fatalf("key server shard %d answered a merge of p1's and p2's shards: %v", s, err)
		}
	}
	// p2's part at one shard first does not spoil p1's query of that id
	// (the merge refused p1's part as the shard's second, before the fix).
	rand.Read(qid[:])
	spoiler := make(chan error, 1)
	go func() {
		_, err := rpc.Call(ctx(t), c.Dialer(config.ShardName("p2", 0)), "key",
			&protocol.HEQuery{Key: fps[0], TopK: 1, CtBytes: uint32(hemode.Scheme(c.P).CiphertextBytes()), Query: qid})
		spoiler <- err
	}()
	time.Sleep(100 * time.Millisecond)
	for s, err := range ask([]string{"p1", "p1", "p1"}) {
		if err != nil {
			t.Fatalf("p1's query at key server shard %d after p2 sent its id to shard 0: %v", s, err)
		}
	}
	if err := <-spoiler; err == nil {
		t.Fatal("p2's lone part completed a merge")
	}
	for _, m := range []string{"p1", "p2"} {
		for s, err := range ask([]string{m, m, m}) {
			if err != nil {
				t.Fatalf("%s's query at key server shard %d: %v", m, s, err)
			}
		}
	}
}

// TestShardsRefusalUnnamed: the key server's refusal of a query with more
// passing rows than an honest one reaches the device as unsharded, not
// naming the shard where the rows passed.
func TestShardsRefusalUnnamed(t *testing.T) {
	c, xs, _ := shardCluster(t, 3)
	var same []protocol.Item
	for i := 0; len(same) < 20; i++ {
		if id := fmt.Sprintf("same-%d", i); c.P.ShardOf(id) == 1 {
			same = append(same, protocol.Item{ID: id, Template: xs[0]})
		}
	}
	if err := c.Client("client", "p1").Enroll(ctx(t), same); err != nil {
		t.Fatal(err)
	}
	_, err := c.Client("device", "p1").Identify(ctx(t), xs[0], 1)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Msg != hemode.Refused {
		t.Fatalf("refusal %v, want exactly %q", err, hemode.Refused)
	}
}
