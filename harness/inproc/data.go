package inproc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Templates draws n Gaussian templates of dimension d (test data; the same
// seed gives the same templates).
func Templates(n, d int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 0x1dface))
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, d)
		for j := range out[i] {
			out[i][j] = float32(r.NormFloat64())
		}
	}
	return out
}

// Items names templates prefix-0, prefix-1, ... for an enrollment.
func Items(xs [][]float32, prefix string) []protocol.Item {
	var it []protocol.Item
	for i, x := range xs {
		it = append(it, protocol.Item{ID: fmt.Sprintf("%s-%d", prefix, i), Template: x})
	}
	return it
}

// Ctx is a context for one step of a test, at most d long and cancelled
// at the test's cleanup.
func Ctx(t testing.TB, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// CheckShards fails the test unless each of member's shards holds live
// exactly the items whose ids are its (config.Params.ShardOf), and every
// shard some.
func (c *Cluster) CheckShards(t testing.TB, member string, items []protocol.Item) {
	t.Helper()
	rows := 0
	for s := range c.P.Shards() {
		h, err := c.Client("client", "").Health(Ctx(t, 10*time.Second), config.ShardName(member, s))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, it := range items {
			if c.P.ShardOf(it.ID) == s {
				want++
			}
		}
		if int(h.Live) != want || want == 0 {
			t.Fatalf("%s's shard %d holds %d live rows, %d ids are its", member, s, h.Live, want)
		}
		rows += int(h.Live)
	}
	if rows != len(items) {
		t.Fatalf("%s's shards hold %d rows of %d", member, rows, len(items))
	}
}

// CheckShardRefusals fails the test unless a shard of member that does
// not hold id (enrolled) refuses to delete it, refuses a device's
// identify (naming the coordinator), and refuses a ShardIdentify from
// server peer (another member: only its own coordinator may ask).
func (c *Cluster) CheckShardRefusals(t testing.TB, member, peer, id string, probe []float32) {
	t.Helper()
	other := config.ShardName(member, (c.P.ShardOf(id)+1)%c.P.Shards())
	ctx := Ctx(t, 30*time.Second)
	_, err := rpc.Call(ctx, c.Dialer("client"), other, &protocol.Delete{Auth: c.Sign(protocol.OpDelete, id), ID: id})
	if err == nil || !strings.Contains(err.Error(), "shard") {
		t.Fatalf("a delete of another shard's id: %v", err)
	}
	_, err = rpc.Call(ctx, c.Dialer("device"), other, &protocol.Identify{TopK: 1, Template: probe})
	if err == nil || !strings.Contains(err.Error(), "coordinator") {
		t.Fatalf("an identify at a shard: %v", err)
	}
	_, err = rpc.Call(ctx, c.Dialer(peer), other, &protocol.ShardIdentify{Query: [16]byte{1}, TopK: 1, Template: probe})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("a ShardIdentify from %s: %v", peer, err)
	}
}

// SameAnswer fails the test unless a sharded cluster's answer a has the
// unsharded cluster's candidates (b) for the same query: their plaintext
// scores (want, by the row index of ids "PREFIX-i") in the same order,
// the ids themselves where no other live row has that score, the scores
// where the cluster reveals them, none below the threshold where it does
// not, and none deleted.
func SameAnswer(t testing.TB, p *config.Params, want []int, deleted map[int]bool, a, b *protocol.IdentifyOK) {
	t.Helper()
	score := func(id string) int {
		_, n, _ := strings.Cut(id, "-")
		r, err := strconv.Atoi(n)
		if err != nil || r < 0 || r >= len(want) {
			t.Fatalf("candidate %q is no row of the test", id)
		}
		if deleted[r] {
			t.Fatalf("deleted row %s answered", id)
		}
		return want[r]
	}
	if len(a.Candidates) != len(b.Candidates) || a.Accepted != b.Accepted || a.ScoresHidden != b.ScoresHidden || a.BytesTotal == 0 {
		t.Fatalf("sharded %+v, unsharded %+v", a, b)
	}
	for j, cd := range a.Candidates {
		bs := score(b.Candidates[j].ID)
		if score(cd.ID) != bs || p.RevealScores() && (int(cd.Score) != bs || cd.Score != b.Candidates[j].Score) {
			t.Fatalf("#%d: sharded %s (plaintext %d, answered %d), unsharded %s (%d)", j, cd.ID, score(cd.ID), cd.Score, b.Candidates[j].ID, bs)
		}
		ofScore := 0 // ids may differ where rows tie
		for r, w := range want {
			if w == bs && !deleted[r] {
				ofScore++
			}
		}
		if ofScore == 1 && cd.ID != b.Candidates[j].ID {
			t.Fatalf("#%d: sharded %s, unsharded %s, both %d and no other row of that score", j, cd.ID, b.Candidates[j].ID, bs)
		}
		if !p.RevealScores() && bs < p.Threshold() {
			t.Fatalf("%s answered below the threshold", cd.ID)
		}
	}
}

// EnrollSplit enrolls items in every cluster of cs (a sharded cluster and
// the unsharded one beside it) in two batches: items[:split] through
// entry a, the rest through entry b. Each batch spans every shard.
func EnrollSplit(t testing.TB, cs []*Cluster, items []protocol.Item, split int, a, b string) {
	t.Helper()
	for _, c := range cs {
		for _, part := range []struct {
			entry string
			items []protocol.Item
		}{{a, items[:split]}, {b, items[split:]}} {
			if err := c.Client("client", part.entry).Enroll(Ctx(t, 60*time.Second), part.items); err != nil {
				t.Fatalf("enrolling through %s: %v", part.entry, err)
			}
		}
	}
}
