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
	"strings"

	"github.com/idface/idface/internal/codec/wire"
	"github.com/idface/idface/protocol/frame"
	"github.com/idface/idface/template"
)

// ErrMalformed wraps every decoding failure.
var ErrMalformed = wire.ErrMalformed

// Version is the wire version; the ALPN (idface/<Version>) carries the same
// number, so peers of different versions refuse each other at the
// handshake. Version 2: HEQuery carries the public key's fingerprint, HE
// changes are numbered (HEDecide.Seq, HEDelete, HESync). Version 3:
// enrollments, deletions and prepares carry the operator's Auth;
// row-map digests between servers are sealed with the key the two share
// (no client gets one), Health asks a server to compare its row map with
// its peers' and HealthOK reports each peer's agreement. Version 4:
// degraded queries of replicated mode (BlindQuery.Down, ReplShare.Down
// and Next, IdentifyOK.Degraded). Version 5: hidden probes
// (HiddenIdentify; BlindQuery.Nonce and Sealed; ReplShare.Hidden and
// QueryDigests; ReplResult's second values and tags). Version 6: hidden
// probes are signed by the device (HiddenIdentify.Auth), and an entry
// asks a helper for a batch of them (HiddenQuery, HiddenQueryOK; the
// hidden-probe fields of BlindQuery went there). Version 7: a 2PC/MPC
// entry asks a helper for a batch of queries (QueryBatch): an older helper
// would refuse every batch. Version 8: sharded members (ShardIdentify,
// ShardAnswer, DecideMerge, DecideMergeOK; DecideResult.Ranks). Version
// 9: sharded replicated holders (ShardAnswer.Degraded; error codes
// ShardDown and CountedDown). Version 10: sharded HE local servers and
// key server (HEQuery.Query, HEResult.Ranks), hidden probes in shards
// (ShardHidden). Version 11: a server still working on a change says so
// (Working) while its requester waits, so that a slow peer is not taken
// for a dead one; an older requester would read it as a wrong answer.
// Version 12: the products of hidden probes are checked (HiddenVector,
// HiddenVectorOK; a hidden ReplShare carries the holder's check parts
// after its vector and tags), and the permutation of blind and replicated
// queries is a keyed Feistel network: for one sigma an older build
// permutes otherwise. Version 13: the decider fetches the tags of the
// positions it answers from the two helpers (TagAsk, TagAnswers) instead
// of every tag coming with a helper's vector (ReplShare.TagDigest gone,
// ReplShare.Tags only in a degraded research query); a hidden probe's
// entry checks one helper's vector by tag, the other by its own copy
// (ReplResult's second values and tags gone, HiddenResult.TagKey).
// Version 14: the weights of the checks of hidden probes' products at
// k = 8 are 7-bit (two verifiers of an older build compute other sums
// and every check fails), nothing else on the wire.
// Version 15: a replicated holder's row carries a trailer (the salts of its
// two shares and its record of the third: sealed parts, prepares, the
// log), and ReplFetch/ReplRows carry the salts and records a rebuild or
// catch-up checks what it takes by.
// Version 16: a party left out of a change catches up from either other
// holder: a SealedPrepare carries the third party's part (Held), a party
// tells the third that it prepared (Prepared), and the third relays the
// prepare and decision to a party that missed them.
// Version 17: HealthOK carries the degraded limit an operator is shown
// (DegradedLimit).
// Version 18: a hidden probe's verdict is sealed to the device (its part
// carries two components of the verdict key, ReplShare.VerdictKeys and
// SigmaDigest,
// ReplResult.Verdict, ShardAnswer.Verdict, IdentifyOK.Verdicts), and a
// probe whose check failed is answered to the entry as if it had passed
// (no candidate where the entry's own product failed its check); a commit
// carries its origin's proof for the third party (Decide.Proof), without
// which the third takes no relayed commit, and a prepare likewise
// (Prepare.Relay, which ends a Prepare and a SealedPrepare).
const Version = 18

