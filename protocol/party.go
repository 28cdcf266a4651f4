package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/idface/idface/internal/codec/wire"

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

// DeletedSince reports whether a row of g's segments was deleted (or
// lost) after the row map old: a query that scored rows of old cannot
// trust a row whose shares were erased while it ran. Appended rows do not
// count; they lie beyond every query's snapshot.
func (g Digest) DeletedSince(old Digest) bool {
	if len(g) != len(old) {
		return true
	}
	for i := range g {
		if g[i].Rows-g[i].Live != old[i].Rows-old[i].Live {
			return true
		}
	}
	return false
}

// Diff names the first difference with its row counts, for a server's
// log and for tests (not for clients: row counts stay with the servers).
func (g Digest) Diff(h Digest) string {
	if len(g) != len(h) {
		return fmt.Sprintf("%d segments vs %d", len(g), len(h))
	}
	for i := range g {
		if g[i] != h[i] {
			if g[i].Rows == h[i].Rows && g[i].Live == h[i].Live {
				return fmt.Sprintf("segment %d: %d rows/%d live on both, other ids", i, g[i].Rows, g[i].Live)
			}
			return fmt.Sprintf("segment %d: %d rows/%d live vs %d rows/%d live", i, g[i].Rows, g[i].Live, h[i].Rows, h[i].Live)
		}
	}
	return "equal"
}

// Differing lists the segments in which g and h differ (every segment of
// the longer when their lengths differ).
func (g Digest) Differing(h Digest) []int {
	var out []int
	for i := range max(len(g), len(h)) {
		if i >= len(g) || i >= len(h) || g[i] != h[i] {
			out = append(out, i)
		}
	}
	return out
}

func (g Digest) marshal(e *wire.Enc) {
	e.U32(uint32(len(g)))
	for _, s := range g {
		e.U32(s.Rows)
		e.U32(s.Live)
		e.Raw(s.Hash[:])
	}
}

