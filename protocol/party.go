package protocol

import (
	"fmt"

	"github.com/idface/idface/template"
)

// SegDigest summarises one origin segment of a party's row map: committed
// row slots, live rows, and a set hash over the live (row, id) pairs.
type SegDigest struct {
	Rows uint32
	Live uint32
	Hash [16]byte
}

// Digest is a party's row map: one SegDigest per origin party, in party
// order. Two parties answer a query together only if their digests are
// equal (DESIGN "Consistency").
type Digest []SegDigest

// Equal reports whether two digests describe the same row map.
func (g Digest) Equal(h Digest) bool {
	if len(g) != len(h) {
		return false
	}
	for i := range g {
		if g[i] != h[i] {
			return false
		}
	}
	return true
}

// Diff names the first difference, for error messages.
func (g Digest) Diff(h Digest) string {
	if len(g) != len(h) {
		return fmt.Sprintf("%d segments vs %d", len(g), len(h))
	}
	for i := range g {
		if g[i] != h[i] {
			return fmt.Sprintf("segment %d: %d rows/%d live vs %d rows/%d live (hash %x vs %x)",
				i, g[i].Rows, g[i].Live, h[i].Rows, h[i].Live, g[i].Hash[:4], h[i].Hash[:4])
		}
	}
	return "equal"
}

func (g Digest) marshal(e *enc) {
	e.u32(uint32(len(g)))
	for _, s := range g {
		e.u32(s.Rows)
		e.u32(s.Live)
		e.raw(s.Hash[:])
	}
}

func (g *Digest) unmarshal(d *dec) {
	n := d.count(MaxParties, 24)
	*g = make(Digest, n)
	for i := range *g {
		s := &(*g)[i]
		s.Rows, s.Live = d.u32(), d.u32()
		copy(s.Hash[:], d.take(16))
		if d.err == nil && (s.Live > s.Rows || s.Rows > MaxRows) {
			d.fail("segment %d: %d live of %d rows", i, s.Live, s.Rows)
		}
	}
}

// TxnID names a two-phase transaction; the origin draws it at random.
type TxnID [16]byte

// OpKind is what a transaction does to one row.
type OpKind uint8

const (
	OpPut    OpKind = 1 // store a share at (origin, seq) under id
	OpDelete OpKind = 2 // tombstone (origin, seq), which holds id
)

// Op is one row operation. For OpPut, Plus and Minus are the receiving
// party's own share (Words(dim) words each); for OpDelete they are empty.
type Op struct {
	Kind        OpKind
	Seq         uint32
	ID          string
	Plus, Minus []uint64
}

// Prepare is phase one: the origin asks a party to make ops durable
// (fsync) and vote. Base is the origin segment's committed row count the
// ops build on; a party whose count differs refuses.
type Prepare struct {
	Txn    TxnID
	Origin uint8
	Dim    uint16
	Base   uint32
	Ops    []Op
}

func (m *Prepare) Type() Type { return TPrepare }
func (m *Prepare) marshal(e *enc) {
	e.raw(m.Txn[:])
	e.u8(m.Origin)
	e.u16(m.Dim)
	e.u32(m.Base)
	e.u32(uint32(len(m.Ops)))
	for _, op := range m.Ops {
		e.u8(uint8(op.Kind))
		e.u32(op.Seq)
		e.str(op.ID)
		if op.Kind == OpPut {
			e.words(op.Plus)
			e.words(op.Minus)
		}
	}
}
func (m *Prepare) unmarshal(d *dec) {
	copy(m.Txn[:], d.take(16))
	m.Origin = d.u8()
	m.Dim = d.u16()
	m.Base = d.u32()
	if d.err == nil && (m.Dim < 1 || int(m.Dim) > MaxDim) {
		d.fail("dimension %d", m.Dim)
		return
	}
	w := template.Words(int(m.Dim))
	n := d.count(MaxBatch, 7)
	for range n {
		op := Op{Kind: OpKind(d.u8()), Seq: d.u32(), ID: d.str(MaxIDLen)}
		switch op.Kind {
		case OpPut:
			op.Plus, op.Minus = d.words(w), d.words(w)
		case OpDelete:
		default:
			d.fail("op kind %d", op.Kind)
		}
		if d.err != nil {
			return
		}
		m.Ops = append(m.Ops, op)
	}
}

