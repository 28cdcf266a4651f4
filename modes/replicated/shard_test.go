package replicated_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// TestShards runs a sharded replicated cluster (every holder and the
// decider as a coordinator and three shards) beside an unsharded one on
// the same rows: every answer has the unsharded cluster's candidates
// (scores, ids where untied), checked; a deletion reaches its shard. Any
// one holder's shard down: the queries of every entry are still
// answered, flagged degraded, and right (an entry whose own shard is
// down hands the query to the next entry); answers are checked again once
// it is back. The decider's coordinator down fails queries, naming it.
func TestShards(t *testing.T) {
	for _, reveal := range []bool{true, false} {
		t.Run(fmt.Sprintf("reveal=%v", reveal), func(t *testing.T) {
			const S = 3
			tau := 0.2
			lit := func(shards int) config.Literal {
				return inproc.Literal(config.Literal{Mode: config.ModeReplicated, Dim: dim, Tau: &tau, Shards: shards, RevealScores: reveal,
					MaxTopK: 100, Timeout: config.Duration(5 * time.Second)}, 3)
			}
			sharded, whole := inproc.Start(t, lit(S)), inproc.Start(t, lit(0))
			xs := templates(90, 61)
			all := items(xs, "r")
			inproc.EnrollSplit(t, []*inproc.Cluster{sharded, whole}, all, 50, "p1", "p3")
			sharded.CheckShards(t, "p2", all)
			deleted := map[int]bool{}
			probes := append(templates(4, 62), xs[7], xs[40])
			ask := func(entry string, i, topK int) (a, b *protocol.IdentifyOK) {
				t.Helper()
				a, err := sharded.Client("device", entry).Identify(ctx(t), probes[i], topK)
				if err != nil {
					t.Fatalf("probe %d through %s: %v", i, entry, err)
				}
				if b, err = whole.Client("device", entry).Identify(ctx(t), probes[i], topK); err != nil {
					t.Fatal(err)
				}
				sameOrDecision(t, sharded.P, plain(t, sharded.P, xs, probes[i]), deleted, a, b)
				return a, b
			}
			check := func(entry string, degraded bool) {
				t.Helper()
				for i := range probes {
					for _, topK := range []int{1, 5, 90} {
						if a, _ := ask(entry, i, topK); a.Degraded != degraded {
							t.Fatalf("probe %d through %s: degraded %v, want %v", i, entry, a.Degraded, degraded)
						}
					}
				}
			}
			check("p2", false)
			deleted[7] = true
			for _, cl := range []*inproc.Cluster{sharded, whole} {
				if err := cl.Client("client", "p1").Delete(ctx(t), "r-7"); err != nil {
					t.Fatal(err)
				}
			}
			check("p1", false)

			// Under the coordinator's one query id, each shard's helpers key
			// their tags apart (else the decider, seeing every shard's
			// tags, could solve the MAC and forge one), and the two helpers
			// of one shard alike.
			qid := [16]byte{9}
			keys := map[[32]byte]string{}
			for s := range S {
				k2, err2 := replicated.TagKey(sharded.Engine(config.ShardName("p2", s)), 0, qid)
				k3, err3 := replicated.TagKey(sharded.Engine(config.ShardName("p3", s)), 0, qid)
				if err2 != nil || err3 != nil || k2 != k3 {
					t.Fatalf("shard %d: the helpers of entry p1 key its tags %x and %x (%v, %v)", s, k2[:4], k3[:4], err2, err3)
				}
				if other, dup := keys[k2]; dup {
					t.Fatalf("shards %s and %d key one query's tags alike", other, s)
				}
				keys[k2] = fmt.Sprint(s)
			}

			_, err := rpc.Call(ctx(t), sharded.Dialer("p3"), config.ShardName("p1", 0), &protocol.ShardIdentify{TopK: 1, Template: xs[0]})
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
				t.Fatalf("a ShardIdentify from another holder: %v", err)
			}

			// A helper's shard down: answered, degraded, right; checked
			// again once it is back.
			down := config.ShardName("p1", 1)
			sharded.Stop(down)
			check("p2", true)
			sharded.Restart(down)
			waitChecked(t, sharded, "p2", probes[0])
			check("p2", false)

			// The entry's own shard down: its coordinator cannot run the
			// query, the client hands it to the next entry, which answers
			// degraded.
			down = config.ShardName("p2", 2)
			sharded.Stop(down)
			cl := sharded.Client("device", "p2")
			a, err := cl.Identify(ctx(t), probes[4], 5)
			if err != nil || !a.Degraded || cl.Entry() == "p2" {
				t.Fatalf("with %s down: %+v, %v, entry %s", down, a, err, cl.Entry())
			}
			b, err := whole.Client("device", "p2").Identify(ctx(t), probes[4], 5)
			if err != nil {
				t.Fatal(err)
			}
			sameOrDecision(t, sharded.P, plain(t, sharded.P, xs, probes[4]), deleted, a, b)
			sharded.Restart(down)
			waitChecked(t, sharded, "p3", probes[0])
			check("p2", false)

			// The decider's coordinator down: no shard's answer merges, and
			// the client does not take the probe to another entry (which
			// would show it to one more member for nothing).
			sharded.Stop("decider")
			cl = sharded.Client("device", "p3")
			_, err = cl.Identify(ctx(t), probes[0], 1)
			if err == nil || !strings.Contains(err.Error(), "decider") || cl.Entry() != "p3" {
				t.Fatalf("with the decider's coordinator down: %v (entry now %s)", err, cl.Entry())
			}
			sharded.Restart("decider")
			check("p3", false)
		})
	}
}

