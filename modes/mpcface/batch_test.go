package mpcface_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/mpcface"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// TestBatchedIdentify: concurrent identifies at one entry run in batches
// (one QueryBatch per helper, the union of their columns streamed once)
// and every answer equals the same identify run alone: the same
// candidates in the same order with the plaintext scores, for mu = 2 and
// 3, with topK from 1 to every row, over several blocks.
func TestBatchedIdentify(t *testing.T) {
	// The largest block (32 MiB) with identical probes: the union is then
	// one probe's 2*beta columns, the fewest, so a block holds the most
	// words (a helper once refused such batches as too large).
	for _, c := range []struct {
		mu, block int
		same      bool
	}{{2, 4096, false}, {3, 4096, false}, {2, 32 << 20, true}} {
		mu, block, same := c.mu, c.block, c.same
		t.Run(fmt.Sprintf("mu=%d/block=%d/same=%v", mu, block, same), func(t *testing.T) {
			mode := config.ModeMPC
			if mu == 2 {
				mode = config.Mode2PC
			}
			tau := 0.2
			// A long wait so that the concurrent identifies below gather.
			c := inproc.Start(t, inproc.Literal(config.Literal{Mode: mode, Dim: dim, Beta: 21, Tau: &tau,
				Timeout: config.Duration(10 * time.Second), MaxTopK: 1000, Block: block, RevealScores: true,
				BatchMax: 8, BatchWait: config.Duration(100 * time.Millisecond)}, mu))
			xs := templates(300, 41)
			if err := c.Client("client", "").Enroll(ctx(t), items(xs, "r")); err != nil {
				t.Fatal(err)
			}
			if err := c.Client("client", "").Delete(ctx(t), "r-3"); err != nil {
				t.Fatal(err)
			}
			entry := c.P.Party(mu - 1).Name
			cl := c.Client("client", entry)
			const n = 16
			probes := templates(n, 42)
			probes[0] = xs[5] // a genuine
			if same {
				for i := range probes {
					probes[i] = xs[5]
				}
			}
			topK := func(i int) int { return []int{1, 5, 300}[i%3] }
			batched := make([]*protocol.IdentifyOK, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { batched[i], errs[i] = cl.Identify(ctx(t), probes[i], topK(i)) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			batches, in := mpcface.Batched(c.Engine(entry))
			if in != n || batches >= n {
				t.Fatalf("%v identifies in %v batches: no batch formed", in, batches)
			}
			for i := range n {
				alone, err := cl.Identify(ctx(t), probes[i], topK(i)) // a batch of one
				if err != nil {
					t.Fatal(err)
				}
				want := plainScores(t, c.P, xs, probes[i])
				got := batched[i].Candidates
				if !slices.Equal(got, alone.Candidates) || batched[i].Accepted != alone.Accepted {
					t.Fatalf("probe %d: batched %v, alone %v", i, got, alone.Candidates)
				}
				if len(got) != min(topK(i), len(xs)-1) {
					t.Fatalf("probe %d: %d candidates, want %d", i, len(got), min(topK(i), len(xs)-1))
				}
				for _, cd := range got {
					var r int
					fmt.Sscanf(cd.ID, "r-%d", &r)
					if cd.ID == "r-3" || int(cd.Score) != want[r] {
						t.Fatalf("probe %d: %s scored %d, plaintext %d", i, cd.ID, cd.Score, want[r])
					}
				}
				if i == 0 && (!alone.Accepted || got[0].ID != "r-5") {
					t.Fatalf("the genuine probe: %+v", got[0])
				}
			}
		})
	}
}

// TestHelperRefusesBadBatch: a helper checks every probe of a batch as it
// checks a lone query (a wider one would hand the entry more of every
// row's shares), and refuses more probes than the cluster batches.
func TestHelperRefusesBadBatch(t *testing.T) {
	c := startDefault(t, 2)
	if err := c.Client("client", "").Enroll(ctx(t), items(templates(20, 43), "a")); err != nil {
		t.Fatal(err)
	}
	g, err := c.RowMap("p2", "p1")
	if err != nil {
		t.Fatal(err)
	}
	beta := c.P.Beta()
	ok := protocol.Probe{Plus: probePlus(beta), Minus: make([]uint64, template.Words(dim))}
	wide := protocol.Probe{Plus: probePlus(beta + 1), Minus: make([]uint64, template.Words(dim))}
	bmax, _ := c.P.Batch()
	many := make([]protocol.Probe, bmax+1)
	for i := range many {
		many[i] = ok
	}
	for _, tc := range []struct {
		probes []protocol.Probe
		want   string
	}{
		{[]protocol.Probe{ok, wide}, "query 1 of the batch"},
		{many, "batches at most"},
	} {
		q := &protocol.QueryBatch{Dim: dim, Beta: uint16(beta), Probes: tc.probes, Digest: g, BlockWords: 16}
		_, err := rpc.Call(ctx(t), serverDialer(c, "p1"), "p2", q)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Msg, tc.want) {
			t.Fatalf("a batch of %d probes: %v, want a refusal naming %q", len(tc.probes), err, tc.want)
		}
	}
}
