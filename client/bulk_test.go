package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

// start2PC starts a 2PCFace cluster of two parties, dimension 64.
func start2PC(t *testing.T) *inproc.Cluster {
	return inproc.Start(t, inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64}, 2))
}

// live counts p1's live rows (over its shards in a sharded cluster).
func live(t *testing.T, c *inproc.Cluster) int {
	t.Helper()
	n := 0
	for sh := range c.P.Shards() {
		of, as := "p1", "p2" // row counts go to servers only
		if c.P.Shards() > 1 {
			of, as = config.ShardName(of, sh), config.ShardName(as, sh)
		}
		g, err := c.RowMap(of, as)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range g {
			n += int(s.Live)
		}
	}
	return n
}

// TestBulkStopsAtTheFailure: with one id already enrolled in the sixth
// batch, batches 0-4 commit, the sixth is refused and nothing after it is
// sent, and the error says so exactly. At ca02e94 the next batch was sent
// after the failure (items 600-699 committed, reported as "enrolled 600
// of 1000" with a hole at 500-599).
func TestBulkStopsAtTheFailure(t *testing.T) {
	c := start2PC(t)
	cl := c.Client("client", "")
	xs := inproc.Templates(1001, 64, 1)
	if err := cl.Enroll(inproc.Ctx(t, 30*time.Second), inproc.Items(xs[1000:], "taken")); err != nil {
		t.Fatal(err)
	}
	items := inproc.Items(xs[:1000], "p")
	items[550].ID = "taken-0"
	var before, after []client.Range
	var outcomes []error
	done, err := cl.EnrollAll(context.Background(), len(items), func(i int) protocol.Item { return items[i] }, client.Bulk{
		Batch: 100,
		Before: func(idx []int) error {
			before = append(before, client.Range{Lo: idx[0], Hi: idx[len(idx)-1] + 1})
			return nil
		},
		After: func(idx []int, err error) {
			after = append(after, client.Range{Lo: idx[0], Hi: idx[len(idx)-1] + 1})
			outcomes = append(outcomes, err)
		},
	})
	var be *client.BulkError
	if !errors.As(err, &be) {
		t.Fatalf("got %v, want a *BulkError", err)
	}
	if done != 500 || be.Done() != 500 || live(t, c) != 501 {
		t.Fatalf("done %d, error's %d, %d live rows; want 500 and 501 live", done, be.Done(), live(t, c))
	}
	if !slices.Equal(be.Committed, []client.Range{{Lo: 0, Hi: 500}}) || !slices.Equal(be.Refused, []client.Range{{Lo: 500, Hi: 600}}) ||
		be.InDoubt != nil || !slices.Equal(be.NotSent(), []client.Range{{Lo: 600, Hi: 1000}}) {
		t.Fatalf("committed %v, refused %v, in doubt %v, not sent %v", be.Committed, be.Refused, be.InDoubt, be.NotSent())
	}
	want := "enrolled 500 of 1000 (items 0-499); items 500-599 were refused and rolled back; items 600-999 were not sent: "
	if got := be.Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("message %q", got)
	}
	if len(before) != 6 || !slices.Equal(before, after) || outcomes[5] == nil || outcomes[4] != nil {
		t.Fatalf("before %v, after %v, outcomes %v", before, after, outcomes)
	}
	if !client.Refused(outcomes[5]) {
		t.Fatalf("a duplicate id is not a refusal: %v", outcomes[5])
	}
}

// TestBulkInFlightRanges: with requests in flight the committed items may
// not be a prefix; the ranges still add up to the rows the cluster holds.
func TestBulkInFlightRanges(t *testing.T) {
	c := start2PC(t)
	cl := c.Client("client", "")
	xs := inproc.Templates(2001, 64, 2)
	if err := cl.Enroll(inproc.Ctx(t, 30*time.Second), inproc.Items(xs[2000:], "taken")); err != nil {
		t.Fatal(err)
	}
	items := inproc.Items(xs[:2000], "p")
	items[1234].ID = "taken-0"
	_, err := cl.EnrollAll(context.Background(), len(items), func(i int) protocol.Item { return items[i] }, client.Bulk{Batch: 50, InFlight: 4})
	var be *client.BulkError
	if !errors.As(err, &be) {
		t.Fatalf("got %v", err)
	}
	if n := live(t, c); n != be.Done()+1 {
		t.Fatalf("%d live rows, the error says %d committed (%v)", n, be.Done(), be)
	}
	if !slices.Contains(be.Refused, client.Range{Lo: 1200, Hi: 1250}) {
		t.Fatalf("refused %v", be.Refused)
	}
	total := be.Done()
	for _, rs := range [][]client.Range{be.Refused, be.InDoubt, be.NotSent()} {
		for _, r := range rs {
			total += r.Hi - r.Lo
		}
	}
	if total != 2000 {
		t.Fatalf("ranges cover %d of 2000 items: %v", total, be)
	}
	if s := client.FormatRanges([]client.Range{{Lo: 0, Hi: 1}, {Lo: 3, Hi: 7}}, 1); s != "1, 4-7" {
		t.Fatal(s)
	}
	var many []client.Range
	for i := range client.MaxListedRanges + 2 {
		many = append(many, client.Range{Lo: 2 * i, Hi: 2*i + 1})
	}
	if s := client.FormatRanges(many, 0); s != "0, 2, 4, 6, 8, 10, 12, 14 and 2 more ranges" {
		t.Fatal(s)
	}
}