// sameOrDecision is inproc.SameAnswer, but for a degraded answer where
// scores are hidden (a, sharded) against a checked one (b): that is the
// decision (Decider.result answers a degraded shard's best row only if
// it is the best over every shard), and any more candidates are the
// checked answer's, in its order, from the shards that were not degraded.
func sameOrDecision(t *testing.T, p *config.Params, want []int, deleted map[int]bool, a, b *protocol.IdentifyOK) {
	t.Helper()
	if !a.Degraded || p.RevealScores() {
		inproc.SameAnswer(t, p, want, deleted, a, b)
		return
	}
	score := func(id string) int {
		var r int
		if _, err := fmt.Sscanf(id, "r-%d", &r); err != nil || r < 0 || r >= len(want) || deleted[r] {
			t.Fatalf("candidate %q is no live row of the test", id)
		}
		return want[r]
	}
	if a.Accepted != b.Accepted || len(a.Candidates) > len(b.Candidates) || a.BytesTotal == 0 {
		t.Fatalf("degraded %+v, checked %+v", a, b)
	}
	j := 0 // a's candidates are a subsequence of b's, by score (ids may tie)
	for i, cd := range a.Candidates {
		for j < len(b.Candidates) && score(b.Candidates[j].ID) != score(cd.ID) {
			j++
		}
		if j == len(b.Candidates) || i == 0 && j != 0 || cd.Score != 0 {
			t.Fatalf("degraded %+v is not the decision of checked %+v", a, b)
		}
		j++
	}
}

// waitChecked waits until entry answers checked again (the holders it
// counted down are back).
func waitChecked(t *testing.T, c *inproc.Cluster, entry string, y []float32) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		a, err := c.Client("device", entry).Identify(ctx(t), y, 1)
		if err == nil && !a.Degraded {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers degraded or fails: %+v, %v", entry, a, err)
		}
	}
}

