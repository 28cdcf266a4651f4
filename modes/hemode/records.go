package hemode

import (
	"fmt"

	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/internal/codec/wire"
	"github.com/idface/idface/protocol"
)

// Log record types of a local server's row log (store.KindHERows). Their
// encoding is this package's own; golden vectors in testdata/ pin it.
const (
	recReserve uint8 = 1 // slots taken by a batch: rows base.. get ids ("" for a burned slot)
	recDecide  uint8 = 2 // the decision on a reservation
	recDelete  uint8 = 3 // a row tombstoned
	// recKey is the first record of every row log: the fingerprint of the
	// public key the server's group files are encrypted under, and the
	// key's generation. A log that does not start with it was written by
	// an earlier idface and is refused.
	recKey uint8 = 4
	// recAuth is the operator's signature of the reservation or deletion
	// that follows it (appended with it, in one write): its nonce is never
	// accepted again, and a deletion keeps its signature for the servers
	// the sequencer brings up to date.
	recAuth uint8 = 5
)

func encodeAuth(a protocol.Auth) store.Record {
	e := wire.Enc{}
	protocol.MarshalAuth(&e, a)
	return store.Record{Type: recAuth, Sealed: e.B}
}

// Generation is the key generation written into new row logs and group
// files (a share or key epoch later; a file of another generation is
// refused).
const Generation = 1

// keyRecord binds a row log to a public key.
type keyRecord struct {
	Key        [32]byte
	Generation uint64
}

func encodeKey(k keyRecord) store.Record {
	e := wire.Enc{}
	e.Raw(k.Key[:])
	e.U64(k.Generation)
	return store.Record{Type: recKey, Sealed: e.B}
}

// reserve is the record of slots taken by a batch. The slots stay taken
// even if the batch aborts, so a slot whose ciphertexts may hold a
// contribution is never reused.
type reserve struct {
	Txn  protocol.TxnID
	Base uint32
	IDs  []string
}

func encodeReserve(r *reserve) store.Record {
	e := wire.Enc{}
	e.Raw(r.Txn[:])
	e.U32(r.Base)
	e.U32(uint32(len(r.IDs)))
	for _, id := range r.IDs {
		e.Str(id)
	}
	return store.Record{Type: recReserve, Sealed: e.B}
}

// encodeDecide records change seq: the decision on reservation txn.
func encodeDecide(seq uint64, txn protocol.TxnID, commit bool) store.Record {
	e := wire.Enc{}
	e.U64(seq)
	e.Raw(txn[:])
	e.Bool(commit)
	return store.Record{Type: recDecide, Sealed: e.B}
}

// encodeDelete records change seq: row (holding id) deleted.
func encodeDelete(seq uint64, id string, row int) store.Record {
	e := wire.Enc{}
	e.U64(seq)
	e.Str(id)
	e.U32(uint32(row))
	return store.Record{Type: recDelete, Sealed: e.B}
}

// record is a decoded row-log record.
type record struct {
	typ    uint8
	res    *reserve
	seq    uint64
	txn    protocol.TxnID
	commit bool
	id     string
	row    int
	key    keyRecord
	auth   protocol.Auth
}

func decodeRecord(en store.Entry) (record, error) {
	d := wire.Dec{B: en.Sealed}
	r := record{typ: en.Type}
	switch en.Type {
	case recReserve:
		res := &reserve{}
		d.Fixed(res.Txn[:])
		res.Base = d.U32()
		n := d.Count(protocol.MaxBatch, 2)
		for range n {
			res.IDs = append(res.IDs, d.Str(protocol.MaxIDLen))
		}
		r.res = res
	case recDecide:
		r.seq = d.U64()
		d.Fixed(r.txn[:])
		r.commit = d.Bool()
	case recDelete:
		r.seq = d.U64()
		r.id = d.Str(protocol.MaxIDLen)
		r.row = int(d.U32())
	case recKey:
		d.Fixed(r.key.Key[:])
		r.key.Generation = d.U64()
	case recAuth:
		r.auth = protocol.UnmarshalAuth(&d)
	default:
		return r, fmt.Errorf("hemode: record type %d in a row log", en.Type)
	}
	if err := d.Done(); err != nil {
		return r, fmt.Errorf("hemode: record type %d: %w", en.Type, err)
	}
	if en.Tail != nil {
		return r, fmt.Errorf("hemode: record with a tail")
	}
	return r, nil
}