// Limits on what a peer or a client may send.
const (
	MaxIDLen     = 256
	MaxBatch     = 65536           // templates per enrollment request (a whole HE group)
	MaxMessage   = 1024            // bytes of error text
	MaxParties   = 64              // mu
	MaxTopK      = 1000            // candidates per identify
	MaxBlockData = 64 << 20        // raw bytes after one Block header
	MaxRows      = 1<<31 - 1       // rows per segment
	MaxDim       = template.MaxDim // template dimension
)

// Type identifies a message. The numbers are part of the wire format and
// never reused: a retired type keeps its number (see README.md).
type Type uint8

const (
	TError            Type = 1
	TEnroll           Type = 2
	TEnrollOK         Type = 3
	TIdentify         Type = 4
	TIdentifyOK       Type = 5
	TDelete           Type = 6
	TDeleteOK         Type = 7
	TPrepare          Type = 8
	TVote             Type = 9
	TDecide           Type = 10
	TDecideOK         Type = 11
	TQuery            Type = 12
	TBlock            Type = 13
	TBlocksEnd        Type = 14
	THealth           Type = 15
	THealthOK         Type = 16
	TPublicKeyRequest Type = 17
	TPublicKey        Type = 18
	THEQuery          Type = 19
	THEResult         Type = 20
	// 21 was Reserve, a log record of the HE local server before log
	// records got their own format (internal/codec/store); never sent on the wire.
	THEDecide Type = 22
	THEDelete Type = 23
	THESync   Type = 24
	THESyncOK Type = 25
	// Blind mode.
	TBlindQuery    Type = 26
	TBlindQueryOK  Type = 27
	TDecideShare   Type = 28
	TDecideShareOK Type = 29
	TDecideResult  Type = 30
	// Sealed enrollment (blind mode).
	TSealedEnroll  Type = 31
	TSealedPrepare Type = 32
	// Replicated blind mode (protocol/repl.go); numbered apart from the
	// types being added beside it.
	TReplQueryOK Type = 48
	TReplShare   Type = 49
	TReplResult  Type = 50
	TReplFetch   Type = 51
	TReplRows    Type = 52
	// Reshare (replicated mode).
	TReshareRequest Type = 53
	TReshareOK      Type = 54
	// Hidden probes (replicated mode, protocol/hidden.go).
	THiddenIdentify Type = 55
	THiddenQuery    Type = 56
	THiddenQueryOK  Type = 57
	// Batched 2PC/MPC queries (protocol/party.go).
	TQueryBatch Type = 58
	// Sharded members (protocol/shard.go).
	TShardIdentify Type = 59
	TShardAnswer   Type = 60
	TDecideMerge   Type = 61
	TDecideMergeOK Type = 62
	TShardHidden   Type = 63
	// Progress of a change (protocol/party.go).
	TWorking Type = 64
	// A hidden probe's product-share vector to the holder that checks it
	// (protocol/hidden.go).
	THiddenVector   Type = 65
	THiddenVectorOK Type = 66
	// The decider's fetch of the tags of its answer (protocol/repl.go).
	TTagAsk     Type = 67
	TTagAnswers Type = 68
	// A reshare's origin asks each holder to attest its records of the
	// reshared rows (protocol/repl_rebuild.go).
	TReplAttest Type = 69
	// An operator's list of the enrolled ids and check of one
	// (protocol/ids_list.go): added within version 15, so a server of an
	// earlier build answers them with an Error (unknown message type).
	TListIDs Type = 70
	TIDList  Type = 71
	THasID   Type = 72
	THasIDOK Type = 73
	// A party's note that it prepared a transaction, to the third party
	// (protocol/sealed.go).
	TPrepared Type = 74
)

