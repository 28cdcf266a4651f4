package replicated_test

// Regression tests from the adversarial review of the relays (issue 44
// item 2), each seen failing on the first version of relay.go: a deviating
// origin that spoofs the missing holder's note, ignores the third's no,
// lies about its reshare epoch, and a held record that kept the third's
// part after delivery.

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// frameMsg returns the message bytes of a written chunk (with or without
// the frame header) and whether it starts a message of type typ.
func frameMsg(p []byte, typ protocol.Type) ([]byte, bool) {
	for _, off := range []int{4, 0} {
		if len(p) > off+1 && p[off] == protocol.Version && p[off+1] == byte(typ) {
			return p[off:], true
		}
	}
	return nil, false
}

// spoofNote: whenever p1 sends p3 a SealedPrepare, p1 also sends p3 a
// Prepared note for the same transaction claiming origin p2: p3's
// OnPrepared checks the sender against the claimed origin only, and the
// note is keyed by the transaction id alone.
func spoofNote(c *inproc.Cluster, spoofed *int) memnet.Fault {
	return memnet.Fault{Corrupt: func(p []byte) {
		b, ok := frameMsg(p, protocol.TSealedPrepare)
		if !ok || len(b) < 2+16 {
			return
		}
		var txn protocol.TxnID
		copy(txn[:], b[2:2+16])
		*spoofed++
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			rpc.Call(ctx, c.Dialer("p1"), "p3", &protocol.Prepared{Txn: txn, Origin: 1})
		}()
	}}
}

// startEarly starts a cluster with three rows enrolled through p1, and
// returns it with five templates (the last two not enrolled).
func startEarly(t *testing.T) (*inproc.Cluster, [][]float32) {
	t.Helper()
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(5, 83)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:3], "early")); err != nil {
		t.Fatal(err)
	}
	return c, xs
}

// epochLie rewrites, in a chunk p1 sends p2, its answer to p2's epoch
// probe (a ReplRows of no row) with a later epoch than p1 has, and
// garbles every other ReplRows (p2's catch-up fetch); it reports whether
// the chunk was a ReplRows.
func epochLie(p []byte) bool {
	b, ok := frameMsg(p, protocol.TReplRows)
	if !ok {
		return false
	}
	if m, err := protocol.Decode(b); err == nil {
		if rows := m.(*protocol.ReplRows); len(rows.IDs) == 0 {
			rows.Epoch += 7 // a lie: no reshare happened
			if nb := protocol.Marshal(rows); len(nb) == len(b) {
				copy(b, nb)
				return true
			}
		}
	}
	b[1] = 0xEE
	return true
}

func segRows(t *testing.T, c *inproc.Cluster, of, as string, k int) int {
	d, err := c.RowMap(of, as)
	if err != nil {
		t.Fatalf("row map of %s: %v", of, err)
	}
	return int(d[k].Rows)
}

