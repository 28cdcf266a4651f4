package blind_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/template"
)

// recorder keeps every byte written to one server.
type recorder struct {
	mu sync.Mutex
	b  []byte
}

func (r *recorder) tap(p []byte) {
	r.mu.Lock()
	r.b = append(r.b, p...)
	r.mu.Unlock()
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.b)
}

// holderUnits reads the share (or seed) units a holder logged for its
// prepared puts, in order (each unit is the share and a CRC-32C).
func holderUnits(t *testing.T, c *inproc.Cluster, name string, unit int) [][]byte {
	t.Helper()
	var out [][]byte
	path := filepath.Join(c.DataDir(name), "shares.log")
	_, err := store.ScanAll(path, engine.Binding(c.P, name, store.KindBlind, [32]byte{}), func(e store.Entry) error {
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

func f32bytes(x []float32) []byte {
	b := make([]byte, 0, 4*len(x))
	for _, v := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// TestSealedEntryView: everything the entry receives during a sealed
// enrollment (from the client, the other holders and the decider) holds
// neither a template, nor its gallery vector, nor any other holder's seed
// or share in the clear; and the rows then identify correctly through
// every entry.
func TestSealedEntryView(t *testing.T) {
	for _, mu := range []int{2, 3} {
		t.Run(map[int]string{2: "mu=2", 3: "mu=3"}[mu], func(t *testing.T) {
			cl := start(t, mu, config.Literal{})
			entry := cl.P.Party(0).Name
			rec := &recorder{}
			for _, from := range []string{"client", "decider", "p2", "p3"} {
				cl.Net.SetFault(from, entry, memnet.Fault{Corrupt: rec.tap})
			}
			xs := templates(30, 7)
			if err := cl.Client("client", entry).Enroll(ctx(t), items(xs, "s")); err != nil {
				t.Fatal(err)
			}
			for _, from := range []string{"client", "decider", "p2", "p3"} {
				cl.Net.SetFault(from, entry, memnet.Fault{})
			}
			seen := rec.bytes()
			if len(seen) < (mu-1)*30*additive.SeedSize {
				t.Fatalf("the tap saw %d bytes: it missed the request", len(seen))
			}
			d, unit := cl.P.Dim(), cl.P.Dim()*cl.P.Ring().Bits/8
			for i, x := range xs {
				if bytes.Contains(seen, f32bytes(x)[:64]) {
					t.Fatalf("the entry saw template %d", i)
				}
				g, err := template.TransformLevels(x, cl.P.GalleryLevels())
				if err != nil {
					t.Fatal(err)
				}
				gb := make([]byte, d)
				for j, v := range g {
					gb[j] = byte(v)
				}
				if bytes.Contains(seen, gb) {
					t.Fatalf("the entry saw G(x) of row %d", i)
				}
			}
			for k := 1; k < mu; k++ {
				name := cl.P.Party(k).Name
				seeds := holderUnits(t, cl, name, additive.SeedSize)
				if len(seeds) != len(xs) {
					t.Fatalf("%s logged %d seeds for %d rows", name, len(seeds), len(xs))
				}
				for i, s := range seeds {
					share := make([]uint8, d)
					if err := additive.ExpandShare(share, (*additive.Seed)(s)); err != nil {
						t.Fatal(err)
					}
					if bytes.Contains(seen, s) || bytes.Contains(seen, additive.ElemBytes(share)) {
						t.Fatalf("the entry saw %s's seed or share of row %d", name, i)
					}
				}
			}
			// The entry's own units are full shares, which it logs.
			if own := holderUnits(t, cl, entry, unit); len(own) != len(xs) {
				t.Fatalf("the entry logged %d shares for %d rows", len(own), len(xs))
			}
			for _, m := range cl.P.Parties() {
				for i, x := range xs[:10] {
					ok, err := cl.Client("client", m.Name).Identify(ctx(t), noisy(x, uint64(i)), 1)
					if err != nil {
						t.Fatal(err)
					}
					if !ok.Accepted || len(ok.Candidates) == 0 || ok.Candidates[0].ID != items(xs, "s")[i].ID {
						t.Fatalf("via %s: row %d identified as %+v", m.Name, i, ok.Candidates)
					}
				}
			}
		})
	}
}

// noisy is x with a small perturbation, so identification is not of the
// enrolled template itself.
func noisy(x []float32, seed uint64) []float32 {
	n := templates(1, 1000+seed)[0]
	y := make([]float32, len(x))
	for j := range x {
		y[j] = x[j] + 0.1*n[j]
	}
	return y
}

// TestSealedPartTampered: a sealed part changed on its way to its holder
// is refused by that holder and the transaction is rolled back at every
// holder (the same ids enroll afterwards); a part sealed for another
// holder does not open, even with its hash passed along.
func TestSealedPartTampered(t *testing.T) {
	cl := start(t, 3, config.Literal{})
	xs := templates(5, 9)
	cl.Net.SetFault("p1", "p2", memnet.Fault{Corrupt: func(b []byte) {
		if len(b) > 1136 { // a frame with a sealed part: flip a byte of it
			b[len(b)/2] ^= 0x20
		}
	}})
	err := cl.Client("client", "p1").Enroll(ctx(t), items(xs, "t"))
	var pe *protocol.Error
	if !asError(err, &pe) || !strings.Contains(pe.Msg, "rolled back at every party") || !strings.Contains(pe.Msg, "p2") {
		t.Fatalf("a tampered part: %v", err)
	}
	cl.Net.SetFault("p1", "p2", memnet.Fault{})
	cl.WaitSettled()
	for _, m := range cl.P.Parties() {
		if n := rows(t, cl, m.Name); n != 0 {
			t.Fatalf("%s kept %d rows of the aborted enrollment", m.Name, n)
		}
	}
	if err := cl.Client("client", "p1").Enroll(ctx(t), items(xs, "t")); err != nil {
		t.Fatalf("enrolling again after the abort: %v", err)
	}

	// An entry that sends p2 the part sealed for p3 (with that part's
	// hash in p2's place): p2 cannot open it.
	one := items(xs[:1], "u")
	nonce := [16]byte{1}
	parts, hashes := sealed(t, cl, nonce, one)
	hashes[1] = hashes[2]
	auth := protocol.Auth{Signer: "client", Nonce: nonce}
	prep := &protocol.SealedPrepare{Prepare: protocol.Prepare{Txn: protocol.TxnID{7}, Origin: 0, Dim: uint16(dim), Base: 5, Auth: auth,
		Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: 5, ID: one[0].ID}}}, Part: parts[2], Hashes: hashes}
	_, err = rpc.Call(ctx(t), cl.Dialer("p1"), "p2", prep)
	if !asError(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Msg, "does not open") {
		t.Fatalf("p3's part sent to p2: %v", err)
	}
	// With p2's own part but hashes that are not the operator's: the
	// signature does not cover them.
	hashes[1] = protocol.PartHash(parts[1])
	prep.Part, prep.Hashes = parts[1], hashes
	_, err = rpc.Call(ctx(t), cl.Dialer("p1"), "p2", prep)
	if !asError(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("an unsigned sealed prepare: %v", err)
	}
}

func asError(err error, pe **protocol.Error) bool { return errors.As(err, pe) }

// sealed makes the parts of a sealed enrollment of its through the first
// party, as the operator's client does, and their hashes.
func sealed(t *testing.T, cl *inproc.Cluster, nonce [16]byte, its []protocol.Item) ([][]byte, [][32]byte) {
	t.Helper()
	parts, err := client.SealShares(cl.P, 0, nonce, its)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([][32]byte, len(parts))
	for k, p := range parts {
		hashes[k] = protocol.PartHash(p)
	}
	return parts, hashes
}

// rows is the number of row slots a holder has committed (its row map as
// the first party asks for it).
func rows(t *testing.T, c *inproc.Cluster, name string) int {
	t.Helper()
	as := c.P.Party(0).Name
	if name == as {
		as = c.P.Party(1).Name
	}
	g, err := c.RowMap(name, as)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range g {
		n += int(s.Rows)
	}
	return n
}

// TestSealedReplay: a sealed enrollment captured on its way is refused when
// sent again, to its entry or to another holder, and its parts do not
// serve another request's ids.
func TestSealedReplay(t *testing.T) {
	cl := start(t, 2, config.Literal{})
	its := items(templates(3, 11), "r")
	ids := []string{its[0].ID, its[1].ID, its[2].ID}
	nonce := [16]byte{3: 9}
	parts, hashes := sealed(t, cl, nonce, its)
	m := &protocol.SealedEnroll{Auth: cl.SignSealed(nonce, ids, hashes), IDs: ids, Parts: parts}
	op := cl.Dialer("client")
	if _, err := rpc.Call(ctx(t), op, "p1", m); err != nil {
		t.Fatal(err)
	}
	var pe *protocol.Error
	for _, to := range []string{"p1", "p2"} {
		if _, err := rpc.Call(ctx(t), op, to, m); !asError(err, &pe) || pe.Code != protocol.CodeDuplicate {
			t.Fatalf("replayed to %s: %v", to, err)
		}
	}
	// Once the ids are deleted, the replay is refused for its nonce.
	for _, id := range ids {
		if err := cl.Client("client", "p1").Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []string{"p1", "p2"} {
		if _, err := rpc.Call(ctx(t), op, to, m); !asError(err, &pe) || pe.Code != protocol.CodeForbidden || !strings.Contains(pe.Msg, "replays") {
			t.Fatalf("replayed to %s after the deletion: %v", to, err)
		}
	}
	// The same parts, signed for other ids: they do not open at their
	// holders (the ids are in their binding).
	other := []string{"r-x", "r-y", "r-z"}
	n2 := [16]byte{3: 10}
	m2 := &protocol.SealedEnroll{Auth: cl.SignSealed(n2, other, hashes), IDs: other, Parts: parts}
	if _, err := rpc.Call(ctx(t), op, "p2", m2); !asError(err, &pe) || !strings.Contains(pe.Msg, "does not open") {
		t.Fatalf("parts moved to other ids: %v", err)
	}
	cl.WaitSettled()
	for _, h := range cl.P.Parties() {
		if n := rows(t, cl, h.Name); n != 3 {
			t.Fatalf("%s has %d row slots, want the 3 of the first request", h.Name, n)
		}
	}
}