// registry makes an empty message of each type.
var registry = map[Type]func() Msg{
	TError:            func() Msg { return &Error{} },
	TEnroll:           func() Msg { return &Enroll{} },
	TEnrollOK:         func() Msg { return &EnrollOK{} },
	TIdentify:         func() Msg { return &Identify{} },
	TIdentifyOK:       func() Msg { return &IdentifyOK{} },
	TDelete:           func() Msg { return &Delete{} },
	TDeleteOK:         func() Msg { return &DeleteOK{} },
	TPrepare:          func() Msg { return &Prepare{} },
	TVote:             func() Msg { return &Vote{} },
	TDecide:           func() Msg { return &Decide{} },
	TDecideOK:         func() Msg { return &DecideOK{} },
	TQuery:            func() Msg { return &Query{} },
	TBlock:            func() Msg { return &Block{} },
	TBlocksEnd:        func() Msg { return &BlocksEnd{} },
	THealth:           func() Msg { return &Health{} },
	THealthOK:         func() Msg { return &HealthOK{} },
	TPublicKeyRequest: func() Msg { return &PublicKeyRequest{} },
	TPublicKey:        func() Msg { return &PublicKey{} },
	THEQuery:          func() Msg { return &HEQuery{} },
	THEResult:         func() Msg { return &HEResult{} },
	THEDecide:         func() Msg { return &HEDecide{} },
	THEDelete:         func() Msg { return &HEDelete{} },
	THESync:           func() Msg { return &HESync{} },
	THESyncOK:         func() Msg { return &HESyncOK{} },
	TBlindQuery:       func() Msg { return &BlindQuery{} },
	TBlindQueryOK:     func() Msg { return &BlindQueryOK{} },
	TDecideShare:      func() Msg { return &DecideShare{} },
	TDecideShareOK:    func() Msg { return &DecideShareOK{} },
	TDecideResult:     func() Msg { return &DecideResult{} },
	TSealedEnroll:     func() Msg { return &SealedEnroll{} },
	TSealedPrepare:    func() Msg { return &SealedPrepare{} },
	TReplQueryOK:      func() Msg { return &ReplQueryOK{} },
	TReplShare:        func() Msg { return &ReplShare{} },
	TReplResult:       func() Msg { return &ReplResult{} },
	TReplFetch:        func() Msg { return &ReplFetch{} },
	TReplRows:         func() Msg { return &ReplRows{} },
	TReshareRequest:   func() Msg { return &ReshareRequest{} },
	TReshareOK:        func() Msg { return &ReshareOK{} },
	THiddenIdentify:   func() Msg { return &HiddenIdentify{} },
	THiddenQuery:      func() Msg { return &HiddenQuery{} },
	THiddenQueryOK:    func() Msg { return &HiddenQueryOK{} },
	TQueryBatch:       func() Msg { return &QueryBatch{} },
	TShardIdentify:    func() Msg { return &ShardIdentify{} },
	TShardAnswer:      func() Msg { return &ShardAnswer{} },
	TDecideMerge:      func() Msg { return &DecideMerge{} },
	TDecideMergeOK:    func() Msg { return &DecideMergeOK{} },
	TShardHidden:      func() Msg { return &ShardHidden{} },
	TWorking:          func() Msg { return &Working{} },
	THiddenVector:     func() Msg { return &HiddenVector{} },
	THiddenVectorOK:   func() Msg { return &HiddenVectorOK{} },
	TTagAsk:           func() Msg { return &TagAsk{} },
	TTagAnswers:       func() Msg { return &TagAnswers{} },
	TReplAttest:       func() Msg { return &ReplAttest{} },
	TListIDs:          func() Msg { return &ListIDs{} },
	TIDList:           func() Msg { return &IDList{} },
	THasID:            func() Msg { return &HasID{} },
	THasIDOK:          func() Msg { return &HasIDOK{} },
	TPrepared:         func() Msg { return &Prepared{} },
}

// Types lists every message type in number order (tests, golden files).
func Types() []Type {
	var ts []Type
	for t := range Type(255) {
		if registry[t] != nil {
			ts = append(ts, t)
		}
	}
	return ts
}