// TestSpoofedNoteNotTaken: p1 (a deviating origin) keeps p2 out (it
// claims p2 cannot be reached) and sends p3 a note for its own
// transaction that claims origin p2 (whose third p1 is). p3 used to take
// it as p2's word, vote yes without keeping p2's part, and leave p2 to get
// the change from p1 alone, which withheld it. A note now counts only for
// the origin it names: p3 keeps p2's part, and p2 catches up from p3.
func TestSpoofedNoteNotTaken(t *testing.T) {
	c, xs := startEarly(t)
	spoofed := 0
	c.Net.SetFault("p1", "p3", spoofNote(c, &spoofed))
	// p1 never reaches p2 (as if p2 were down to it), and garbles its
	// answers to p2's catch-up fetch.
	c.Net.SetFault("p1", "p2", memnet.Fault{Refuse: true, Corrupt: func(p []byte) { garble(p, protocol.TReplRows) }})
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "late")); err != nil {
		t.Fatalf("enroll with p2 left out: %v", err)
	}
	t.Logf("spoofed notes: %d", spoofed)
	time.Sleep(3 * time.Second) // p3's relays, if any, are delivered at once
	r1, r2, r3 := segRows(t, c, "p1", "p3", 0), segRows(t, c, "p2", "p3", 0), segRows(t, c, "p3", "p2", 0)
	t.Logf("rows of origin p1: p1 %d, p2 %d, p3 %d", r1, r2, r3)
	if r2 < r3 {
		t.Errorf("p3 committed origin p1's change (%d rows) but kept nothing for p2 (%d rows): only p1 can give it to p2", r3, r2)
	}
	// p2 restarts: it stands down catching up and cannot.
	if err := c.TryRestart("p2"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := c.Client("device", "p3").Identify(ctx(t), xs[4], 1)
		if err == nil && !r.Degraded && r.Accepted && r.Candidates[0].ID == "late-1" {
			t.Logf("p2 caught up (not broken)")
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	_, aerr := c.Agreement("p2")
	t.Errorf("p2 did not catch up within 10 s although p3 committed the change: %v", aerr)
}

// TestRefusedVoteNotCommitted: p3 votes no (no word from p2, and a damaged
// copy of its part). The transaction used to stay pending at p3, so an
// origin that ignored the vote committed it there anyway (2 rows became
// 4). p3 now aborts it as it refuses, and the later commit finds nothing.
func TestRefusedVoteNotCommitted(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(4, 89)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:2], "up")); err != nil {
		t.Fatal(err)
	}
	var txn protocol.TxnID
	got := make(chan struct{}, 1)
	c.Net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		if b, ok := frameMsg(p, protocol.TSealedPrepare); ok {
			copy(txn[:], b[2:2+16])
			p[len(p)-1-32] ^= 1 // damage the held copy (before the origin's 32-byte proof)
			select {
			case got <- struct{}{}:
			default:
			}
		}
		// a deviating p1 does not tell p3 that it aborted
		if b, ok := frameMsg(p, protocol.TDecide); ok && len(b) == 2+16+1+1+32 && b[2+16+1] == 0 {
			b[1] = 0xEE
		}
	}})
	if err := c.Stop("p2"); err != nil {
		t.Fatal(err)
	}
	err := c.Client("client", "p1").Enroll(ctx(t), items(xs[2:], "down"))
	t.Logf("enroll with p2 down and a damaged copy: %v", err)
	<-got
	before := segRows(t, c, "p3", "p1", 0)
	// A deviating p1 ignores p3's no and commits at p3.
	resp, cerr := rpc.Call(ctx(t), c.Dialer("p1"), "p3", &protocol.Decide{Txn: txn, Origin: 0, Commit: true})
	t.Logf("commit sent to p3 after its no: %v %v", resp, cerr)
	after := segRows(t, c, "p3", "p1", 0)
	t.Logf("p3's rows of origin p1: %d before, %d after", before, after)
	if after > before {
		t.Errorf("p3 voted no (kept nothing for p2) yet applied the commit it refused: %d -> %d rows", before, after)
	}
}

