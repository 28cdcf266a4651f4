package replicated_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

// TestReshare (issue 18 item 6): every holder reshares its segment; every
// holder's pair of every live row changes (both halves), a deleted row's
// stays zero, every entry still answers exactly the plaintext's scores,
// the epochs agree, and a restart replays the new shares. A holder that
// missed a reshare's decision holds the old epoch: queries that need it
// are refused (never answered from mixed shares) until the decision
// reaches it.
func TestReshare(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs, ids := enrollAll(t, cl, 8, 61)
	deleted := ids[2] // p1-2
	if err := cl.client("client", "p1").Delete(ctx(t), deleted); err != nil {
		t.Fatal(err)
	}
	exact := func(entry string) {
		t.Helper()
		y := xs[9]
		want := plain(t, cl.p, xs, y)
		r, err := cl.client("device", entry).Identify(ctx(t), y, len(xs))
		if err != nil {
			t.Fatalf("entry %s: %v", entry, err)
		}
		if r.Degraded || len(r.Candidates) != len(xs)-1 {
			t.Fatalf("entry %s: %d candidates (degraded %v)", entry, len(r.Candidates), r.Degraded)
		}
		for _, cd := range r.Candidates {
			if i := slices.Index(ids, cd.ID); i < 0 || cd.ID == deleted || int(cd.Score) != want[i] {
				t.Fatalf("entry %s: %s scored %d, plaintext %v", entry, cd.ID, cd.Score, want)
			}
		}
	}
	pairs := func() map[string][]byte {
		out := map[string][]byte{}
		for _, h := range []string{"p1", "p2", "p3"} {
			cl.mu.Lock()
			e := cl.holders[h]
			cl.mu.Unlock()
			for _, row := range [][2]int{{0, 1}, {1, 5}, {0, 2}} {
				out[h+string(rune('a'+row[0]))+string(rune('0'+row[1]))] = replicated.StoredPair(e, row[0], row[1])
			}
		}
		return out
	}
	before := pairs()
	for round := uint32(1); round <= 2; round++ {
		for _, h := range []string{"p1", "p2", "p3"} {
			ok, err := cl.client("client", h).Reshare(ctx(t), h)
			if err != nil || ok.Epoch != round || ok.Rows != 8 {
				t.Fatalf("reshare of %s, round %d: %v %+v", h, round, err, ok)
			}
		}
	}
	after := pairs()
	for k, b := range before {
		a := after[k]
		half := len(b) / 2
		if k[2:] == "a2" { // the deleted row
			if !bytes.Equal(a, make([]byte, len(a))) {
				t.Fatalf("%s: a deleted row's shares are not zero after the reshare", k)
			}
			continue
		}
		if bytes.Equal(a[:half], b[:half]) || bytes.Equal(a[half:], b[half:]) {
			t.Fatalf("%s: a share did not change in the reshare", k)
		}
	}
	for _, e := range []string{"p1", "p2", "p3"} {
		exact(e)
	}
	// A restart replays the new shares.
	for _, h := range []string{"p1", "p2", "p3"} {
		cl.restart(h)
	}
	if got := pairs(); !mapsEqual(got, after) {
		t.Fatal("the shares after a restart are not the reshared ones")
	}
	exact("p2")

	// p3 misses p1's next reshare decision: queries needing p3 and p1's
	// segment are refused until it arrives, never answered from mixed
	// epochs. (First p1 delivers what its restart queued.)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h, err := cl.client("client", "p1").Health(ctx(t), "p1")
		if err == nil && h.InDoubt == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p1 keeps unsettled changes: %v %+v", err, h)
		}
	}
	// (p2 relays the commits it sees to p3 as well: rowtxn/relay.go.)
	for _, from := range []string{"p1", "p2"} {
		cl.net.SetFault(from, "p3", memnet.Fault{Corrupt: func(p []byte) {
			if len(p) > 6 && p[5] == byte(protocol.TDecide) {
				p[4] ^= 0xff
			}
		}})
	}
	if _, err := cl.client("client", "p1").Reshare(ctx(t), "p1"); err != nil {
		t.Fatalf("reshare with p3 missing the decision: %v", err)
	}
	if r, err := cl.client("device", "p2").Identify(ctx(t), xs[9], len(xs)); err == nil || !strings.Contains(err.Error(), "rows") {
		t.Fatalf("a query across epochs: %v %+v; want it refused for rows that differ (the epoch is in the row map)", err, r)
	}
	cl.net.SetFault("p1", "p3", memnet.Fault{})
	cl.net.SetFault("p2", "p3", memnet.Fault{})
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := cl.client("device", "p2").Identify(ctx(t), xs[9], len(xs))
		if err == nil && !r.Degraded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p3 never caught up with p1's reshare: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	exact("p3")
}

func mapsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
