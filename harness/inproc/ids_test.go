package inproc_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// TestListIDs (issue 47 item 3): every mode's entry, and in a sharded
// cluster every shard, answers an operator's list of the enrolled ids
// (live ones only, in byte order, paged after the last id returned) and
// check of one; a device is refused by its client and, sent anyway, by
// the server.
func TestListIDs(t *testing.T) {
	const dim = 64
	tau := 0.2
	for _, tc := range []struct {
		name string
		lit  config.Literal
		mu   int
	}{
		{"2pc", config.Literal{Mode: config.Mode2PC, Beta: 21}, 2},
		{"blind", config.Literal{Mode: config.ModeBlind}, 2},
		{"replicated", config.Literal{Mode: config.ModeReplicated}, 3},
		{"he", config.Literal{Mode: config.ModeHE, Beta: 16}, 1},
		{"2pc/shards=3", config.Literal{Mode: config.Mode2PC, Beta: 21, Shards: 3}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.lit.Dim, tc.lit.Tau = dim, &tau
			tc.lit.Timeout = config.Duration(20 * time.Second)
			c := inproc.Start(t, inproc.Literal(tc.lit, tc.mu))
			ctx := inproc.Ctx(t, time.Minute)
			op := c.Client("client", "p1")
			if ids, more, err := op.IDs(ctx, "", 10); err != nil || len(ids) != 0 || more {
				t.Fatalf("an empty cluster: %q, more %v, %v", ids, more, err)
			}
			items := inproc.Items(inproc.Templates(23, dim, 7), "r")
			if err := op.Enroll(ctx, items); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i, it := range items {
				if i%5 == 0 {
					if err := op.Delete(ctx, it.ID); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want = append(want, it.ID)
			}
			slices.Sort(want)
			var got []string
			after := ""
			for pages := 0; ; pages++ {
				ids, more, err := op.IDs(ctx, after, 4)
				if err != nil {
					t.Fatal(err)
				}
				if len(ids) > 4 || more && len(ids) != 4 || pages > 10 {
					t.Fatalf("page %d after %q: %q, more %v", pages, after, ids, more)
				}
				got = append(got, ids...)
				if !more {
					break
				}
				after = ids[len(ids)-1]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %q, want %q", got, want)
			}
			if ids, more, err := op.IDs(ctx, want[len(want)-1], 4); err != nil || len(ids) != 0 || more {
				t.Fatalf("after the last id: %q, more %v, %v", ids, more, err)
			}
			for _, id := range []string{items[1].ID, items[5].ID, "nobody"} {
				ok, err := op.Exists(ctx, id)
				if err != nil || ok != slices.Contains(want, id) {
					t.Errorf("exists %q: %v, %v", id, ok, err)
				}
			}
			dev := c.Client("device", "p1")
			if _, _, err := dev.IDs(ctx, "", 10); err == nil || !strings.Contains(err.Error(), "device (device) may not list the enrolled ids") {
				t.Errorf("a device's list: %v", err)
			}
			if _, err := dev.Exists(ctx, items[1].ID); err == nil || !strings.Contains(err.Error(), "operators only") {
				t.Errorf("a device's check: %v", err)
			}
			server := "p1"
			if tc.lit.Shards > 1 {
				server = config.ShardName("p1", 0)
			}
			for _, m := range []protocol.Msg{&protocol.ListIDs{Limit: 10}, &protocol.HasID{ID: items[1].ID}} {
				_, err := rpc.Call(ctx, c.Dialer("device"), server, m)
				var pe *protocol.Error
				if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden || !strings.Contains(err.Error(), fmt.Sprintf("device (device) may not send %v", m.Type())) {
					t.Errorf("a device's %v sent to %s: %v", m.Type(), server, err)
				}
			}
		})
	}
}