// Vote is a party's yes to a Prepare (a refusal is an Error).
type Vote struct{ Txn TxnID }

func (m *Vote) Type() Type       { return TVote }
func (m *Vote) marshal(e *enc)   { e.raw(m.Txn[:]) }
func (m *Vote) unmarshal(d *dec) { copy(m.Txn[:], d.take(16)) }

// Decide is phase two: commit or abort a prepared transaction. Parties
// answer DecideOK whether or not they still hold it (idempotent).
type Decide struct {
	Txn    TxnID
	Origin uint8
	Commit bool
}

func (m *Decide) Type() Type { return TDecide }
func (m *Decide) marshal(e *enc) {
	e.raw(m.Txn[:])
	e.u8(m.Origin)
	e.bool(m.Commit)
}
func (m *Decide) unmarshal(d *dec) {
	copy(m.Txn[:], d.take(16))
	m.Origin = d.u8()
	m.Commit = d.bool()
}

// DecideOK acknowledges a Decide.
type DecideOK struct{}

func (m *DecideOK) Type() Type     { return TDecideOK }
func (m *DecideOK) marshal(*enc)   {}
func (m *DecideOK) unmarshal(*dec) {}

// Query is the entry's broadcast of y+ and y- (paper Fig. "2pc_id": 2d
// bits) with its row map digest. The party answers with Block headers,
// each followed by raw words, then BlocksEnd, or an Error.
type Query struct {
	Dim        uint16
	Beta       uint16
	Plus       []uint64
	Minus      []uint64
	Digest     Digest
	BlockWords uint32
}

func (m *Query) Type() Type { return TQuery }
func (m *Query) marshal(e *enc) {
	e.u16(m.Dim)
	e.u16(m.Beta)
	e.words(m.Plus)
	e.words(m.Minus)
	m.Digest.marshal(e)
	e.u32(m.BlockWords)
}
func (m *Query) unmarshal(d *dec) {
	m.Dim, m.Beta = d.u16(), d.u16()
	if d.err == nil && (m.Dim < 1 || int(m.Dim) > MaxDim || m.Beta < 1 || m.Beta > m.Dim) {
		d.fail("dimension %d, beta %d", m.Dim, m.Beta)
		return
	}
	w := template.Words(int(m.Dim))
	m.Plus, m.Minus = d.words(w), d.words(w)
	m.Digest.unmarshal(d)
	m.BlockWords = d.u32()
	if d.err == nil && (m.BlockWords == 0 || uint64(m.BlockWords)*2*uint64(m.Beta)*8 > MaxBlockData) {
		d.fail("block of %d words", m.BlockWords)
	}
}

// Ternary returns the query's T_beta(y), validated.
func (m *Query) Ternary() (template.Ternary, error) {
	t := template.Ternary{Dim: int(m.Dim), Plus: m.Plus, Minus: m.Minus}
	return t, t.Validate(int(m.Beta))
}

// Block announces NW words of segment Seg starting at row word W0, in the
// gather layout (2*beta words per row word); the raw little-endian words
// follow the frame.
type Block struct {
	Seg uint8
	W0  uint32
	NW  uint32
}

func (m *Block) Type() Type       { return TBlock }
func (m *Block) marshal(e *enc)   { e.u8(m.Seg); e.u32(m.W0); e.u32(m.NW) }
func (m *Block) unmarshal(d *dec) { m.Seg = d.u8(); m.W0 = d.u32(); m.NW = d.u32() }

// BlocksEnd closes a query's answer.
type BlocksEnd struct{}

func (m *BlocksEnd) Type() Type     { return TBlocksEnd }
func (m *BlocksEnd) marshal(*enc)   {}
func (m *BlocksEnd) unmarshal(*dec) {}
