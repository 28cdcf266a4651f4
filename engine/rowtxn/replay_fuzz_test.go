package rowtxn

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/rowtxn/txnlog"
	"github.com/idface/idface/harness/members"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
)

// sampleRecords are seeds of FuzzReplay: a prepare of two puts and its
// decision, and a prepare of a deletion (txnlog's tests pin their bytes).
func sampleRecords() []store.Record {
	share := make([]byte, 32)
	share[0] = 1
	return []store.Record{
		txnlog.EncodePrepare(&protocol.Prepare{Txn: protocol.TxnID{9, 8}, Origin: 1, Dim: 70, Base: 5, Ops: []protocol.Op{
			{Kind: protocol.OpPut, Seq: 5, ID: "x", Share: share},
			{Kind: protocol.OpPut, Seq: 6, ID: "y", Share: share},
		}}),
		txnlog.EncodeDecide(&protocol.Decide{Txn: protocol.TxnID{9, 8}, Origin: 1, Commit: true}),
		txnlog.EncodePrepare(&protocol.Prepare{Txn: protocol.TxnID{1}, Origin: 0, Dim: 70, Base: 9, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 3, ID: "gone"}}}),
	}
}

// FuzzReplay feeds arbitrary records to a party's replay: an error or an
// applied record, never a panic.
func FuzzReplay(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(r.Type, r.Sealed, r.Tail, false)
	}
	parties := []config.Member{members.Member(f, "p1", "a", ""), members.Member(f, "p2", "b", ""), members.Member(f, "p3", "c", "")}
	f.Fuzz(func(t *testing.T, typ uint8, sealed, tail []byte, last bool) {
		p, err := config.New(config.Literal{Mode: testMode, Dim: 70, Parties: parties}, "")
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(engine.Env{Params: p, Self: "p1", Metrics: prometheus.NewRegistry()}, Options[*memShares]{
			ShareSize: 32, NewShares: func() (*memShares, error) { return &memShares{size: 32}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sampleRecords()[:1] { // a prepare to decide
			c.Replay(store.Entry{Record: r, TailIntact: true})
		}
		c.Replay(store.Entry{Record: store.Record{Type: typ, Sealed: sealed, Tail: tail}, Last: last})
	})
}
