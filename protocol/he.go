package protocol

import "github.com/idface/idface/internal/codec/wire"

// Messages of the HE mode (paper 4.3, App. H "(mu,nu)-IDFace"): a local
// server fetches the public key from the key server, and sends the two
// inner-product ciphertexts of every column group for each query; the key
// server answers with row indices only, never scores.

// MaxCiphertext bounds one serialised ciphertext.
const MaxCiphertext = 1 << 22

// PublicKeyRequest asks the key server for the public key.
type PublicKeyRequest struct{}

func (m *PublicKeyRequest) Type() Type          { return TPublicKeyRequest }
func (m *PublicKeyRequest) marshal(*wire.Enc)   {}
func (m *PublicKeyRequest) unmarshal(*wire.Dec) {}

// PublicKey carries the key server's public key (Lattigo binary form).
type PublicKey struct{ Key []byte }

func (m *PublicKey) Type() Type { return TPublicKey }
func (m *PublicKey) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.Key)))
	e.Raw(m.Key)
}
func (m *PublicKey) unmarshal(d *wire.Dec) {
	n := int(d.U32())
	if n > MaxCiphertext {
		d.Fail("public key of %d bytes", n)
		return
	}
	m.Key = append([]byte(nil), d.Take(n)...)
}

// HEQuery opens a query at the key server: Rows rows in Groups groups,
// encrypted under the public key with fingerprint Key (SHA-256 of its
// binary form; a key server with another key refuses); the live bitset
// (Words(Rows) words) and then, per group, the serialised ct+ and ct-
// (CiphertextBytes each) follow as raw bytes. Query is the coordinator's
// query id in a sharded cluster, under which the key server's shard
// merges its best rows with the other shards' (zero unsharded).
type HEQuery struct {
	Key     [32]byte
	Groups  uint32
	Rows    uint32
	TopK    uint16
	CtBytes uint32
	Query   [16]byte
}

func (m *HEQuery) Type() Type { return THEQuery }
func (m *HEQuery) marshal(e *wire.Enc) {
	e.Raw(m.Key[:])
	e.U32(m.Groups)
	e.U32(m.Rows)
	e.U16(m.TopK)
	e.U32(m.CtBytes)
	e.Raw(m.Query[:])
}
func (m *HEQuery) unmarshal(d *wire.Dec) {
	d.Fixed(m.Key[:])
	m.Groups, m.Rows, m.TopK, m.CtBytes = d.U32(), d.U32(), d.U16(), d.U32()
	d.Fixed(m.Query[:])
	if d.Err == nil && (m.Rows > MaxRows || m.TopK < 1 || m.TopK > MaxTopK || m.CtBytes == 0 || m.CtBytes > MaxCiphertext) {
		d.Fail("query of %d rows, top %d, ciphertexts of %d bytes", m.Rows, m.TopK, m.CtBytes)
	}
}

// HEResult is the key server's answer: the rows (indices into the local
// server's row order) whose scores exceed the threshold, best first, at most
// TopK; empty means reject. In a sharded cluster Ranks[i] is Rows[i]'s
// place in the answer merged over every shard (NoRank: not in it);
// unsharded, Ranks is empty.
type HEResult struct {
	Rows  []uint32
	Ranks []uint16
}

func (m *HEResult) Type() Type { return THEResult }
func (m *HEResult) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.Rows)))
	for _, r := range m.Rows {
		e.U32(r)
	}
	e.U32(uint32(len(m.Ranks)))
	for _, r := range m.Ranks {
		e.U16(r)
	}
}
func (m *HEResult) unmarshal(d *wire.Dec) {
	n := d.Count(MaxTopK, 4)
	for range n {
		m.Rows = append(m.Rows, d.U32())
	}
	if k := d.Count(MaxTopK, 2); k != 0 && k != n {
		d.Fail("%d ranks for %d rows", k, n)
	} else {
		for range k {
			m.Ranks = append(m.Ranks, d.U16())
		}
	}
}

// HEDecide ends a (mu,nu)-IDFace enrollment at every local server: commit
// makes rows Base..Base+N-1 live; abort leaves them burned, and a server
// that never reserved them (it refused or missed the prepare) burns them
// now, so every local server keeps the same slot order. Seq numbers the
// sequencer's changes (decisions and deletions): every local server
// applies them in that order, each exactly once.
type HEDecide struct {
	Seq    uint64
	Txn    TxnID
	Commit bool
	Base   uint32
	N      uint32
}

func (m *HEDecide) Type() Type { return THEDecide }
func (m *HEDecide) marshal(e *wire.Enc) {
	e.U64(m.Seq)
	e.Raw(m.Txn[:])
	e.Bool(m.Commit)
	e.U32(m.Base)
	e.U32(m.N)
}
func (m *HEDecide) unmarshal(d *wire.Dec) {
	m.Seq = d.U64()
	copy(m.Txn[:], d.Take(16))
	m.Commit = d.Bool()
	m.Base, m.N = d.U32(), d.U32()
	if d.Err == nil && (m.Seq == 0 || m.N > MaxBatch || uint64(m.Base)+uint64(m.N) > MaxRows) {
		d.Fail("decision %d for %d rows at %d", m.Seq, m.N, m.Base)
	}
}

// HEDelete is the sequencer's deletion of row Row (holding ID), change
// number Seq, at another local server.
type HEDelete struct {
	Seq uint64
	ID  string
	Row uint32
	// Auth is the operator's signature of the deletion, which every local
	// server checks (the key server gets neither id nor Auth).
	Auth Auth
}

func (m *HEDelete) Type() Type { return THEDelete }
func (m *HEDelete) marshal(e *wire.Enc) {
	e.U64(m.Seq)
	e.Str(m.ID)
	e.U32(m.Row)
	MarshalAuth(e, m.Auth)
}
func (m *HEDelete) unmarshal(d *wire.Dec) {
	m.Seq, m.ID, m.Row = d.U64(), d.Str(MaxIDLen), d.U32()
	m.Auth = UnmarshalAuth(d)
	if d.Err == nil && m.Seq == 0 {
		d.Fail("change number 0")
	}
}

// HESync tells a local server the sequencer's last change number; it
// answers HESyncOK with its own, and the sequencer sends what it misses.
// A local server answers identification only once it has caught up.
type HESync struct{ Seq uint64 }

func (m *HESync) Type() Type            { return THESync }
func (m *HESync) marshal(e *wire.Enc)   { e.U64(m.Seq) }
func (m *HESync) unmarshal(d *wire.Dec) { m.Seq = d.U64() }

// HESyncOK carries a local server's last applied change number.
type HESyncOK struct{ Seq uint64 }

func (m *HESyncOK) Type() Type            { return THESyncOK }
func (m *HESyncOK) marshal(e *wire.Enc)   { e.U64(m.Seq) }
func (m *HESyncOK) unmarshal(d *wire.Dec) { m.Seq = d.U64() }