// TestShardsHidden runs hidden probes through a sharded replicated
// cluster (every holder and the decider as a coordinator and three
// shards) beside an unsharded one on the same rows: every answer has the
// unsharded cluster's candidates, and no server but the device's client
// sees the probe (a template sent to a coordinator is refused before any
// shard gets it). A probe runs once, also sharded; a shard answers only
// its own coordinator; a helper's shard down fails hidden probes (they
// need all three holders) until it is back.
func TestShardsHidden(t *testing.T) {
	const S = 3
	tau := 0.2
	lit := func(shards int) config.Literal {
		return inproc.Literal(config.Literal{Mode: config.ModeReplicated, Dim: dim, Tau: &tau, Shards: shards, HideProbes: true,
			MaxTopK: 10, Timeout: config.Duration(5 * time.Second)}, 3)
	}
	sharded, whole := inproc.Start(t, lit(S)), inproc.Start(t, lit(0))
	xs := templates(60, 71)
	all := items(xs, "r")
	inproc.EnrollSplit(t, []*inproc.Cluster{sharded, whole}, all, 30, "p1", "p3")
	sharded.CheckShards(t, "p1", all)
	probes := append(templates(3, 72), xs[5], xs[33], xs[58])
	check := func() {
		t.Helper()
		for i, y := range probes {
			for _, topK := range []int{1, 4} {
				entry := fmt.Sprintf("p%d", 1+(i+topK)%3)
				a, err := sharded.Client("device", entry).Identify(ctx(t), y, topK)
				if err != nil {
					t.Fatalf("probe %d top %d through %s: %v", i, topK, entry, err)
				}
				b, err := whole.Client("device", entry).Identify(ctx(t), y, topK)
				if err != nil {
					t.Fatal(err)
				}
				inproc.SameAnswer(t, sharded.P, plain(t, sharded.P, xs, y), nil, a, b)
				if i >= 3 && (!a.Accepted || a.Candidates[0].ID != fmt.Sprintf("r-%d", []int{5, 33, 58}[i-3])) {
					t.Fatalf("enrolled probe %d: %+v", i, a)
				}
			}
		}
	}
	check()

	d := sharded.Dialer("device")
	if _, err := rpc.Call(ctx(t), d, "p2", &protocol.Identify{TopK: 1, Template: xs[0]}); err == nil || !strings.Contains(err.Error(), "hides probes") {
		t.Fatalf("a template to a sharded hidden-probe cluster: %v", err)
	}
	m, err := client.HideProbe(sharded.P, sharded.Signer("device"), "device", xs[5], 1)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rpc.Call(ctx(t), d, "p2", m.HiddenIdentify)
	if err != nil {
		t.Fatal(err)
	}
	// One verdict a shard, sealed to the device: every one opens.
	if err := client.CheckVerdicts(sharded.P, m.VerdictKey, resp.(*protocol.IdentifyOK)); err != nil {
		t.Fatalf("the verdicts of a sharded hidden probe: %v", err)
	}
	if _, err := rpc.Call(ctx(t), d, "p1", m.HiddenIdentify); err == nil || !strings.Contains(err.Error(), "seen this hidden probe before") {
		t.Fatalf("the probe again through another coordinator: %v", err)
	}
	other := config.ShardName("p1", 1)
	if _, err := rpc.Call(ctx(t), d, other, m.HiddenIdentify); err == nil || !strings.Contains(err.Error(), "coordinator") {
		t.Fatalf("a hidden probe at a shard: %v", err)
	}
	_, err = rpc.Call(ctx(t), sharded.Dialer("p2"), other, &protocol.ShardHidden{Query: [16]byte{1}, Probe: *m.HiddenIdentify})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("a ShardHidden from another holder: %v", err)
	}

	down := config.ShardName("p3", 2)
	sharded.Stop(down)
	if _, err := sharded.Client("device", "p1").Identify(ctx(t), xs[5], 1); err == nil || !strings.Contains(err.Error(), "p3") {
		t.Fatalf("a hidden probe with %s down: %v", down, err)
	}
	sharded.Restart(down)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := sharded.Client("device", "p1").Identify(ctx(t), xs[5], 1); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("hidden probes still fail with %s back: %v", down, err)
		}
	}
	check()
}