// String names a message type ("Enroll"), for logs and metrics.
func (t Type) String() string {
	if f := registry[t]; f != nil {
		return strings.TrimPrefix(fmt.Sprintf("%T", f()), "*protocol.")
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// Msg is any protocol message.
type Msg interface {
	Type() Type
	marshal(e *wire.Enc)
	unmarshal(d *wire.Dec)
}

// Marshal encodes m with its version and type.
func Marshal(m Msg) []byte {
	e := wire.Enc{B: make([]byte, 0, 64)}
	e.U8(Version)
	e.U8(uint8(m.Type()))
	m.marshal(&e)
	return e.B
}

// FramedSize is m's bytes on the wire: its encoding and the frame's header
// (protocol/frame).
func FramedSize(m Msg) int { return frame.Size(len(Marshal(m))) }

// Decode parses one message.
func Decode(b []byte) (Msg, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if b[0] != Version {
		return nil, fmt.Errorf("%w: wire version %d, this build speaks %d", ErrMalformed, b[0], Version)
	}
	f := registry[Type(b[1])]
	if f == nil {
		return nil, fmt.Errorf("%w: unknown message type %d", ErrMalformed, b[1])
	}
	m := f()
	d := wire.Dec{B: b[2:]}
	m.unmarshal(&d)
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("protocol: %T: %w", m, err)
	}
	return m, nil
}

// storedSince is, for the message types servers keep in their own logs
// (rowtxn's held records), the oldest wire version whose encoding of the
// type is the current one: a log written by an earlier build is read
// after an upgrade. Raise an entry when the type's encoding changes (and
// give the old encoding a reader).
var storedSince = map[Type]uint8{TPrepare: 4, TSealedPrepare: 4}

// DecodeStored parses a message a server wrote to its own log, by this
// build or an earlier one whose encoding of the type is the same.
func DecodeStored(b []byte) (Msg, error) {
	if len(b) >= 2 && b[0] != Version {
		if since, ok := storedSince[Type(b[1])]; ok && b[0] >= since && b[0] < Version {
			cur := append([]byte{Version}, b[1:]...)
			if Type(b[1]) == TSealedPrepare && b[0] < 16 {
				cur = append(cur, 0, 0, 0, 0) // no Held part before version 16
			}
			if b[0] < 18 {
				cur = append(cur, make([]byte, 32)...) // no Relay proof before version 18
			}
			return Decode(cur)
		}
	}
	return Decode(b)
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
	CodeShardDown   // a sharded member cannot reach one of its own shards: another member's entry may answer
	CodeCountedDown // ask again under a fresh query id: a shard counted a holder down (replicated: the run is degraded), or its decider restarted during the query
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
	case CodeShardDown:
		return "shard unavailable"
	case CodeCountedDown:
		return "run again"
	}
	return fmt.Sprintf("code %d", uint16(c))
}

// Error is the reply to a request that failed.
type Error struct {
	Code Code
	Msg  string
}

func (m *Error) Type() Type            { return TError }
func (m *Error) Error() string         { return m.Msg }
func (m *Error) marshal(e *wire.Enc)   { e.U16(uint16(m.Code)); e.Str(m.Msg) }
func (m *Error) unmarshal(d *wire.Dec) { m.Code = Code(d.U16()); m.Msg = d.Str(MaxMessage) }

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

// Enroll asks the entry to enroll a batch atomically (all or none). Auth
// is an operator's signature over the batch's ids.
type Enroll struct {
	Auth  Auth
	Items []Item
}

// IDs lists the batch's ids in order (what Auth signs).
func (m *Enroll) IDs() []string {
	ids := make([]string, len(m.Items))
	for i, it := range m.Items {
		ids[i] = it.ID
	}
	return ids
}

func (m *Enroll) Type() Type { return TEnroll }
func (m *Enroll) marshal(e *wire.Enc) {
	MarshalAuth(e, m.Auth)
	e.U32(uint32(len(m.Items)))
	for _, it := range m.Items {
		e.Str(it.ID)
		e.F32s(it.Template)
	}
}
func (m *Enroll) unmarshal(d *wire.Dec) {
	m.Auth = UnmarshalAuth(d)
	n := d.Count(MaxBatch, 6)
	for range n {
		id := d.Str(MaxIDLen)
		m.Items = append(m.Items, Item{ID: id, Template: d.F32s(MaxDim)})
	}
}

// EnrollOK acknowledges a batch once every party has made it durable.
type EnrollOK struct{ Count uint32 }

func (m *EnrollOK) Type() Type            { return TEnrollOK }
func (m *EnrollOK) marshal(e *wire.Enc)   { e.U32(m.Count) }
func (m *EnrollOK) unmarshal(d *wire.Dec) { m.Count = d.U32() }