// TestEpochLieWithSpoofedNote: as TestSpoofedNoteNotTaken, and p1 also
// answers p2's epoch probe (a fetch of no row) with a later epoch than it
// has. One peer's word used to make p2 stand down until rebuilt, counted
// down, and the degraded path opened with p1 live (from 205 ms on). Now
// only both peers' word does: no degraded answer.
func TestEpochLieWithSpoofedNote(t *testing.T) {
	c, xs := startEarly(t)
	spoofed := 0
	c.Net.SetFault("p1", "p3", spoofNote(c, &spoofed))
	c.Net.SetFault("p1", "p2", memnet.Fault{Refuse: true, Corrupt: func(p []byte) { epochLie(p) }})
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "late")); err != nil {
		t.Fatalf("enroll with p2 left out: %v", err)
	}
	if err := c.TryRestart("p2"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	degraded := 0
	var why error
	for time.Since(start) < 10*time.Second {
		for _, entry := range []string{"p1", "p3"} {
			r, err := c.Client("device", entry).Identify(ctx(t), xs[1], 1)
			if err == nil && r.Degraded {
				degraded++
			}
		}
		if degraded >= 4 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, why = c.Agreement("p2")
	t.Logf("p2: %v", why)
	if degraded > 0 {
		t.Errorf("%d degraded answers served with p1 (deviating) live, %v after p2 came back", degraded, time.Since(start).Round(time.Millisecond))
	}
}

// TestEpochLieNotRebuild: the finding's scenario (p2 stopped, two rows
// enrolled through p1, which withholds them, p3 keeping and relaying
// them), and p1 lying about its epoch to p2's probe: 41 degraded answers
// in the second before the relay arrived; now none.
func TestEpochLieNotRebuild(t *testing.T) {
	c, xs := startEarly(t)
	if err := c.Stop("p2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "late")); err != nil {
		t.Fatal(err)
	}
	c.Net.SetFault("p1", "p2", memnet.Fault{Corrupt: func(p []byte) {
		if !garble(p, protocol.TPrepare, protocol.TSealedPrepare, protocol.TDecide) {
			epochLie(p)
		}
	}})
	start := time.Now()
	if err := c.TryRestart("p2"); err != nil {
		t.Fatal(err)
	}
	degraded, caught := 0, time.Duration(0)
	for time.Since(start) < 8*time.Second {
		for _, entry := range []string{"p1", "p3"} {
			r, err := c.Client("device", entry).Identify(ctx(t), xs[1], 1)
			if err == nil && r.Degraded {
				degraded++
			}
		}
		if _, err := c.Agreement("p2"); err == nil && caught == 0 {
			caught = time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, why := c.Agreement("p2")
	t.Logf("p2 now: %v; served %v after restart", why, caught)
	if degraded > 0 {
		t.Errorf("%d degraded answers with p1 (deviating) live after p2 came back", degraded)
	}
}

// TestHeldPartsErased: the origin's held record of p2's prepare carries
// p3's sealed part too (SealedPrepare.Held); it used to be in the record's
// body, which delivery never erases, and stayed after the row's deletion.
// It is now in the erasable unit with p2's part.
func TestHeldPartsErased(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(4, 83)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:2], "early")); err != nil {
		t.Fatal(err)
	}
	var p3part []byte
	c.Net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		if b, ok := frameMsg(p, protocol.TSealedPrepare); ok && p3part == nil {
			if m, err := protocol.Decode(b); err == nil {
				p3part = append([]byte(nil), m.(*protocol.SealedPrepare).Part...)
			}
		}
	}})
	if err := c.Stop("p2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[2:4], "late")); err != nil {
		t.Fatal(err)
	}
	c.Restart("p2") // waits until settled: the held parts are delivered and erased
	if err := c.Client("client", "p1").Delete(ctx(t), "late-1"); err != nil {
		t.Fatal(err)
	}
	if len(p3part) == 0 {
		t.Fatal("no part captured")
	}
	found := []string{}
	filepath.WalkDir(c.DataDir("p1"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, p3part[:64]) {
				found = append(found, path)
			}
		}
		return nil
	})
	t.Logf("p3's sealed part (%d bytes) found in p1's data dir after delivery and deletion: %v", len(p3part), found)
	if len(found) > 0 {
		t.Errorf("p3's sealed part of a deleted row stays in the origin's log")
	}
}

// TestWithheldReshareNotCommitted: a reshare is never held, so the third
// votes on it only once the other holder says that it prepared it too; a
// deviating origin that sends the reshare to p3 alone (p2 "cannot be
// reached") and then commits it at p3 regardless gets it refused and
// aborted there, so p2 is not left at an older epoch (which would make it
// stand down until rebuilt and open the degraded path).
func TestWithheldReshareNotCommitted(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(3, 97)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs, "r")); err != nil {
		t.Fatal(err)
	}
	var txn protocol.TxnID
	got := make(chan struct{}, 1)
	c.Net.SetFault("p1", "p2", memnet.Fault{Refuse: true})
	c.Net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		if b, ok := frameMsg(p, protocol.TPrepare); ok {
			copy(txn[:], b[2:2+16])
			select {
			case got <- struct{}{}:
			default:
			}
		}
		if b, ok := frameMsg(p, protocol.TDecide); ok && len(b) == 2+16+1+1+32 && b[2+16+1] == 0 {
			b[1] = 0xEE // p1 hides its abort from p3
		}
	}})
	if _, err := c.Client("client", "p1").Reshare(ctx(t), "p1"); err == nil {
		t.Fatal("a reshare with p2 unreachable from its origin committed")
	}
	<-got
	if _, err := rpc.Call(ctx(t), c.Dialer("p1"), "p3", &protocol.Decide{Txn: txn, Origin: 0, Commit: true}); err != nil {
		t.Logf("commit sent to p3 after its no: %v", err)
	}
	c.Net.SetFault("p1", "p2", memnet.Fault{})
	c.Net.SetFault("p1", "p3", memnet.Fault{})
	r, err := c.Client("device", "p2").Identify(ctx(t), xs[1], 1)
	if err != nil || r.Degraded || !r.Accepted || r.Candidates[0].ID != "r-1" {
		t.Fatalf("after a reshare p3 refused: %v %+v; want p2 and p3 at one epoch, answering checked", err, r)
	}
}
