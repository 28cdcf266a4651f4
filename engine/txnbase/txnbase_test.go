package txnbase

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/protocol"
)

// TestRowMap: a removal names the row and its id (a stale one changes
// nothing), and the digest is the same whatever the order of the changes.
func TestRowMap(t *testing.T) {
	cl := [16]byte{7}
	a := NewRowMap(cl, 2)
	for _, id := range []string{"x", "y", "z"} {
		a.Reserve(1, id)
	}
	for seq := range 3 {
		a.Commit(rowmap.Ref{Seg: 1, Seq: seq})
	}
	if a.Remove(rowmap.Ref{Seg: 1, Seq: 1}, "x") || a.Remove(rowmap.Ref{Seg: 0, Seq: 1}, "y") {
		t.Fatal("removed a row under another id or segment")
	}
	if !a.Remove(rowmap.Ref{Seg: 1, Seq: 1}, "y") || a.Remove(rowmap.Ref{Seg: 1, Seq: 1}, "y") {
		t.Fatal("a live row removed other than once")
	}
	if ref, ok := a.Lookup("z"); !ok || ref != (rowmap.Ref{Seg: 1, Seq: 2}) || a.ID(1, 2) != "z" {
		t.Fatalf("z at %v %v", ref, ok)
	}
	b := NewRowMap(cl, 2)
	for _, id := range []string{"x", "y", "z"} {
		b.Reserve(1, id)
	}
	b.Commit(rowmap.Ref{Seg: 1, Seq: 2})
	b.Commit(rowmap.Ref{Seg: 1, Seq: 0})
	if ga, gb := a.Digest(), b.Digest(); !ga.Equal(gb) || ga[1].Rows != 3 || ga[1].Live != 2 || ga[0].Rows != 0 {
		t.Fatalf("digests %v and %v", ga, gb)
	}
}

// TestOperators: one set of refusals, each naming the change and what to
// do; a signature passes once.
func TestOperators(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cl := [16]byte{7}
	o := NewOperators(func(name string) []*ecdsa.PublicKey {
		if name == "op" {
			return []*ecdsa.PublicKey{&key.PublicKey}
		}
		return nil
	}, cl)
	sign := func(signer string, op protocol.OpKind, ids ...string) protocol.Auth {
		a, err := protocol.Sign(key, signer, cl, op, ids)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	good := sign("op", protocol.OpDelete, "a")
	for name, c := range map[string]struct {
		a    protocol.Auth
		op   protocol.OpKind
		want string
	}{
		"stranger":   {sign("eve", protocol.OpDelete, "a"), protocol.OpDelete, "not signed by an operator"},
		"other id":   {sign("op", protocol.OpDelete, "b"), protocol.OpDelete, "does not match the signature"},
		"other kind": {sign("op", protocol.OpPut, "a"), protocol.OpDelete, "send it again, unaltered"},
	} {
		if e := o.Check(c.a, c.op, []string{"a"}, nil); e == nil || e.Code != protocol.CodeForbidden || !strings.Contains(e.Msg, c.want) {
			t.Errorf("%s: %v", name, e)
		}
	}
	if e := o.Check(good, protocol.OpDelete, []string{"a"}, nil); e != nil {
		t.Fatal(e)
	}
	o.Use(good.Nonce)
	if e := o.Check(good, protocol.OpDelete, []string{"a"}, nil); e == nil || !strings.Contains(e.Msg, "the deletion of 1 row replays") || !strings.Contains(e.Msg, "sign the request again") {
		t.Fatalf("a replay: %v", e)
	}
	if e := o.Signed(good, protocol.OpDelete, []string{"a"}, nil); e != nil {
		t.Fatalf("the signature alone: %v", e)
	}
}

// TestStopAndRollback: a failed log stops the server and refuses every
// request after; a rollback keeps the request's own fault as its code.
func TestStopAndRollback(t *testing.T) {
	var stopped error
	s := NewStop(engine.Env{Self: "p1", Fatal: func(err error) { stopped = err }}, "core")
	h := s.Guard(func(context.Context, engine.Request) protocol.Msg { return &protocol.DecideOK{} })
	if _, ok := h(context.Background(), engine.Request{}).(*protocol.DecideOK); !ok {
		t.Fatal("refused before any failure")
	}
	if e := s.Fatal(errors.New("disk full")); e.Code != protocol.CodeUnavailable || stopped == nil || !strings.Contains(stopped.Error(), "core: cannot write the log: disk full") {
		t.Fatalf("%v, stopped with %v", e, stopped)
	}
	if e, ok := h(context.Background(), engine.Request{}).(*protocol.Error); !ok || !s.Failed() || !strings.Contains(e.Msg, "p1 cannot write its log") {
		t.Fatalf("after the failure: %v", e)
	}
	for code, want := range map[protocol.Code]protocol.Code{protocol.CodeDuplicate: protocol.CodeDuplicate, protocol.CodeUnknownID: protocol.CodeUnknownID,
		protocol.CodeBadRequest: protocol.CodeBadRequest, protocol.CodeUnavailable: protocol.CodeAborted, protocol.CodeForbidden: protocol.CodeAborted, 0: protocol.CodeAborted} {
		if got := AbortCode(code); got != want {
			t.Errorf("code %v: %v, want %v", code, got, want)
		}
	}
}