// Identify asks the entry for the TopK best enrolled ids for a template.
type Identify struct {
	TopK     uint16
	Template []float32
}

func (m *Identify) Type() Type          { return TIdentify }
func (m *Identify) marshal(e *wire.Enc) { e.U16(m.TopK); e.F32s(m.Template) }
func (m *Identify) unmarshal(d *wire.Dec) {
	m.TopK = d.U16()
	m.Template = d.F32s(MaxDim)
	if d.Err == nil && (m.TopK < 1 || m.TopK > MaxTopK) {
		d.Fail("top-k %d outside 1..%d", m.TopK, MaxTopK)
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
	// ScoresHidden is set unless the cluster was made to reveal scores
	// (research clusters); Candidates then holds only accepted rows and
	// every Score is 0.
	ScoresHidden bool
	Alpha        uint16
	Beta         uint16
	BytesSent    uint64
	BytesRecv    uint64
	// BytesTotal is the application bytes moved between all servers for
	// this query (blind mode: every server reports its part to the entry).
	BytesTotal uint64
	// Degraded: a server was down and the answer was computed without the
	// checks it takes part in (replicated mode, docs/REPLICATED-NOTES.md).
	Degraded bool
	// Verdicts: of a hidden probe, the deciders' verdicts sealed to the
	// device (verdict.go), one per shard in shard order; the device
	// refuses an answer whose verdicts do not open or say refused.
	Verdicts [][]byte
}

func (m *IdentifyOK) Type() Type { return TIdentifyOK }
func (m *IdentifyOK) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.Candidates)))
	for _, c := range m.Candidates {
		e.Str(c.ID)
		e.U32(uint32(c.Score))
	}
	e.Bool(m.Accepted)
	e.Bool(m.ScoresHidden)
	e.U16(m.Alpha)
	e.U16(m.Beta)
	e.U64(m.BytesSent)
	e.U64(m.BytesRecv)
	e.U64(m.BytesTotal)
	e.Bool(m.Degraded)
	e.U32(uint32(len(m.Verdicts)))
	for _, v := range m.Verdicts {
		e.Bytes32(v)
	}
}
func (m *IdentifyOK) unmarshal(d *wire.Dec) {
	n := d.Count(MaxTopK, 6)
	for range n {
		id := d.Str(MaxIDLen)
		m.Candidates = append(m.Candidates, Candidate{ID: id, Score: int32(d.U32())})
	}
	m.Accepted = d.Bool()
	m.ScoresHidden = d.Bool()
	m.Alpha, m.Beta = d.U16(), d.U16()
	m.BytesSent, m.BytesRecv, m.BytesTotal = d.U64(), d.U64(), d.U64()
	m.Degraded = d.Bool()
	v := d.Count(MaxVerdicts, 4+VerdictSize)
	for range v {
		b := d.Bytes32(VerdictSize)
		if d.Err == nil && len(b) != VerdictSize {
			d.Fail("a verdict of %d bytes", len(b))
		}
		m.Verdicts = append(m.Verdicts, b)
	}
}

// Delete revokes an enrolled id at every party.
type Delete struct {
	Auth Auth // an operator's signature over the id
	ID   string
}

func (m *Delete) Type() Type            { return TDelete }
func (m *Delete) marshal(e *wire.Enc)   { MarshalAuth(e, m.Auth); e.Str(m.ID) }
func (m *Delete) unmarshal(d *wire.Dec) { m.Auth = UnmarshalAuth(d); m.ID = d.Str(MaxIDLen) }

// DeleteOK acknowledges a deletion applied at every party.
type DeleteOK struct{}

func (m *DeleteOK) Type() Type          { return TDeleteOK }
func (m *DeleteOK) marshal(*wire.Enc)   {}
func (m *DeleteOK) unmarshal(*wire.Dec) {}

// Health asks a server for its state. With Peers an operator also asks
// it to compare its row map with every other server that holds one (it
// may take up to the digest wait); servers ignore Peers from anyone else.
type Health struct{ Peers bool }

