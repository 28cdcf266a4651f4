// Package protocol defines idface's versioned binary messages and nothing
// else: no sockets, no storage. Every message is
//
//	version (1 byte) | type (1 byte) | fields
//
// with big-endian integers, u16-length strings and u32-counted lists, each
// bounded. Encodings are canonical: Decode followed by Marshal returns the
// input bytes. Bulk columns travel outside messages as raw little-endian
// words after a Block header (see README.md in this directory for the map
// from messages to the paper's steps).
package protocol

import (
	"fmt"

	"github.com/idface/idface/template"
)

// Version is the wire version; ALPN idface/1 carries the same number.
const Version = 1

// Limits on what a peer or a client may send.
const (
	MaxIDLen     = 256
	MaxBatch     = 65536           // templates per enrollment request (a whole HE group)
	MaxFrame     = 160 << 20       // bytes per framed message
	MaxMessage   = 1024            // bytes of error text
	MaxParties   = 64              // mu
	MaxTopK      = 1000            // candidates per identify
	MaxBlockData = 64 << 20        // raw bytes after one Block header
	MaxRows      = 1<<31 - 1       // rows per segment
	MaxDim       = template.MaxDim // template dimension
)

// Type identifies a message.
type Type uint8

const (
	TError Type = iota + 1
	TEnroll
	TEnrollOK
	TIdentify
	TIdentifyOK
	TDelete
	TDeleteOK
	TPrepare
	TVote
	TDecide
	TDecideOK
	TQuery
	TBlock
	TBlocksEnd
	THealth
	THealthOK
	TPublicKeyRequest
	TPublicKey
	THEQuery
	THEResult
	TReserve
	THEDecide
)

// Msg is any protocol message.
type Msg interface {
	Type() Type
	marshal(e *enc)
	unmarshal(d *dec)
}

// Marshal encodes m with its version and type.
func Marshal(m Msg) []byte {
	e := enc{b: make([]byte, 0, 64)}
	e.u8(Version)
	e.u8(uint8(m.Type()))
	m.marshal(&e)
	return e.b
}

// Decode parses one message.
func Decode(b []byte) (Msg, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if b[0] != Version {
		return nil, fmt.Errorf("%w: wire version %d, this build speaks %d", ErrMalformed, b[0], Version)
	}
	var m Msg
	switch Type(b[1]) {
	case TError:
		m = &Error{}
	case TEnroll:
		m = &Enroll{}
	case TEnrollOK:
		m = &EnrollOK{}
	case TIdentify:
		m = &Identify{}
	case TIdentifyOK:
		m = &IdentifyOK{}
	case TDelete:
		m = &Delete{}
	case TDeleteOK:
		m = &DeleteOK{}
	case TPrepare:
		m = &Prepare{}
	case TVote:
		m = &Vote{}
	case TDecide:
		m = &Decide{}
	case TDecideOK:
		m = &DecideOK{}
	case TQuery:
		m = &Query{}
	case TBlock:
		m = &Block{}
	case TBlocksEnd:
		m = &BlocksEnd{}
	case THealth:
		m = &Health{}
	case THealthOK:
		m = &HealthOK{}
	case TPublicKeyRequest:
		m = &PublicKeyRequest{}
	case TPublicKey:
		m = &PublicKey{}
	case THEQuery:
		m = &HEQuery{}
	case THEResult:
		m = &HEResult{}
	case TReserve:
		m = &Reserve{}
	case THEDecide:
		m = &HEDecide{}
	default:
		return nil, fmt.Errorf("%w: unknown message type %d", ErrMalformed, b[1])
	}
	d := dec{b: b[2:]}
	m.unmarshal(&d)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("%T: %w", m, err)
	}
	return m, nil
}

// Code classifies an Error; codes are stable and also used as QUIC
// application error codes.
type Code uint16

const (
	CodeBadRequest   Code = iota + 1 // malformed or invalid input
	CodeDuplicate                    // the id is already enrolled
	CodeUnknownID                    // no such id
	CodeUnavailable                  // a party is down or timed out
	CodeInconsistent                 // parties' row maps differ: refused, never answered
	CodeAborted                      // a transaction was rolled back
	CodeForbidden                    // the peer's role may not do this
	CodeInternal
)

func (c Code) String() string {
	switch c {
	case CodeBadRequest:
		return "bad request"
	case CodeDuplicate:
		return "duplicate id"
	case CodeUnknownID:
		return "unknown id"
	case CodeUnavailable:
		return "party unavailable"
	case CodeInconsistent:
		return "inconsistent parties"
	case CodeAborted:
		return "rolled back"
	case CodeForbidden:
		return "forbidden"
	case CodeInternal:
		return "internal error"
	}
	return fmt.Sprintf("code %d", uint16(c))
}

// Error is the reply to a request that failed.
type Error struct {
	Code Code
	Msg  string
}

func (m *Error) Type() Type       { return TError }
func (m *Error) Error() string    { return m.Msg }
func (m *Error) marshal(e *enc)   { e.u16(uint16(m.Code)); e.str(m.Msg) }
func (m *Error) unmarshal(d *dec) { m.Code = Code(d.u16()); m.Msg = d.str(MaxMessage) }

