package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

// TestDedupe (issue 38 item 6): before enrolling, every template is
// searched for in the gallery through the cluster and compared with the
// batch's earlier items: an enrolled person under a new id and the same
// person twice in one batch are reported (the id, the id it matched, no
// score) and left out; new people are kept; in every mode.
func TestDedupe(t *testing.T) {
	const dim = 64
	tau := 0.3
	for _, tc := range []struct {
		lit config.Literal
		mu  int
	}{
		{config.Literal{Mode: config.Mode2PC, Dim: dim, Tau: &tau}, 2},
		{config.Literal{Mode: config.ModeMPC, Dim: dim, Tau: &tau}, 3},
		{config.Literal{Mode: config.ModeBlind, Dim: dim, Tau: &tau}, 2},
		{config.Literal{Mode: config.ModeReplicated, Dim: dim, Tau: &tau}, 3},
		{config.Literal{Mode: config.ModeReplicated, Dim: dim, Tau: &tau, HideProbes: true}, 3},
		{config.Literal{Mode: config.ModeHE, Dim: dim, Beta: 16, Tau: &tau}, 1},
	} {
		t.Run(fmt.Sprintf("%s/hidden=%v", tc.lit.Mode, tc.lit.HideProbes), func(t *testing.T) {
			tc.lit.Timeout = config.Duration(20 * time.Second)
			c := inproc.Start(t, inproc.Literal(tc.lit, tc.mu))
			cl := c.Client("client", "p1")
			xs := inproc.Templates(30, dim, 7)
			if err := cl.Enroll(inproc.Ctx(t, time.Minute), inproc.Items(xs[:20], "old")); err != nil {
				t.Fatal(err)
			}
			// old-3 again as "again-3"; new-20, new-21, new-20 again as
			// "twice-20"; new-22.
			batch := []protocol.Item{
				{ID: "again-3", Template: xs[3]},
				{ID: "new-20", Template: xs[20]},
				{ID: "new-21", Template: xs[21]},
				{ID: "twice-20", Template: xs[20]},
				{ID: "new-22", Template: xs[22]},
			}
			idx := []int{10, 11, 12, 13, 14}
			keepIdx, keep, dups, err := cl.Dedupe(inproc.Ctx(t, time.Minute), idx, batch, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			want := []client.Duplicate{{Item: 10, ID: "again-3", Matched: "old-3"}, {Item: 13, ID: "twice-20", Matched: "new-20", InBatch: true}}
			if fmt.Sprint(dups) != fmt.Sprint(want) || fmt.Sprint(keepIdx) != "[11 12 14]" || len(keep) != 3 || keep[0].ID != "new-20" || keep[2].ID != "new-22" {
				t.Fatalf("kept %v %v, duplicates %+v; want duplicates %+v", keepIdx, keep, dups, want)
			}
		})
	}
}
