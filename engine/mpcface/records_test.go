package mpcface

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idface/idface/internal/golden"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/protocol"
)

func sampleRecords() []store.Record {
	return []store.Record{
		encodePrepare(&protocol.Prepare{Txn: protocol.TxnID{9, 8}, Origin: 1, Dim: 70, Base: 5, Ops: []protocol.Op{
			{Kind: protocol.OpPut, Seq: 5, ID: "x", Plus: []uint64{1, 2}, Minus: []uint64{3, 1 << 60}},
			{Kind: protocol.OpPut, Seq: 6, ID: "ÿ", Plus: []uint64{0, 7}, Minus: []uint64{8, 0}},
		}}),
		encodePrepare(&protocol.Prepare{Txn: protocol.TxnID{1}, Origin: 0, Dim: 512, Base: 9, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 3, ID: "gone"}}}),
		encodeDecide(&protocol.Decide{Txn: protocol.TxnID{3}, Origin: 2, Commit: true}),
		encodeDecide(&protocol.Decide{Txn: protocol.TxnID{4}, Origin: 0, Commit: false}),
	}
}

// TestRecordGolden pins the log record encodings (store.KindShares).
func TestRecordGolden(t *testing.T) {
	var b strings.Builder
	for _, r := range sampleRecords() {
		fmt.Fprintf(&b, "type=%d sealed=%s tail=%s\n", r.Type, hex.EncodeToString(r.Sealed), hex.EncodeToString(r.Tail))
	}
	golden.Check(t, "records.txt", "TestRecordGolden from sampleRecords", b.String())
}

func TestRecordRoundTrip(t *testing.T) {
	recs := sampleRecords()
	p, units, err := decodePrepare(store.Entry{Record: recs[0], TailIntact: true})
	if err != nil || len(units) != 2 || units[0] != unitIntact || !reflect.DeepEqual(p.Ops[1].Minus, []uint64{8, 0}) {
		t.Fatalf("%v %v %+v", err, units, p)
	}
	// An erased unit reads as erased; a changed byte as bad.
	tail := append([]byte(nil), recs[0].Tail...)
	us := unitSize(70)
	clear(tail[:us])
	tail[us+3] ^= 1
	_, units, err = decodePrepare(store.Entry{Record: store.Record{Type: recPrepare, Sealed: recs[0].Sealed, Tail: tail}})
	if err != nil || units[0] != unitErased || units[1] != unitBad {
		t.Fatalf("units %v, %v", units, err)
	}
	if _, _, err := decodePrepare(store.Entry{Record: store.Record{Type: recPrepare, Sealed: recs[0].Sealed, Tail: tail[:us]}}); err == nil {
		t.Fatal("a short tail was accepted")
	}
	d, err := decodeDecide(store.Entry{Record: recs[2]})
	if err != nil || !d.Commit || d.Origin != 2 {
		t.Fatalf("%+v %v", d, err)
	}
}