// TestBulkShardBatches: in a sharded cluster every batch holds one
// shard's items, so a refusal in one shard leaves no committed item
// reported as refused, with one request in flight per shard or two.
// Before, a batch went to every shard at once and a duplicate id in one
// shard's part marked the whole batch refused and rolled back while the
// other shards had committed their parts (the journal then held enrolled
// ids as not enrolled).
func TestBulkShardBatches(t *testing.T) {
	const S = 3
	for _, inFlight := range []int{1, 2} {
		t.Run(fmt.Sprintf("inflight=%d", inFlight), func(t *testing.T) {
			c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64, Shards: S}, 2))
			cl := c.Client("client", "p1")
			xs := inproc.Templates(601, 64, 3)
			if err := cl.Enroll(inproc.Ctx(t, 30*time.Second), inproc.Items(xs[600:], "taken")); err != nil {
				t.Fatal(err)
			}
			items := inproc.Items(xs[:600], "p")
			items[250].ID = "taken-0"
			var mu sync.Mutex
			var before, after [][]int
			_, err := cl.EnrollAll(context.Background(), len(items), func(i int) protocol.Item { return items[i] }, client.Bulk{
				Batch: 40, InFlight: inFlight,
				Before: func(idx []int) error {
					mu.Lock()
					defer mu.Unlock()
					before = append(before, slices.Clone(idx))
					return nil
				},
				After: func(idx []int, _ error) {
					mu.Lock()
					defer mu.Unlock()
					after = append(after, slices.Clone(idx))
				},
			})
			var be *client.BulkError
			if !errors.As(err, &be) {
				t.Fatalf("got %v, want a *BulkError", err)
			}
			sortBatches := func(bs [][]int) { slices.SortFunc(bs, func(a, b []int) int { return a[0] - b[0] }) }
			sortBatches(before)
			sortBatches(after)
			if !slices.EqualFunc(before, after, slices.Equal) {
				t.Fatalf("batches before %v, after %v", before, after)
			}
			for _, b := range before {
				if len(b) > 40 || !slices.IsSorted(b) {
					t.Fatalf("a batch of %d items: %v", len(b), b)
				}
				for _, i := range b {
					if c.P.ShardOf(items[i].ID) != c.P.ShardOf(items[b[0]].ID) {
						t.Fatalf("a batch spans shards: items %d and %d", b[0], i)
					}
				}
			}
			if n := live(t, c); n != be.Done()+1 {
				t.Fatalf("%d live rows, the error says %d committed (%v)", n, be.Done(), be)
			}
			// Every item in exactly one of committed, refused, in doubt and
			// not sent; the refused ones in the refusing shard only.
			seen := make([]int, len(items))
			for _, rs := range [][]client.Range{be.Committed, be.Refused, be.InDoubt, be.NotSent()} {
				for _, r := range rs {
					for i := r.Lo; i < r.Hi; i++ {
						seen[i]++
					}
				}
			}
			for i, k := range seen {
				if k != 1 {
					t.Fatalf("item %d reported %d times: %v", i, k, be)
				}
			}
			refused := 0
			for _, r := range be.Refused {
				for i := r.Lo; i < r.Hi; i++ {
					if c.P.ShardOf(items[i].ID) != c.P.ShardOf("taken-0") {
						t.Fatalf("item %d of shard %d reported refused; the refusal was in shard %d", i, c.P.ShardOf(items[i].ID), c.P.ShardOf("taken-0"))
					}
					refused++
				}
			}
			if refused == 0 || refused > 40 || !slices.ContainsFunc(be.Refused, func(r client.Range) bool { return r.Lo <= 250 && 250 < r.Hi }) {
				t.Fatalf("refused %v", be.Refused)
			}
			if got := be.Error(); strings.Count(got, ",") > 4*client.MaxListedRanges {
				t.Fatalf("the report lists every range: %q", got)
			}
		})
	}
}

// TestBulkSpread: with Spread, batch k goes through party k mod mu, so
// each party's segment gets its share of the rows (each party is the
// origin of its own), every item is committed once, and a failure still
// stops the enrollment with the items accounted for.
func TestBulkSpread(t *testing.T) {
	c := start2PC(t)
	cl := c.Client("client", "")
	xs := inproc.Templates(1001, 64, 2)
	items := inproc.Items(xs[:1000], "s")
	done, err := cl.EnrollAll(context.Background(), len(items), func(i int) protocol.Item { return items[i] },
		client.Bulk{Batch: 100, InFlight: 2, Spread: true})
	if err != nil || done != len(items) {
		t.Fatalf("spread enrollment: %d of %d, %v", done, len(items), err)
	}
	g, err := c.RowMap("p1", "p2")
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 2 || g[0].Live != 500 || g[1].Live != 500 {
		t.Fatalf("rows by origin %+v, want 500 in each party's segment (10 batches of 100, in turn)", g)
	}
	if n := live(t, c); n != 1000 {
		t.Fatalf("%d live rows, want 1000", n)
	}
	// A failure: an id taken in the fourth batch (through p2) stops the
	// rest, and the error accounts for every item.
	more := inproc.Items(xs[:1000], "t")
	more[350].ID = "s-7"
	_, err = cl.EnrollAll(context.Background(), len(more), func(i int) protocol.Item { return more[i] }, client.Bulk{Batch: 100, Spread: true})
	var be *client.BulkError
	if !errors.As(err, &be) {
		t.Fatalf("a spread enrollment with a taken id: %v, want a *BulkError", err)
	}
	accounted := 0
	for _, rs := range [][]client.Range{be.Committed, be.Refused, be.InDoubt, be.NotSent()} {
		for _, r := range rs {
			accounted += r.Hi - r.Lo
		}
	}
	if accounted != len(more) || len(be.Refused) == 0 {
		t.Fatalf("the failure accounts for %d of %d items (refused %v): %v", accounted, len(more), be.Refused, err)
	}
}
