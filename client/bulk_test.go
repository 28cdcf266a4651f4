package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/inproc"
	"github.com/idface/idface/protocol"
)

func live(t *testing.T, c *inproc.Cluster) int {
	t.Helper()
	g, err := c.RowMap("p1", "p2") // row counts go to servers only
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range g {
		n += int(s.Live)
	}
	return n
}

// TestBulkStopsAtTheFailure: with one id already enrolled in the sixth
// batch, batches 0-4 commit, the sixth is refused and nothing after it is
// sent, and the error says so exactly. At ca02e94 the next batch was sent
// after the failure (items 600-699 committed, reported as "enrolled 600
// of 1000" with a hole at 500-599).
func TestBulkStopsAtTheFailure(t *testing.T) {
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64}, 2))
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
		Batch:  100,
		Before: func(lo, hi int) error { before = append(before, client.Range{Lo: lo, Hi: hi}); return nil },
		After: func(lo, hi int, err error) {
			after = append(after, client.Range{Lo: lo, Hi: hi})
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
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64}, 2))
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
}
