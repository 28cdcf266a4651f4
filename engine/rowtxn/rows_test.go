package rowtxn

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	"github.com/idface/idface/engine/txnbase"
	"github.com/idface/idface/protocol"
)

// memShares is a plain share store for tests: one byte slice per row.
type memShares struct {
	size int
	rows [][]byte
	live []bool
}

func (m *memShares) Rows() int { return len(m.rows) }
func (m *memShares) Live() int {
	n := 0
	for _, l := range m.live {
		if l {
			n++
		}
	}
	return n
}
func (m *memShares) IsLive(seq int) bool { return seq < len(m.live) && m.live[seq] }
func (m *memShares) Put(seq int, share []byte, live bool) error {
	for len(m.rows) <= seq {
		m.rows, m.live = append(m.rows, nil), append(m.live, false)
	}
	if share == nil {
		share = make([]byte, m.size)
	}
	m.rows[seq], m.live[seq] = append([]byte(nil), share...), live
	return nil
}
func (m *memShares) Erase(seq int) error {
	m.rows[seq], m.live[seq] = make([]byte, m.size), false
	return nil
}

func newMem() (*memShares, error) { return &memShares{size: 2}, nil }

// operatorKey makes st trust a fresh operator key "op" and returns a
// function that signs a prepare's ops with it.
func operatorKey(t *testing.T, st *state[*memShares]) func(p *protocol.Prepare) *protocol.Prepare {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	st.auth = txnbase.NewOperators(func(name string) []*ecdsa.PublicKey {
		if name != "op" {
			return nil
		}
		return []*ecdsa.PublicKey{&key.PublicKey}
	}, st.cluster)
	return func(p *protocol.Prepare) *protocol.Prepare {
		if len(p.Ops) == 0 {
			return p
		}
		var ids []string
		for _, op := range p.Ops {
			ids = append(ids, op.ID)
		}
		p.Auth, err = protocol.Sign(key, "op", st.cluster, p.Ops[0].Kind, ids)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func TestValidateRefusesDivergence(t *testing.T) {
	st, _ := newState(64, 2, 2, [16]byte{1}, newMem)
	sign := operatorKey(t, st)
	put := func(seq uint32, id string) protocol.Op {
		return protocol.Op{Kind: protocol.OpPut, Seq: seq, ID: id, Share: []byte{1, 2}}
	}
	p := sign(&protocol.Prepare{Txn: protocol.TxnID{1}, Origin: 1, Dim: 64, Base: 0, Ops: []protocol.Op{put(0, "a"), put(1, "b")}})
	if e := st.validate(p, nil); e != nil {
		t.Fatal(e)
	}
	if _, _, err := st.apply(&pendingTxn{prep: p, tail: -1}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		p    *protocol.Prepare
		code protocol.Code
	}{
		"stale base":   {&protocol.Prepare{Origin: 1, Dim: 64, Base: 1, Ops: []protocol.Op{put(1, "c")}}, protocol.CodeInconsistent},
		"gap":          {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(3, "c")}}, protocol.CodeInconsistent},
		"duplicate":    {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(2, "a")}}, protocol.CodeDuplicate},
		"wrong delete": {&protocol.Prepare{Origin: 0, Dim: 64, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 0, ID: "a"}}}, protocol.CodeUnknownID},
		"dimension":    {&protocol.Prepare{Origin: 1, Dim: 65, Base: 2, Ops: []protocol.Op{put(2, "c")}}, protocol.CodeBadRequest},
		"origin":       {&protocol.Prepare{Origin: 7, Dim: 64}, protocol.CodeBadRequest},
		"empty":        {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2}, protocol.CodeBadRequest},
		"bad share":    {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: 2, ID: "c", Share: []byte{1, 2, 3}}}}, protocol.CodeBadRequest},
		"bad id":       {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(2, "x\u202e")}}, protocol.CodeBadRequest},
	} {
		if e := st.validate(sign(c.p), nil); e == nil || e.Code != c.code {
			t.Errorf("%s: got %v, want code %v", name, e, c.code)
		}
	}
	// Unsigned, signed by someone else, signed for other ids or another
	// kind, or a nonce used before: refused (issue 17 item 5).
	next := func() *protocol.Prepare {
		return &protocol.Prepare{Txn: protocol.TxnID{2}, Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(2, "c")}}
	}
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	forged := next()
	forged.Auth, _ = protocol.Sign(stranger, "op", st.cluster, protocol.OpPut, []string{"c"})
	otherIDs := next()
	otherIDs.Auth = sign(&protocol.Prepare{Ops: []protocol.Op{put(2, "d")}}).Auth
	otherKind := next()
	otherKind.Auth = sign(&protocol.Prepare{Ops: []protocol.Op{{Kind: protocol.OpDelete, ID: "c"}}}).Auth
	mixed := sign(&protocol.Prepare{Txn: protocol.TxnID{2}, Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(2, "c"), {Kind: protocol.OpDelete, Seq: 0, ID: "a"}}})
	replayed := sign(next())
	st.auth.Use(replayed.Auth.Nonce)
	for name, p := range map[string]*protocol.Prepare{"unsigned": next(), "forged": forged, "other ids": otherIDs,
		"other kind": otherKind, "mixed": mixed, "replayed": replayed} {
		if e := st.validate(p, nil); e == nil || e.Code != protocol.CodeForbidden && name != "mixed" || e.Code != protocol.CodeBadRequest && name == "mixed" {
			t.Errorf("%s: got %v", name, e)
		}
	}
	if e := st.validate(sign(next()), nil); e != nil {
		t.Fatalf("a fresh signature: %v", e)
	}
	g1 := st.digest()
	st.apply(&pendingTxn{prep: &protocol.Prepare{Origin: 1, Dim: 64, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 0, ID: "a"}}}, tail: -1})
	if g2 := st.digest(); g1.Equal(g2) || g2[1].Live != 1 || g2[1].Rows != 2 {
		t.Fatalf("delete did not change the digest: %v -> %v", g1, g2)
	}
	// The deleted row's share is gone from memory, not just tombstoned.
	if !bytes.Equal(st.segs[1].shares.rows[0], []byte{0, 0}) {
		t.Fatal("a deleted row's share is still in the store")
	}
	// Another cluster's digest of the same rows differs.
	other, _ := newState(64, 2, 2, [16]byte{2}, newMem)
	other.apply(&pendingTxn{prep: p, tail: -1})
	st2, _ := newState(64, 2, 2, [16]byte{1}, newMem)
	st2.apply(&pendingTxn{prep: p, tail: -1})
	if other.digest().Equal(st2.digest()) {
		t.Fatal("two clusters' digests agree")
	}
}

// TestLegacyNonNFCRowDeletable: a row enrolled before new ids had to be
// NFC (replayed from the log, where nothing is checked) can still be
// deleted, while a new row under a non-NFC id is refused.
func TestLegacyNonNFCRowDeletable(t *testing.T) {
	st, _ := newState(64, 2, 2, [16]byte{1}, newMem)
	sign := operatorKey(t, st)
	nfd := "zoe\u0308"
	old := sign(&protocol.Prepare{Txn: protocol.TxnID{1}, Origin: 1, Dim: 64, Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: 0, ID: nfd, Share: []byte{1, 2}}}})
	if e := st.validate(old, nil); e == nil || e.Code != protocol.CodeBadRequest {
		t.Fatalf("a new non-NFC id: %v", e)
	}
	if _, _, err := st.apply(&pendingTxn{prep: old, tail: -1}); err != nil { // as a replay does
		t.Fatal(err)
	}
	del := sign(&protocol.Prepare{Txn: protocol.TxnID{2}, Origin: 1, Dim: 64, Base: 1, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 0, ID: nfd}}})
	if e := st.validate(del, nil); e != nil {
		t.Fatalf("deleting a row enrolled under a non-NFC id: %v", e)
	}
}
