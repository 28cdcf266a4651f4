package inproc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
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
