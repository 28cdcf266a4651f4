package replicated_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/template"
)

// TestSealedEntryView (issue 18 item 2): in a replicated cluster started as
// a deployment runs it (the registered mode, inproc), everything the entry
// receives during an enrollment (from the client, the other holders and
// the decider) holds neither a template, nor its gallery vector, nor the
// share the entry does not hold, though the other two holders each logged
// it; and the rows then identify through every entry.
func TestSealedEntryView(t *testing.T) {
	const d = 128
	tau := 0.5
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeReplicated, Dim: d, Tau: &tau, Timeout: config.Duration(15 * time.Second)}, 3))
	entry := c.P.Party(0).Name
	var mu sync.Mutex
	var seen []byte
	tap := func(p []byte) { mu.Lock(); seen = append(seen, p...); mu.Unlock() }
	others := []string{"client", "decider", "p2", "p3"}
	for _, from := range others {
		c.Net.SetFault(from, entry, memnet.Fault{Corrupt: tap})
	}
	xs := inproc.Templates(20, d, 7)
	ctx := inproc.Ctx(t, time.Minute)
	if err := c.Client("client", entry).Enroll(ctx, inproc.Items(xs, "s")); err != nil {
		t.Fatal(err)
	}
	for _, from := range others {
		c.Net.SetFault(from, entry, memnet.Fault{})
	}
	mu.Lock()
	got := bytes.Clone(seen)
	mu.Unlock()
	half := d * c.P.Ring().Bits / 8 // one share of a row
	if len(got) < 2*len(xs)*2*half {
		t.Fatalf("the tap saw %d bytes: it missed the enrollment", len(got))
	}
	for i, x := range xs {
		xb := make([]byte, 0, 64)
		for _, v := range x[:16] {
			xb = binary.LittleEndian.AppendUint32(xb, math.Float32bits(v))
		}
		g, err := template.TransformLevels(x, c.P.GalleryLevels())
		if err != nil {
			t.Fatal(err)
		}
		gb := make([]byte, d)
		for j, v := range g {
			gb[j] = byte(v)
		}
		if bytes.Contains(got, xb) || bytes.Contains(got, gb) {
			t.Fatalf("the entry saw template %d or its gallery vector", i)
		}
	}
	// The share the entry (p1: s_0, s_1) lacks is s_2: p3's own (first
	// half of its pair) and p2's next (second half).
	for _, h := range []struct {
		name string
		at   int
	}{{"p3", 0}, {"p2", half}} {
		units := loggedPairs(t, c, h.name, 2*half+replicated.TrailerSize)
		if len(units) != len(xs) {
			t.Fatalf("%s logged %d pairs for %d rows", h.name, len(units), len(xs))
		}
		for i, u := range units {
			if bytes.Contains(got, u[h.at:h.at+half]) {
				t.Fatalf("the entry saw s_2 of row %d (in %s's pair)", i, h.name)
			}
		}
	}
	for _, m := range c.P.Parties() {
		for i, x := range xs[:5] {
			r, err := c.Client("device", m.Name).Identify(ctx, x, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Accepted || len(r.Candidates) == 0 || r.Candidates[0].ID != inproc.Items(xs, "s")[i].ID {
				t.Fatalf("through %s, row %d: %+v", m.Name, i, r)
			}
		}
	}
}

// loggedPairs reads the pairs a holder logged for its prepared puts, in
// order (each unit is the pair, its trailer and a CRC-32C).
func loggedPairs(t *testing.T, c *inproc.Cluster, name string, unit int) [][]byte {
	t.Helper()
	var out [][]byte
	path := filepath.Join(c.DataDir(name), "shares.log")
	_, err := store.ScanAll(path, engine.Binding(c.P, name, replicated.Kind, [32]byte{}), func(e store.Entry) error {
		if e.Type != 3 { // rowtxn's prepare record
			return nil
		}
		for at := 0; at+unit+4 <= len(e.Tail); at += unit + 4 {
			out = append(out, bytes.Clone(e.Tail[at:at+unit]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