func (g *Digest) unmarshal(d *wire.Dec) {
	n := d.Count(MaxParties, 24)
	*g = make(Digest, n)
	for i := range *g {
		s := &(*g)[i]
		s.Rows, s.Live = d.U32(), d.U32()
		copy(s.Hash[:], d.Take(16))
		if d.Err == nil && (s.Live > s.Rows || s.Rows > MaxRows) {
			d.Fail("segment %d: %d live of %d rows", i, s.Live, s.Rows)
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
	// OpReplace replaces the share at (origin, seq), which holds id, by a
	// new sharing of the same row (a reshare: Prepare.Reshare); each
	// party computes its own new share, so the message carries none.
	OpReplace OpKind = 3
)

// Op is one row operation. For OpPut, Share is the receiving party's own
// share in the mode's encoding (2PC/MPC: z+ and z- as little-endian words;
// blind: d elements of k bits), or, when Seeded, the 32-byte seed it
// expands from (blind); for OpDelete it is empty.
type Op struct {
	Kind   OpKind
	Seq    uint32
	ID     string
	Seeded bool
	Share  []byte
}

// MaxShare bounds one row's share on the wire: a replicated holder's pair
// at k = 16 (2 bytes per coordinate, twice) at the largest dimension, and
// its trailer (two salts and a record).
const MaxShare = 4*MaxDim + 2*SaltSize + RecordSize

// Prepare is phase one: the origin asks a party to make ops durable
// (fsync) and vote. Base is the origin segment's committed row count the
// ops build on; a party whose count differs refuses.
type Prepare struct {
	Txn    TxnID
	Origin uint8
	Dim    uint16
	Base   uint32
	// Auth is the operator's signature over the ops' ids (every op of a
	// transaction is of one kind).
	Auth Auth
	Ops  []Op
	// Prior is the origin's decision on its previous transaction (zero
	// Txn: none): a party still holding that one undecided (it missed the
	// decision, which the origin's outbox lost at a restart while the
	// party was down) settles it so before this one, instead of presuming
	// an abort.
	Prior Decide
	// Reshare, when set, makes the transaction a reshare of the rows its
	// OpReplace ops name: every party adds its parts of a zero-sharing
	// under Key to its shares, and the origin's segment reaches Epoch.
	Reshare *Reshare
	// Relay: in a cluster whose parties relay each other's changes, the
	// origin's proof of this prepare for the third party, to whom this
	// party may relay it (PrepareProof). The third takes a relayed prepare
	// only with it, so a relayer cannot relabel a change with another
	// transaction's id. It ends the message (and a SealedPrepare's).
	Relay [32]byte
}

// Reshare is a reshare transaction's epoch and zero-sharing key (known to
// the share holders only: it travels between them, never to a client or
// the decider, and is never logged).
type Reshare struct {
	Epoch uint32
	Key   [32]byte
}

func (m *Prepare) Type() Type { return TPrepare }
func (m *Prepare) marshal(e *wire.Enc) {
	m.marshalBody(e)
	e.Raw(m.Relay[:])
}
func (m *Prepare) unmarshal(d *wire.Dec) {
	m.unmarshalBody(d)
	d.Fixed(m.Relay[:])
}

// marshalBody is a prepare but its Relay, which ends the message.
func (m *Prepare) marshalBody(e *wire.Enc) {
	e.Raw(m.Txn[:])
	e.U8(m.Origin)
	e.U16(m.Dim)
	e.U32(m.Base)
	MarshalAuth(e, m.Auth)
	e.U32(uint32(len(m.Ops)))
	for _, op := range m.Ops {
		e.U8(uint8(op.Kind))
		e.U32(op.Seq)
		e.Str(op.ID)
		switch op.Kind {
		case OpPut:
			e.Bool(op.Seeded)
			e.Bytes32(op.Share)
		case OpReplace:
			e.Bytes32(op.Share)
		}
	}
	e.Raw(m.Prior.Txn[:])
	e.Bool(m.Prior.Commit)
	e.Bool(m.Reshare != nil)
	if m.Reshare != nil {
		e.U32(m.Reshare.Epoch)
		e.Raw(m.Reshare.Key[:])
	}
}
func (m *Prepare) unmarshalBody(d *wire.Dec) {
	copy(m.Txn[:], d.Take(16))
	m.Origin = d.U8()
	m.Dim = d.U16()
	m.Base = d.U32()
	m.Auth = UnmarshalAuth(d)
	if d.Err == nil && (m.Dim < 1 || int(m.Dim) > MaxDim) {
		d.Fail("dimension %d", m.Dim)
		return
	}
	n := d.Count(MaxBatch, 7)
	for range n {
		op := Op{Kind: OpKind(d.U8()), Seq: d.U32(), ID: d.Str(MaxIDLen)}
		switch op.Kind {
		case OpPut:
			op.Seeded = d.Bool()
			op.Share = d.Bytes32(MaxShare)
		case OpReplace:
			op.Share = d.Bytes32(MaxShare)
		case OpDelete:
		default:
			d.Fail("op kind %d", op.Kind)
		}
		if d.Err != nil {
			return
		}
		m.Ops = append(m.Ops, op)
	}
	d.Fixed(m.Prior.Txn[:])
	m.Prior.Commit = d.Bool()
	if m.Prior.Txn != (TxnID{}) {
		m.Prior.Origin = m.Origin // the origin's own previous transaction
	}
	if d.Bool() {
		m.Reshare = &Reshare{Epoch: d.U32()}
		d.Fixed(m.Reshare.Key[:])
	}
}

// Vote is a party's yes to a Prepare (a refusal is an Error).
type Vote struct {
	Txn TxnID
	// Check, in a mode that compares the parties' shares before it
	// commits (replicated mode: a digest of each of the voter's two shares
	// of the batch, bound to the row addresses), is what the origin
	// compares across the votes; empty otherwise.
	Check []byte
}

// MaxVoteCheck bounds a vote's check.
const MaxVoteCheck = 256

func (m *Vote) Type() Type { return TVote }
func (m *Vote) marshal(e *wire.Enc) {
	e.Raw(m.Txn[:])
	e.Bytes32(m.Check)
}
func (m *Vote) unmarshal(d *wire.Dec) {
	copy(m.Txn[:], d.Take(16))
	m.Check = d.Bytes32(MaxVoteCheck)
}

// Decide is phase two: commit or abort a prepared transaction. Parties
// answer DecideOK whether or not they still hold it (idempotent).
//
// Proof: in a cluster whose parties relay each other's changes (three
// holders, engine/rowtxn/relay.go), a commit the origin sends to one
// party carries the origin's proof of it for the third party, to whom
// that party may relay it (CommitProof); the third takes a relayed commit
// only with it, so a relayer cannot commit a change its origin aborted.
type Decide struct {
	Txn    TxnID
	Origin uint8
	Commit bool
	Proof  [32]byte
}

func (m *Decide) Type() Type { return TDecide }
func (m *Decide) marshal(e *wire.Enc) {
	e.Raw(m.Txn[:])
	e.U8(m.Origin)
	e.Bool(m.Commit)
	e.Raw(m.Proof[:])
}
func (m *Decide) unmarshal(d *wire.Dec) {
	copy(m.Txn[:], d.Take(16))
	m.Origin = d.U8()
	m.Commit = d.Bool()
	d.Fixed(m.Proof[:])
}

// PrepareProof is origin's proof that it prepared the transaction whose
// prepare has digest prep (PrepareDigest), for party to: as CommitProof,
// under its own label.
func PrepareProof(pairKey [32]byte, cluster [16]byte, prep [32]byte, origin, to uint8) [32]byte {
	return relayMAC("idface relayed prepare v1\x00", pairKey, cluster, prep, origin, to)
}

// CommitProof is origin's proof that it committed the transaction whose
// prepare has digest prep (PrepareDigest), for party to: an HMAC-SHA256,
// under the key the origin and that party share, of the cluster, the
// digest, the origin and the party. Only the origin (and the party
// itself) can make it, so a party that relays a commit to it can neither
// make one up nor use one for another change (a prepare it relabelled
// with a committed transaction's id).
func CommitProof(pairKey [32]byte, cluster [16]byte, prep [32]byte, origin, to uint8) [32]byte {
	return relayMAC("idface relayed commit v2\x00", pairKey, cluster, prep, origin, to)
}

func relayMAC(label string, pairKey [32]byte, cluster [16]byte, prep [32]byte, origin, to uint8) [32]byte {
	m := hmac.New(sha256.New, pairKey[:])
	m.Write([]byte(label))
	m.Write(cluster[:])
	m.Write(prep[:])
	m.Write([]byte{origin, to})
	var p [32]byte
	m.Sum(p[:0])
	return p
}

// PrepareDigest is what a commit's proof binds: the transaction as every
// party holds it, in shard shard (0 outside shards): its id, origin,
// dimension and rows' base, the operator's signer and nonce (spent once
// at each party), each op's kind, row and id, and a reshare's epoch;
// never a party's own share or a reshare's key.
func PrepareDigest(p *Prepare, shard int) [32]byte {
	e := wire.Enc{}
	e.Raw([]byte("idface prepare digest v1\x00"))
	e.U32(uint32(shard))
	e.Raw(p.Txn[:])
	e.U8(p.Origin)
	e.U16(p.Dim)
	e.U32(p.Base)
	e.Str(p.Auth.Signer)
	e.Raw(p.Auth.Nonce[:])
	e.U32(uint32(len(p.Ops)))
	for _, op := range p.Ops {
		e.U8(uint8(op.Kind))
		e.U32(op.Seq)
		e.Str(op.ID)
	}
	e.Bool(p.Reshare != nil)
	if p.Reshare != nil {
		e.U32(p.Reshare.Epoch)
	}
	return sha256.Sum256(e.B)
}

// DecideOK acknowledges a Decide.
type DecideOK struct{}

func (m *DecideOK) Type() Type          { return TDecideOK }
func (m *DecideOK) marshal(*wire.Enc)   {}
func (m *DecideOK) unmarshal(*wire.Dec) {}

// Working is sent by a server, on the stream of a change it is still
// running (enroll, prepare, delete, decide, reshare), every
// config.Timeouts.Progress until its reply: the requester keeps waiting
// while its peer works, however long the change takes (up to the
// change's own bound), and gives up only on a peer silent for a whole
// request timeout. Queries never send it: they have deadlines of their
// own.
type Working struct{}

func (m *Working) Type() Type          { return TWorking }
func (m *Working) marshal(*wire.Enc)   {}
func (m *Working) unmarshal(*wire.Dec) {}

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
func (m *Query) marshal(e *wire.Enc) {
	e.U16(m.Dim)
	e.U16(m.Beta)
	e.Words(m.Plus)
	e.Words(m.Minus)
	m.Digest.marshal(e)
	e.U32(m.BlockWords)
}
func (m *Query) unmarshal(d *wire.Dec) {
	if m.Dim, m.Beta = dimBeta(d); d.Err != nil {
		return
	}
	w := template.Words(int(m.Dim))
	m.Plus, m.Minus = d.Words(w), d.Words(w)
	m.Digest.unmarshal(d)
	m.BlockWords = d.U32()
	if d.Err == nil && (m.BlockWords == 0 || uint64(m.BlockWords)*2*uint64(m.Beta)*8 > MaxBlockData) {
		d.Fail("block of %d words", m.BlockWords)
	}
}

// dimBeta reads a query's dimension and weight: 1 <= beta <= d <= MaxDim.
func dimBeta(d *wire.Dec) (dim, beta uint16) {
	dim, beta = d.U16(), d.U16()
	if d.Err == nil && (dim < 1 || int(dim) > MaxDim || beta < 1 || beta > dim) {
		d.Fail("dimension %d, beta %d", dim, beta)
	}
	return dim, beta
}

// Ternary returns the query's T_beta(y), validated.
func (m *Query) Ternary() (template.Ternary, error) {
	t := template.Ternary{Dim: int(m.Dim), Plus: m.Plus, Minus: m.Minus}
	return t, t.Validate(int(m.Beta))
}

// MaxQueryBatch bounds the probes of one QueryBatch (config.MaxBatch).
const MaxQueryBatch = 32

// QueryBatch is a 2PC/MPC entry's batch of concurrent queries for one
// helper: 2..MaxQueryBatch probes T_beta(y) of the cluster's beta, scored
// on one row map. The helper streams the union of the probes' selected
// columns (sharing.Union) in blocks of BlockWords row words, so columns
// that several probes select cross the wire once.
type QueryBatch struct {
	Dim        uint16
	Beta       uint16
	Probes     []Probe
	Digest     Digest
	BlockWords uint32
}

// Probe is one query of a QueryBatch: T_beta(y) as two bitsets.
type Probe struct {
	Plus, Minus []uint64
}

func (m *QueryBatch) Type() Type { return TQueryBatch }
func (m *QueryBatch) marshal(e *wire.Enc) {
	e.U16(m.Dim)
	e.U16(m.Beta)
	e.U16(uint16(len(m.Probes)))
	for _, p := range m.Probes {
		e.Words(p.Plus)
		e.Words(p.Minus)
	}
	m.Digest.marshal(e)
	e.U32(m.BlockWords)
}
func (m *QueryBatch) unmarshal(d *wire.Dec) {
	if m.Dim, m.Beta = dimBeta(d); d.Err != nil {
		return
	}
	n := int(d.U16())
	if d.Err == nil && (n < 2 || n > MaxQueryBatch) {
		d.Fail("a batch of %d queries (2..%d; one is a Query)", n, MaxQueryBatch)
		return
	}
	w := template.Words(int(m.Dim))
	m.Probes = make([]Probe, n)
	for i := range m.Probes {
		m.Probes[i].Plus, m.Probes[i].Minus = d.Words(w), d.Words(w)
	}
	m.Digest.unmarshal(d)
	m.BlockWords = d.U32()
	// The union selects at least 2*beta columns (all probes alike); the
	// helper checks BlockWords against the union it computes.
	if d.Err == nil && (m.BlockWords == 0 || uint64(m.BlockWords)*2*uint64(m.Beta)*8 > MaxBlockData) {
		d.Fail("block of %d words", m.BlockWords)
	}
}

// Ternary returns probe i's T_beta(y), validated.
func (m *QueryBatch) Ternary(i int) (template.Ternary, error) {
	t := template.Ternary{Dim: int(m.Dim), Plus: m.Probes[i].Plus, Minus: m.Probes[i].Minus}
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

func (m *Block) Type() Type            { return TBlock }
func (m *Block) marshal(e *wire.Enc)   { e.U8(m.Seg); e.U32(m.W0); e.U32(m.NW) }
func (m *Block) unmarshal(d *wire.Dec) { m.Seg = d.U8(); m.W0 = d.U32(); m.NW = d.U32() }

// BlocksEnd closes a query's answer.
type BlocksEnd struct{}

func (m *BlocksEnd) Type() Type          { return TBlocksEnd }
func (m *BlocksEnd) marshal(*wire.Enc)   {}
func (m *BlocksEnd) unmarshal(*wire.Dec) {}

// BlindQuery is a blind-mode entry's query to another share holder: the
// query's positions and coefficients (T_beta(y), or the query levels), the
// per-query seed sigma of the permutation and masks (never sent to the
// decider), the query's id at the decider and the entry's row-map digest.
// The holder sends its permuted, masked score shares to the decider and
// answers BlindQueryOK.
type BlindQuery struct {
	Query  [16]byte
	Sigma  [32]byte
	Digest Digest
	Pos    []int32
	Coef   []int8
	// Down, in replicated mode, is 1 + the index of a share holder the
	// entry cannot reach: the query runs degraded, the live holders
	// sending every share's vector between them (modes/replicated). 0
	// otherwise, and always in blind mode.
	Down uint8
}

func (m *BlindQuery) Type() Type { return TBlindQuery }
func (m *BlindQuery) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.Raw(m.Sigma[:])
	m.Digest.marshal(e)
	e.U32(uint32(len(m.Pos)))
	for i, p := range m.Pos {
		e.U16(uint16(p))
		e.U8(uint8(m.Coef[i]))
	}
	e.U8(m.Down)
}
func (m *BlindQuery) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	d.Fixed(m.Sigma[:])
	m.Digest.unmarshal(d)
	n := d.Count(MaxDim, 3)
	m.Pos, m.Coef = make([]int32, n), make([]int8, n)
	for i := range n {
		m.Pos[i], m.Coef[i] = int32(d.U16()), int8(d.U8())
		if d.Err == nil && (m.Pos[i] >= MaxDim || m.Coef[i] == 0) {
			d.Fail("query coefficient %d at %d", m.Coef[i], m.Pos[i])
		}
	}
	m.Down = d.U8()
	if d.Err == nil && m.Down > MaxParties {
		d.Fail("down holder %d", m.Down)
	}
}

// BlindQueryOK is a helper's answer: the application bytes it moved with
// the decider for this query (identify's bytes_total).
type BlindQueryOK struct{ Bytes uint64 }

func (m *BlindQueryOK) Type() Type            { return TBlindQueryOK }
func (m *BlindQueryOK) marshal(e *wire.Enc)   { e.U64(m.Bytes) }
func (m *BlindQueryOK) unmarshal(d *wire.Dec) { m.Bytes = d.U64() }

// DecideShare announces a share holder's permuted, masked score shares of
// query Query: Rows elements of Bits bits (little-endian) follow as raw
// bytes. The entry's (Entry set, with TopK) waits for the DecideResult; a
// helper's is answered DecideShareOK.
type DecideShare struct {
	Query [16]byte
	Rows  uint32
	Bits  uint8
	TopK  uint16
	Entry bool
}

func (m *DecideShare) Type() Type { return TDecideShare }
func (m *DecideShare) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.U32(m.Rows)
	e.U8(m.Bits)
	e.U16(m.TopK)
	e.Bool(m.Entry)
}
func (m *DecideShare) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.Rows, m.Bits, m.TopK, m.Entry = d.U32(), d.U8(), d.U16(), d.Bool()
	if d.Err == nil && (m.Bits != 8 && m.Bits != 16 || m.Rows > MaxRows || m.TopK > MaxTopK) {
		d.Fail("score shares of %d rows of %d bits, top %d", m.Rows, m.Bits, m.TopK)
	}
}