// Errorf builds an *Error.
func Errorf(c Code, format string, a ...any) *Error {
	msg := fmt.Sprintf(format, a...)
	if len(msg) > MaxMessage {
		msg = msg[:MaxMessage]
	}
	return &Error{Code: c, Msg: msg}
}

// Item is one template to enroll: the device sends the float template to
// its entry party over mutually authenticated TLS.
type Item struct {
	ID       string
	Template []float32
}

// Enroll asks the entry to enroll a batch atomically (all or none).
type Enroll struct{ Items []Item }

func (m *Enroll) Type() Type { return TEnroll }
func (m *Enroll) marshal(e *enc) {
	e.u32(uint32(len(m.Items)))
	for _, it := range m.Items {
		e.str(it.ID)
		e.f32s(it.Template)
	}
}
func (m *Enroll) unmarshal(d *dec) {
	n := d.count(MaxBatch, 6)
	for range n {
		id := d.str(MaxIDLen)
		m.Items = append(m.Items, Item{ID: id, Template: d.f32s(MaxDim)})
	}
}

// EnrollOK acknowledges a batch once every party has made it durable.
type EnrollOK struct{ Count uint32 }

func (m *EnrollOK) Type() Type       { return TEnrollOK }
func (m *EnrollOK) marshal(e *enc)   { e.u32(m.Count) }
func (m *EnrollOK) unmarshal(d *dec) { m.Count = d.u32() }

// Identify asks the entry for the TopK best enrolled ids for a template.
type Identify struct {
	TopK     uint16
	Template []float32
}

func (m *Identify) Type() Type     { return TIdentify }
func (m *Identify) marshal(e *enc) { e.u16(m.TopK); e.f32s(m.Template) }
func (m *Identify) unmarshal(d *dec) {
	m.TopK = d.u16()
	m.Template = d.f32s(MaxDim)
	if d.err == nil && (m.TopK < 1 || m.TopK > MaxTopK) {
		d.fail("top-k %d outside 1..%d", m.TopK, MaxTopK)
	}
}

// Candidate is one row of an identification result.
type Candidate struct {
	ID    string
	Score int32
}

// IdentifyOK is the entry's answer: candidates best first (empty when the
// database is empty), Accepted when the best score exceeds the threshold,
// and the entry's application bytes to and from the other parties.
type IdentifyOK struct {
	Candidates []Candidate
	Accepted   bool
	// ScoresHidden is set in HE mode: the key server reveals rows, never
	// scores, and Candidates[i].Score is 0.
	ScoresHidden bool
	Alpha        uint16
	Beta         uint16
	BytesSent    uint64
	BytesRecv    uint64
}

func (m *IdentifyOK) Type() Type { return TIdentifyOK }
func (m *IdentifyOK) marshal(e *enc) {
	e.u32(uint32(len(m.Candidates)))
	for _, c := range m.Candidates {
		e.str(c.ID)
		e.u32(uint32(c.Score))
	}
	e.bool(m.Accepted)
	e.bool(m.ScoresHidden)
	e.u16(m.Alpha)
	e.u16(m.Beta)
	e.u64(m.BytesSent)
	e.u64(m.BytesRecv)
}
func (m *IdentifyOK) unmarshal(d *dec) {
	n := d.count(MaxTopK, 6)
	for range n {
		id := d.str(MaxIDLen)
		m.Candidates = append(m.Candidates, Candidate{ID: id, Score: int32(d.u32())})
	}
	m.Accepted = d.bool()
	m.ScoresHidden = d.bool()
	m.Alpha, m.Beta = d.u16(), d.u16()
	m.BytesSent, m.BytesRecv = d.u64(), d.u64()
}

// Delete revokes an enrolled id at every party.
type Delete struct{ ID string }

func (m *Delete) Type() Type       { return TDelete }
func (m *Delete) marshal(e *enc)   { e.str(m.ID) }
func (m *Delete) unmarshal(d *dec) { m.ID = d.str(MaxIDLen) }

// DeleteOK acknowledges a deletion applied at every party.
type DeleteOK struct{}

func (m *DeleteOK) Type() Type     { return TDeleteOK }
func (m *DeleteOK) marshal(*enc)   {}
func (m *DeleteOK) unmarshal(*dec) {}

// Health asks a party for its state.
type Health struct{}

func (m *Health) Type() Type     { return THealth }
func (m *Health) marshal(*enc)   {}
func (m *Health) unmarshal(*dec) {}

// HealthOK reports a party's state: its row map digest and how many
// transactions are unsettled (undecided here, or decided but not yet
// acknowledged by every other server).
type HealthOK struct {
	Name    string
	Mode    string
	Digest  Digest
	InDoubt uint32
}

func (m *HealthOK) Type() Type { return THealthOK }
func (m *HealthOK) marshal(e *enc) {
	e.str(m.Name)
	e.str(m.Mode)
	m.Digest.marshal(e)
	e.u32(m.InDoubt)
}
func (m *HealthOK) unmarshal(d *dec) {
	m.Name, m.Mode = d.str(MaxIDLen), d.str(16)
	m.Digest.unmarshal(d)
	m.InDoubt = d.u32()
}
