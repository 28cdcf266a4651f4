package hemode

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idface/idface/harness/golden"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
)

func sampleRecords() []store.Record {
	return []store.Record{
		encodeReserve(&reserve{Txn: protocol.TxnID{7}, Base: 12, IDs: []string{"a", "", "ÿ"}}),
		encodeDecide(1, protocol.TxnID{7}, true),
		encodeDecide(2, protocol.TxnID{8}, false),
		encodeDelete(3, "a", 12),
	}
}

// TestRecordGolden pins the row-log record encodings (store.KindHERows).
func TestRecordGolden(t *testing.T) {
	var b strings.Builder
	for _, r := range sampleRecords() {
		fmt.Fprintf(&b, "type=%d sealed=%s\n", r.Type, hex.EncodeToString(r.Sealed))
	}
	golden.Check(t, "records.txt", "TestRecordGolden from sampleRecords", b.String())
}

// TestKeyRecordGolden pins the row log's first record, the public key it
// is bound to (added after records.txt, which it leaves unchanged).
func TestKeyRecordGolden(t *testing.T) {
	r := encodeKey(keyRecord{Key: [32]byte{0xab, 1, 2, 31: 0xff}, Generation: 1})
	golden.Check(t, "keyrecord.txt", "TestKeyRecordGolden", fmt.Sprintf("type=%d sealed=%s\n", r.Type, hex.EncodeToString(r.Sealed)))
	got, err := decodeRecord(store.Entry{Record: r})
	if err != nil || got.typ != recKey || got.key != (keyRecord{Key: [32]byte{0xab, 1, 2, 31: 0xff}, Generation: 1}) {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := decodeRecord(store.Entry{Record: store.Record{Type: recKey, Sealed: r.Sealed[:39]}}); err == nil {
		t.Fatal("a short key record accepted")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	recs := sampleRecords()
	r, err := decodeRecord(store.Entry{Record: recs[0]})
	if err != nil || !reflect.DeepEqual(r.res, &reserve{Txn: protocol.TxnID{7}, Base: 12, IDs: []string{"a", "", "ÿ"}}) {
		t.Fatalf("%+v %v", r.res, err)
	}
	if r, err := decodeRecord(store.Entry{Record: recs[3]}); err != nil || r.id != "a" || r.row != 12 || r.seq != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []store.Record{{Type: 9}, {Type: recDecide, Sealed: []byte{1}}, {Type: recDelete, Sealed: append(recs[3].Sealed, 0)}} {
		if _, err := decodeRecord(store.Entry{Record: bad}); err == nil {
			t.Fatalf("record %+v accepted", bad)
		}
	}
}

// FuzzDecodeRecord: any record bytes decode to an error or a record,
// never a panic, and a decoded reserve stays within its bounds.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range append(sampleRecords(), encodeKey(keyRecord{Generation: 1})) {
		f.Add(r.Type, r.Sealed)
	}
	f.Fuzz(func(t *testing.T, typ uint8, sealed []byte) {
		r, err := decodeRecord(store.Entry{Record: store.Record{Type: typ, Sealed: sealed}})
		if err == nil && r.res != nil && len(r.res.IDs) > protocol.MaxBatch {
			t.Fatal("oversized reservation")
		}
	})
}

// TestAuthRecordGolden pins the operator-signature record that precedes a
// reservation or a deletion (added after records.txt, which it leaves
// unchanged).
func TestAuthRecordGolden(t *testing.T) {
	a := protocol.Auth{Signer: "op", Nonce: [16]byte{7, 7}, Sig: []byte{0x30, 1, 2, 3}}
	r := encodeAuth(a)
	golden.Check(t, "authrecord.txt", "TestAuthRecordGolden", fmt.Sprintf("type=%d sealed=%s\n", r.Type, hex.EncodeToString(r.Sealed)))
	got, err := decodeRecord(store.Entry{Record: r})
	if err != nil || got.typ != recAuth || !reflect.DeepEqual(got.auth, a) {
		t.Fatalf("%+v %v", got, err)
	}
}