// DecideShareOK acknowledges a helper's score shares.
type DecideShareOK struct{}

func (m *DecideShareOK) Type() Type          { return TDecideShareOK }
func (m *DecideShareOK) marshal(*wire.Enc)   {}
func (m *DecideShareOK) unmarshal(*wire.Dec) {}

// DecideResult is the decider's answer to the entry: the permuted
// positions of the best rows whose score reaches the threshold, best
// first (their scores only in clusters that reveal scores).
type DecideResult struct {
	Positions []uint32
	Scores    []int32
	// Ranks, from a decider shard, are the positions' ranks in the answer
	// merged over every shard (empty in an unsharded cluster).
	Ranks []uint16
}

func (m *DecideResult) Type() Type { return TDecideResult }
func (m *DecideResult) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.Positions)))
	for _, p := range m.Positions {
		e.U32(p)
	}
	e.U32(uint32(len(m.Scores)))
	for _, s := range m.Scores {
		e.U32(uint32(s))
	}
	e.U32(uint32(len(m.Ranks)))
	for _, r := range m.Ranks {
		e.U16(r)
	}
}
func (m *DecideResult) unmarshal(d *wire.Dec) {
	n := d.Count(MaxTopK, 4)
	for range n {
		m.Positions = append(m.Positions, d.U32())
	}
	k := d.Count(MaxTopK, 4)
	for range k {
		m.Scores = append(m.Scores, int32(d.U32()))
	}
	r := d.Count(MaxTopK, 2)
	for range r {
		m.Ranks = append(m.Ranks, d.U16())
	}
	if d.Err == nil && (k != 0 && k != n || r != 0 && r != n) {
		d.Fail("%d scores and %d ranks for %d positions", k, r, n)
	}
}
