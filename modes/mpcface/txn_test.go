package mpcface_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// Transactions whose messages arrive late or out of order (engine/rowtxn
// through a 2PCFace cluster).

// ghost is a one-row prepare of origin p1 for the next row of its segment
// at p2.
func ghost(c *inproc.Cluster, txn byte, base uint32, id string) *protocol.Prepare {
	return &protocol.Prepare{Txn: protocol.TxnID{txn, 0x9}, Origin: 0, Dim: dim, Base: base, Auth: c.Sign(protocol.OpPut, id),
		Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: base, ID: id, Share: make([]byte, 16*template.Words(dim))}}}
}

// TestLatePrepareIsAborted: an abort that overtakes its prepare makes the
// prepare be refused when it comes; a prepare whose abort was lost is
// aborted by the origin's next transaction. Before, either left the
// origin's segment blocked at that party ("an earlier transaction is still
// undecided") until an operator intervened.
func TestLatePrepareIsAborted(t *testing.T) {
	c := startDefault(t, 2)
	cl := c.Client("client", "p1")
	if err := cl.Enroll(ctx(t), items(templates(5, 50), "a")); err != nil {
		t.Fatal(err)
	}
	g, err := c.RowMap("p2", "p1")
	if err != nil {
		t.Fatal(err)
	}
	base := g[0].Rows
	p1 := serverDialer(c, "p1")
	if _, err := rpc.Call(ctx(t), p1, "p2", &protocol.Decide{Txn: protocol.TxnID{1, 0x9}, Origin: 0}); err != nil {
		t.Fatal(err)
	}
	var pe *protocol.Error
	if _, err := rpc.Call(ctx(t), p1, "p2", ghost(c, 1, base, "late")); !errors.As(err, &pe) || pe.Code != protocol.CodeAborted {
		t.Fatalf("a prepare after its abort: %v", err)
	}
	if _, err := rpc.Call(ctx(t), p1, "p2", ghost(c, 2, base, "lost")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Enroll(ctx(t), items(templates(5, 51), "b")); err != nil {
		t.Fatalf("enrolling after a prepare whose abort was lost: %v", err)
	}
	c.WaitSettled()
	if h, err := cl.Health(ctx(t), "p2"); err != nil || h.InDoubt != 0 {
		t.Fatalf("p2 after the enrollment: %+v %v", h, err)
	}
	if g, err = c.RowMap("p2", "p1"); err != nil || g[0].Rows != base+5 {
		t.Fatalf("p2 after the enrollment: %v %v", g, err)
	}
	if err := cl.Delete(ctx(t), "lost"); !errors.As(err, &pe) || pe.Code != protocol.CodeUnknownID {
		t.Fatalf("the aborted row: %v", err)
	}
	r, err := cl.Identify(ctx(t), templates(5, 51)[0], 1)
	if err != nil || !r.Accepted || r.Candidates[0].ID != "b-0" {
		t.Fatalf("identify after: %+v %v", r, err)
	}
}

// TestAbortedRowNumbersReplay: an aborted prepare's rows are numbered again
// by the next prepare. Replay keyed what it found (erased, damaged) by row
// number, so damage in the aborted, erased unit was blamed on the live row
// that reused its number and the party refused to start.
func TestAbortedRowNumbersReplay(t *testing.T) {
	c := startDefault(t, 2)
	cl := c.Client("client", "p1")
	if err := cl.Enroll(ctx(t), items(templates(5, 52), "a")); err != nil {
		t.Fatal(err)
	}
	g, err := c.RowMap("p2", "p1")
	if err != nil {
		t.Fatal(err)
	}
	p1 := serverDialer(c, "p1")
	if _, err := rpc.Call(ctx(t), p1, "p2", ghost(c, 3, g[0].Rows, "ghost")); err != nil {
		t.Fatal(err)
	}
	if _, err := rpc.Call(ctx(t), p1, "p2", &protocol.Decide{Txn: protocol.TxnID{3, 0x9}, Origin: 0}); err != nil {
		t.Fatal(err)
	}
	xs := templates(5, 53)
	if err := cl.Enroll(ctx(t), items(xs, "b")); err != nil {
		t.Fatal(err)
	}
	c.Stop("p2")
	path := filepath.Join(c.DataDir("p2"), "shares.log")
	var at int64 = -1
	if _, err := store.Scan(path, engine.Binding(c.P, "p2", store.KindShares, [32]byte{}), func(en store.Entry) error {
		if en.Type == 3 && !en.TailIntact && at < 0 { // a prepare record
			at = en.TailOffset // the aborted prepare's erased unit
		}
		return nil
	}); err != nil || at < 0 {
		t.Fatalf("no erased unit in p2's log (%v)", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0x40}, at+3)
	f.Close()
	if err := c.TryRestart("p2"); err != nil {
		t.Fatalf("damage in an aborted unit blamed on a live row: %v", err)
	}
	r, err := cl.Identify(ctx(t), xs[0], 1)
	if err != nil || !r.Accepted || r.Candidates[0].ID != "b-0" {
		t.Fatalf("identify after: %+v %v", r, err)
	}
}

// TestNonNFCIDRefused (review 17, item 9): one name in NFC and in NFD is
// two byte strings; both used to enroll as two ids. A non-NFC id is now
// refused by the client before the template travels, by the entry (a
// client that skips the check), and by every other party in a prepare (an
// entry that skips it), each time with the NFC form to use; the NFC form
// enrolls and is found.
func TestNonNFCIDRefused(t *testing.T) {
	c := startDefault(t, 2)
	nfc, nfd := "zo\u00eb.smith", "zoe\u0308.smith"
	xs := templates(2, 77)
	cl := c.Client("client", "p1")
	refusedNFC := func(who string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "NFC") || !strings.Contains(err.Error(), strconv.Quote(nfc)) {
			t.Fatalf("%s: %v, want a refusal naming NFC and %q", who, err, nfc)
		}
	}
	refusedNFC("client", cl.Enroll(ctx(t), []protocol.Item{{ID: nfd, Template: xs[0]}}))
	_, err := rpc.Call(ctx(t), c.Dialer("client"), "p1", &protocol.Enroll{Items: []protocol.Item{{ID: nfd, Template: xs[0]}}})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		t.Fatalf("entry: %v, want bad request", err)
	}
	refusedNFC("entry", err)
	_, err = rpc.Call(ctx(t), serverDialer(c, "p1"), "p2", ghost(c, 7, 0, nfd))
	if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		t.Fatalf("participant: %v, want bad request", err)
	}
	refusedNFC("participant", err)
	if err := cl.Enroll(ctx(t), []protocol.Item{{ID: nfc, Template: xs[0]}}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Client("device", "p2").Identify(ctx(t), xs[0], 1)
	if err != nil || !r.Accepted || r.Candidates[0].ID != nfc {
		t.Fatalf("identify the NFC id: %+v %v", r, err)
	}
	// Deleting by the NFD form finds nothing, and says why.
	if err := cl.Delete(ctx(t), nfd); err == nil || !strings.Contains(err.Error(), "NFC") {
		t.Fatalf("delete by the NFD form: %v", err)
	}
	if err := cl.Delete(ctx(t), nfc); err != nil {
		t.Fatal(err)
	}
}