func (m *Health) Type() Type            { return THealth }
func (m *Health) marshal(e *wire.Enc)   { e.Bool(m.Peers) }
func (m *Health) unmarshal(d *wire.Dec) { m.Peers = d.Bool() }

// HealthOK reports a server's state. Every asker gets the name, the mode
// and the serial and hash of the cluster configuration the server runs;
// the rest depends on the asker (engine.Env.Health, and the runtime strips
// what a role may not see):
//   - another server: the row-map Digest, each segment's set hash sealed
//     with the key the two servers share, and InDoubt, how many
//     transactions are unsettled (undecided here, or decided but not yet
//     acknowledged by every other server);
//   - an operator: InDoubt, Empty, Live (how many rows it holds: the
//     operators enrolled them) and, when it asked (Health.Peers), Peers:
//     each other row-holding server's agreement with this one's row map;
//   - a device: nothing more.
//
// Per-segment row counts and set hashes never go to clients: the set hash is keyed
// with the cluster id, which every client holds, and would confirm a
// guessed id at a guessed row.
type HealthOK struct {
	Name         string
	Mode         string
	Digest       Digest
	InDoubt      uint32
	ConfigSerial uint32
	ConfigHash   [8]byte
	Peers        []PeerState
	// Empty is set, for servers and operators, when the server holds no
	// live row (an operator's identify warns that every query will be
	// rejected); never for devices.
	Empty bool
	// Live, for servers and operators, is the number of enrolled rows
	// this server holds (the gateway's count); never for devices.
	Live uint32
	// DegradedLimit, for operators, is the degraded queries a second this
	// server serves each entry while a holder is down (replicated mode:
	// configured, or derived from the rate before the outage); 0 where
	// the mode has no degraded path.
	DegradedLimit uint32
}

// Agreement is how a peer's row map compares with a server's own.
type Agreement uint8

const (
	PeerAgrees      Agreement = 1 // the same rows and ids
	PeerDiffers     Agreement = 2 // still different after the digest wait
	PeerUnreachable Agreement = 3 // no answer (Note says why)
)

func (a Agreement) String() string {
	switch a {
	case PeerAgrees:
		return "agrees"
	case PeerDiffers:
		return "DIFFERS"
	case PeerUnreachable:
		return "unreachable"
	}
	return fmt.Sprintf("agreement(%d)", uint8(a))
}

// PeerState is one peer in a HealthOK: its name, its agreement and, for a
// difference or an unreachable peer, a short note (which origins' rows
// differ; the error).
type PeerState struct {
	Name  string
	State Agreement
	Note  string
}

func (m *HealthOK) Type() Type { return THealthOK }
func (m *HealthOK) marshal(e *wire.Enc) {
	e.Str(m.Name)
	e.Str(m.Mode)
	m.Digest.marshal(e)
	e.U32(m.InDoubt)
	e.U32(m.ConfigSerial)
	e.Raw(m.ConfigHash[:])
	e.U32(uint32(len(m.Peers)))
	for _, p := range m.Peers {
		e.Str(p.Name)
		e.U8(uint8(p.State))
		e.Str(p.Note)
	}
	e.Bool(m.Empty)
	e.U32(m.Live)
	e.U32(m.DegradedLimit)
}
func (m *HealthOK) unmarshal(d *wire.Dec) {
	m.Name, m.Mode = d.Str(MaxIDLen), d.Str(16)
	m.Digest.unmarshal(d)
	m.InDoubt = d.U32()
	m.ConfigSerial = d.U32()
	d.Fixed(m.ConfigHash[:])
	if n := d.Count(MaxParties, 5); n > 0 {
		m.Peers = make([]PeerState, n)
		for i := range m.Peers {
			p := &m.Peers[i]
			p.Name = d.Str(MaxIDLen)
			p.State = Agreement(d.U8())
			p.Note = d.Str(MaxMessage)
			if d.Err == nil && (p.State < PeerAgrees || p.State > PeerUnreachable) {
				d.Fail("peer %d: agreement %d", i, p.State)
			}
		}
	}
	m.Empty = d.Bool()
	m.Live = d.U32()
	m.DegradedLimit = d.U32()
}
