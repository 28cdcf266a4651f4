package rowtxn

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
	recPrepareV1 uint8 = 1 // a prepared transaction (before operator signatures): read only
	recDecide    uint8 = 2 // the decision on a transaction
	recPrepare   uint8 = 3 // a prepared transaction: the operator's Auth and ops, with this party's shares in the tail
	recHeld      uint8 = 4 // at an origin: the prepare of a party that was down, kept until it confirms the decision
	recEpoch     uint8 = 5 // a prepare that sets its origin segment's reshare epoch (a reshare, or a rebuild's restore): recPrepare's layout, then the epoch
	// recLocal is a change a party made to its own copy alone and
	// committed at once (Restore, Revoke, Rewrite): recPrepare's layout,
	// then whether it sets the segment's epoch and the epoch. Never its
	// origin's transaction, even of the party's own segment: a restart
	// must not take it for the last one the party sent its peers.
	recLocal uint8 = 6
)

// hasUnit reports whether an op keeps a share in the prepare's tail.
func hasUnit(k protocol.OpKind) bool { return k == protocol.OpPut || k == protocol.OpReplace }

// Each put's share is one unit of the prepare record's tail: the share's
// bytes (or the seed it expands from), then a CRC-32C of them. An erased
// unit is all zero bytes (a CRC-32C of zero bytes is never zero).
func unitSize(share int) int { return share + 4 }

// seeded reports whether a prepare's puts carry seeds (all or none do).
func seeded(p *protocol.Prepare) bool {
	for _, op := range p.Ops {
		if op.Kind == protocol.OpPut {
			return op.Seeded
		}
	}
	return false
}

// encodeRecord makes the log record of a Prepare whose puts carry shares
// (or seeds) of one size: a transaction's (recPrepare, recEpoch), or with
// local a change to this party's copy alone (recLocal).
func encodeRecord(p *protocol.Prepare, local bool) store.Record {
	e := wire.Enc{B: make([]byte, 0, 32+len(p.Ops)*24)}
	e.Raw(p.Txn[:])
	e.U8(p.Origin)
	e.U16(p.Dim)
	e.U32(p.Base)
	e.Bool(seeded(p))
	protocol.MarshalAuth(&e, p.Auth)
	e.U32(uint32(len(p.Ops)))
	size := 0
	for _, op := range p.Ops {
		if hasUnit(op.Kind) {
			size += unitSize(len(op.Share))
		}
	}
	tail := make([]byte, 0, size) // (a batch's shares: tens of MB, copied once)
	for _, op := range p.Ops {
		e.U8(uint8(op.Kind))
		e.U32(op.Seq)
		e.Str(op.ID)
	}
	for _, op := range p.Ops {
		if !hasUnit(op.Kind) {
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
		return store.Record{Type: recLocal, Sealed: e.B, Tail: tail}
	}
	if p.Reshare != nil { // the epoch, never the key
		e.U32(p.Reshare.Epoch)
		return store.Record{Type: recEpoch, Sealed: e.B, Tail: tail}
	}
	return store.Record{Type: recPrepare, Sealed: e.B, Tail: tail}
}

// encodePrepare is a transaction's prepare record.
func encodePrepare(p *protocol.Prepare) store.Record { return encodeRecord(p, false) }

// encodeLocal is the record of a change to this party's copy alone
// (recLocal).
func encodeLocal(p *protocol.Prepare) store.Record { return encodeRecord(p, true) }

// unit is the state of one share in a replayed prepare record.
type unit uint8

const (
	unitIntact unit = iota
	unitErased      // overwritten with zeros after a delete or an abort
	unitBad         // neither: damage, or an erasure torn by a crash
)

// decodePrepare parses a prepare record of shares of share bytes (seeds of
// seed bytes); shares of erased or bad units are left nil and reported in
// units (one per put, in op order).
func decodePrepare(en store.Entry, share, seed int) (*protocol.Prepare, []unit, error) {
	d := wire.Dec{B: en.Sealed}
	p := &protocol.Prepare{}
	d.Fixed(p.Txn[:])
	p.Origin, p.Dim, p.Base = d.U8(), d.U16(), d.U32()
	isSeeded := d.Bool()
	if en.Type == recPrepare || en.Type == recEpoch || en.Type == recLocal {
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
	case recEpoch:
		p.Reshare = &protocol.Reshare{Epoch: d.U32()}
	case recLocal:
		if sets, epoch := d.Bool(), d.U32(); sets {
			p.Reshare = &protocol.Reshare{Epoch: epoch}
		}
	}
	if err := d.Done(); err != nil {
		return nil, nil, fmt.Errorf("prepare record: %w", err)
	}
	us := unitSize(share)
	if len(en.Tail) != puts*us {
		return nil, nil, fmt.Errorf("prepare record with %d puts has a tail of %d bytes", puts, len(en.Tail))
	}
	units := make([]unit, 0, puts)
	i := 0
	for k := range p.Ops {
		if !hasUnit(p.Ops[k].Kind) {
			continue
		}
		u := en.Tail[i*us : (i+1)*us]
		i++
		st := checkUnit(u)
		units = append(units, st)
		if st == unitIntact {
			p.Ops[k].Share = append([]byte(nil), u[:share]...)
		}
	}
	return p, units, nil
}

func checkUnit(u []byte) unit {
	body := u[:len(u)-4]
	if store.Checksum(body) == binary.BigEndian.Uint32(u[len(u)-4:]) {
		return unitIntact
	}
	for _, b := range u {
		if b != 0 {
			return unitBad
		}
	}
	return unitErased
}

func encodeDecide(d *protocol.Decide) store.Record {
	e := wire.Enc{}
	e.Raw(d.Txn[:])
	e.U8(d.Origin)
	e.Bool(d.Commit)
	if d.Proof != [32]byte{} {
		e.Raw(d.Proof[:]) // the origin's proof for the third, to relay it after a restart
	}
	return store.Record{Type: recDecide, Sealed: e.B}
}

func decodeDecide(en store.Entry) (*protocol.Decide, error) {
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

func encodeHeld(party int, m protocol.Msg) store.Record {
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
	return store.Record{Type: recHeld, Sealed: e.B, Tail: tail}
}

// held is a decoded held record: the party, its message (nil when the
// tail was erased: delivered) and the transaction.
type held struct {
	party int
	msg   protocol.Msg
	txn   protocol.TxnID
}

func decodeHeld(en store.Entry, mu int) (*held, error) {
	d := wire.Dec{B: en.Sealed}
	h := &held{party: int(d.U8())}
	b := d.Bytes32(store.MaxRecord)
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("held record: %w", err)
	}
	if h.party >= mu || len(en.Tail) < 5 {
		return nil, fmt.Errorf("held record of party %d with a tail of %d bytes", h.party, len(en.Tail))
	}
	m, err := protocol.DecodeStored(b) // a log an earlier build wrote
	if err != nil {
		return nil, fmt.Errorf("held record: %w", err)
	}
	switch m := m.(type) {
	case *protocol.SealedPrepare:
		h.txn = m.Prepare.Txn
	case *protocol.Prepare:
		h.txn = m.Txn
	default:
		return nil, fmt.Errorf("held record of a %v", m.Type())
	}
	switch checkUnit(en.Tail) {
	case unitErased:
		return h, nil
	case unitBad:
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
	h.msg = m
	return h, nil
}
