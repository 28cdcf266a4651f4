package blind_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
)

// TestStaleHolderRefused: a share holder restored from an older copy of
// its data has a different row map than the others. Its additive shares no
// longer line up with theirs row by row, so the decider would add shares of
// different rows: a query must be refused with CodeInconsistent, never
// answered, whether the stale holder is a helper or the entry. (The blind
// counterpart of modes/mpcface's testStaleHelper.) The copy misses either
// an enrollment (fewer rows than the others) or a deletion (as many rows,
// one still live at the stale holder only: the score vectors have the same
// length, so only the row-map check stands between it and an answer).
// After a missed enrollment the next prepare is refused too (its base is
// not the stale holder's row count); a missed deletion leaves the row
// count alone, and engine/rowtxn does not compare more than that on a
// prepare, so enrollments go on while queries stay refused.
func TestStaleHolderRefused(t *testing.T) {
	for _, c := range []struct {
		missed     string
		gapRefused bool
		change     func(t *testing.T, op *client.Client) error
	}{
		{"enrollment", true, func(t *testing.T, op *client.Client) error {
			return op.Enroll(ctx(t), items(templates(10, 61), "b"))
		}},
		{"deletion", false, func(t *testing.T, op *client.Client) error {
			return op.Delete(ctx(t), "a-5")
		}},
	} {
		for _, mu := range []int{2, 3} {
			t.Run(fmt.Sprintf("missed=%s/mu=%d", c.missed, mu), func(t *testing.T) {
				testStaleHolder(t, mu, c.change, c.gapRefused)
			})
		}
	}
}

func testStaleHolder(t *testing.T, mu int, change func(*testing.T, *client.Client) error, gapRefused bool) {
	cl := start(t, mu, config.Literal{Beta: 21, Timeout: config.Duration(2 * time.Second)})
	op := cl.Client("client", "p1")
	xs := templates(30, 60)
	if err := op.Enroll(ctx(t), items(xs, "a")); err != nil {
		t.Fatal(err)
	}
	stale := cl.P.Party(mu - 1).Name
	backup := t.TempDir()
	cl.Stop(stale)
	if err := os.CopyFS(backup, os.DirFS(cl.DataDir(stale))); err != nil {
		t.Fatal(err)
	}
	cl.Restart(stale)
	if err := change(t, op); err != nil {
		t.Fatal(err)
	}
	// Before the restore every entry answers: the refusals below are the
	// stale copy's doing.
	for _, m := range cl.P.Parties() {
		r, err := cl.Client("device", m.Name).Identify(ctx(t), xs[3], 1)
		if err != nil || !r.Accepted || r.Candidates[0].ID != "a-3" {
			t.Fatalf("%s before the restore: %+v %v", m.Name, r, err)
		}
	}
	cl.Stop(stale)
	os.RemoveAll(cl.DataDir(stale))
	if err := os.CopyFS(cl.DataDir(stale), os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	cl.Restart(stale)

	// The stale holder as a helper (entry p1), then as the entry.
	for _, entry := range []string{"p1", stale} {
		t0 := time.Now()
		r, err := cl.Client("device", entry).Identify(ctx(t), xs[3], 5)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInconsistent || r != nil {
			t.Fatalf("entry %s with stale %s: %+v %v, want a refusal (inconsistent)", entry, stale, r, err)
		}
		if !strings.Contains(pe.Msg, "rows differ") {
			t.Fatalf("entry %s: unclear refusal %q", entry, pe.Msg)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("entry %s: the refusal took %v", entry, d)
		}
	}
	if !gapRefused {
		return
	}
	// No enrollment builds on the gap either.
	if err := op.Enroll(ctx(t), items(templates(1, 62), "c")); err == nil {
		t.Fatal("enrolled with a stale holder")
	}
}
