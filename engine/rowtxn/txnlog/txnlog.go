package txnlog

import (
	"encoding/binary"
	"fmt"

	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/internal/codec/wire"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// Log record types of a share holder's log. Their encoding is this
// package's own, independent of the wire protocol; golden vectors in
// testdata/ pin it.
const (
	RecPrepareV1 uint8 = 1 // a prepared transaction (before operator signatures): read only
	RecDecide    uint8 = 2 // the decision on a transaction
	RecPrepare   uint8 = 3 // a prepared transaction: the operator's Auth and ops, with this party's shares in the tail
	RecHeld      uint8 = 4 // at an origin: the prepare of a party that was down, kept until it confirms the decision
	RecEpoch     uint8 = 5 // a prepare that sets its origin segment's reshare epoch (a reshare, or a rebuild's restore): RecPrepare's layout, then the epoch
	// RecLocal is a change a party made to its own copy alone and
	// committed at once (Restore, Revoke, Rewrite): RecPrepare's layout,
	// then whether it sets the segment's epoch and the epoch. Never its
	// origin's transaction, even of the party's own segment: a restart
	// must not take it for the last one the party sent its peers.
	RecLocal uint8 = 6
)

// HasUnit reports whether an op keeps a share in the prepare's tail.
func HasUnit(k protocol.OpKind) bool { return k == protocol.OpPut || k == protocol.OpReplace }

// Each put's share is one unit of the prepare record's tail: the share's
// bytes (or the seed it expands from), then a CRC-32C of them. An erased
// unit is all zero bytes (a CRC-32C of zero bytes is never zero).
func UnitSize(share int) int { return share + 4 }

// seeded reports whether a prepare's puts carry seeds (all or none do).
func Seeded(p *protocol.Prepare) bool {
	for _, op := range p.Ops {
		if op.Kind == protocol.OpPut {
			return op.Seeded
		}
	}
	return false
}

// encodeRecord makes the log record of a Prepare whose puts carry shares
// (or seeds) of one size: a transaction's (RecPrepare, RecEpoch), or with
// local a change to this party's copy alone (RecLocal).
func encodeRecord(p *protocol.Prepare, local bool) store.Record {
	e := wire.Enc{B: make([]byte, 0, 32+len(p.Ops)*24)}
	e.Raw(p.Txn[:])
	e.U8(p.Origin)
	e.U16(p.Dim)
	e.U32(p.Base)
	e.Bool(Seeded(p))
	protocol.MarshalAuth(&e, p.Auth)
	e.U32(uint32(len(p.Ops)))
	size := 0
	for _, op := range p.Ops {
		if HasUnit(op.Kind) {
			size += UnitSize(len(op.Share))
		}
	}
	tail := make([]byte, 0, size) // (a batch's shares: tens of MB, copied once)
	for _, op := range p.Ops {
		e.U8(uint8(op.Kind))
		e.U32(op.Seq)
		e.Str(op.ID)
	}
	for _, op := range p.Ops {
		if !HasUnit(op.Kind) {
			continue
		}
		at := len(tail)
		tail = append(tail, op.Share...)
		tail = binary.BigEndian.AppendUint32(tail, store.Checksum(tail[at:]))
	}
	if local {
		e.Bool(p.Reshare != nil)
		var epoch uint32
		if p.Reshare != nil {
			epoch = p.Reshare.Epoch
		}
		e.U32(epoch)
		return store.Record{Type: RecLocal, Sealed: e.B, Tail: tail}
	}
	if p.Reshare != nil { // the epoch, never the key
		e.U32(p.Reshare.Epoch)
		return store.Record{Type: RecEpoch, Sealed: e.B, Tail: tail}
	}
	return store.Record{Type: RecPrepare, Sealed: e.B, Tail: tail}
}

// EncodePrepare is a transaction's prepare record.
func EncodePrepare(p *protocol.Prepare) store.Record { return encodeRecord(p, false) }

// EncodeLocal is the record of a change to this party's copy alone
// (RecLocal).
func EncodeLocal(p *protocol.Prepare) store.Record { return encodeRecord(p, true) }

// unit is the state of one share in a replayed prepare record.
type Unit uint8

const (
	UnitIntact Unit = iota
	UnitErased      // overwritten with zeros after a delete or an abort
	UnitBad         // neither: damage, or an erasure torn by a crash
)

// DecodePrepare parses a prepare record of shares of share bytes (seeds of
// seed bytes); shares of erased or bad units are left nil and reported in
// units (one per put, in op order).
func DecodePrepare(en store.Entry, share, seed int) (*protocol.Prepare, []Unit, error) {
	d := wire.Dec{B: en.Sealed}
	p := &protocol.Prepare{}
	d.Fixed(p.Txn[:])
	p.Origin, p.Dim, p.Base = d.U8(), d.U16(), d.U32()
	isSeeded := d.Bool()
	if en.Type == RecPrepare || en.Type == RecEpoch || en.Type == RecLocal {
		p.Auth = protocol.UnmarshalAuth(&d)
	}
	if isSeeded {
		if seed == 0 {
			return nil, nil, fmt.Errorf("a prepare record of seeds in a log whose shares are never seeded")
		}
		share = seed
	}
	if d.Err == nil && (p.Dim < 1 || int(p.Dim) > template.MaxDim) {
		return nil, nil, fmt.Errorf("prepare record of dimension %d", p.Dim)
	}
	n := d.Count(protocol.MaxBatch, 7)
	puts := 0
	for range n {
		op := protocol.Op{Kind: protocol.OpKind(d.U8()), Seq: d.U32(), ID: d.Str(protocol.MaxIDLen)}
		switch op.Kind {
		case protocol.OpPut:
			op.Seeded = isSeeded
			puts++
		case protocol.OpReplace:
			puts++
		case protocol.OpDelete:
		default:
			d.Fail("op kind %d", op.Kind)
		}
		p.Ops = append(p.Ops, op)
	}
	switch en.Type {
	case RecEpoch:
		p.Reshare = &protocol.Reshare{Epoch: d.U32()}
	case RecLocal:
		if sets, epoch := d.Bool(), d.U32(); sets {
			p.Reshare = &protocol.Reshare{Epoch: epoch}
		}
	}
	if err := d.Done(); err != nil {
		return nil, nil, fmt.Errorf("prepare record: %w", err)
	}
	us := UnitSize(share)
	if len(en.Tail) != puts*us {
		return nil, nil, fmt.Errorf("prepare record with %d puts has a tail of %d bytes", puts, len(en.Tail))
	}
	units := make([]Unit, 0, puts)
	i := 0
	for k := range p.Ops {
		if !HasUnit(p.Ops[k].Kind) {
			continue
		}
		u := en.Tail[i*us : (i+1)*us]
		i++
		st := CheckUnit(u)
		units = append(units, st)
		if st == UnitIntact {
			p.Ops[k].Share = append([]byte(nil), u[:share]...)
		}
	}
	return p, units, nil
}

func CheckUnit(u []byte) Unit {
	body := u[:len(u)-4]
	if store.Checksum(body) == binary.BigEndian.Uint32(u[len(u)-4:]) {
		return UnitIntact
	}
	for _, b := range u {
		if b != 0 {
			return UnitBad
		}
	}
	return UnitErased
}

func EncodeDecide(d *protocol.Decide) store.Record {
	e := wire.Enc{}
	e.Raw(d.Txn[:])
	e.U8(d.Origin)
	e.Bool(d.Commit)
	if d.Proof != [32]byte{} {
		e.Raw(d.Proof[:]) // the origin's proof for the third, to relay it after a restart
	}
	return store.Record{Type: RecDecide, Sealed: e.B}
}

func DecodeDecide(en store.Entry) (*protocol.Decide, error) {
	d := wire.Dec{B: en.Sealed}
	m := &protocol.Decide{}
	d.Fixed(m.Txn[:])
	m.Origin, m.Commit = d.U8(), d.Bool()
	if len(d.B) == len(m.Proof) { // the origin's proof for the third (none in an abort, the origin's own or a record before proofs)
		d.Fixed(m.Proof[:])
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("decide record: %w", err)
	}
	if en.Tail != nil {
		return nil, fmt.Errorf("decide record with a tail")
	}
	return m, nil
}

// A held record keeps, at the origin of a transaction committed while one
// party was down (a mode that answers with a party down: Spec().Outage),
// what that party must still get: its prepare, a SealedPrepare whose part
// only it can open, or a Prepare without shares (a deletion). The part is
// the record's tail (one unit), erased once the party has confirmed the
// decision; a held record whose tail is intact at start is queued again.

func EncodeHeld(party int, m protocol.Msg) store.Record {
	e := wire.Enc{}
	e.U8(uint8(party))
	var part, held []byte
	if sp, ok := m.(*protocol.SealedPrepare); ok {
		bare := *sp
		part, bare.Part = sp.Part, nil
		held, bare.Held = sp.Held, nil
		m = &bare
	}
	e.Bytes32(protocol.Marshal(m))
	// The tail is one unit, erased whole once the party has the change: a
	// 1 byte (so that a held deletion, which has no part, still has a unit
	// that erasing changes), the part, its CRC; or, with the third party's
	// part that goes along with it (SealedPrepare.Held), a 2 byte, the
	// part's length, the part, the third's part, the CRC.
	tail := []byte{1}
	if len(held) > 0 {
		tail = binary.BigEndian.AppendUint32([]byte{2}, uint32(len(part)))
	}
	tail = append(append(append(tail, part...), held...), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(tail[len(tail)-4:], store.Checksum(tail[:len(tail)-4]))
	return store.Record{Type: RecHeld, Sealed: e.B, Tail: tail}
}

// held is a decoded held record: the party, its message (nil when the
// tail was erased: delivered) and the transaction.
type Held struct {
	Party int
	Msg   protocol.Msg
	Txn   protocol.TxnID
}

func DecodeHeld(en store.Entry, mu int) (*Held, error) {
	d := wire.Dec{B: en.Sealed}
	h := &Held{Party: int(d.U8())}
	b := d.Bytes32(store.MaxRecord)
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("held record: %w", err)
	}
	if h.Party >= mu || len(en.Tail) < 5 {
		return nil, fmt.Errorf("held record of party %d with a tail of %d bytes", h.Party, len(en.Tail))
	}
	m, err := protocol.DecodeStored(b) // a log an earlier build wrote
	if err != nil {
		return nil, fmt.Errorf("held record: %w", err)
	}
	switch m := m.(type) {
	case *protocol.SealedPrepare:
		h.Txn = m.Prepare.Txn
	case *protocol.Prepare:
		h.Txn = m.Txn
	default:
		return nil, fmt.Errorf("held record of a %v", m.Type())
	}
	switch CheckUnit(en.Tail) {
	case UnitErased:
		return h, nil
	case UnitBad:
		return nil, fmt.Errorf("held record's part fails its checksum")
	}
	body := en.Tail[1 : len(en.Tail)-4]
	sp, sealed := m.(*protocol.SealedPrepare)
	switch {
	case en.Tail[0] == 1 && sealed:
		sp.Part = append([]byte(nil), body...)
	case en.Tail[0] == 1:
	case en.Tail[0] == 2 && sealed && len(body) >= 4 && int64(binary.BigEndian.Uint32(body)) <= int64(len(body)-4):
		n := int(binary.BigEndian.Uint32(body))
		sp.Part = append([]byte(nil), body[4:4+n]...)
		if sp.Held = append([]byte(nil), body[4+n:]...); len(sp.Held) == 0 {
			sp.Held = nil
		}
	default:
		return nil, fmt.Errorf("held record's part of format %d (%d bytes)", en.Tail[0], len(body))
	}
	h.Msg = m
	return h, nil
}
