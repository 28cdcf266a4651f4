package protocol

// Messages of the HE mode (paper 4.3, App. H "(mu,nu)-IDFace"): a local
// server fetches the public key from the key server, and sends the two
// inner-product ciphertexts of every column group for each query; the key
// server answers with row indices only, never scores.

// MaxCiphertext bounds one serialised ciphertext.
const MaxCiphertext = 1 << 22

// PublicKeyRequest asks the key server for the public key.
type PublicKeyRequest struct{}

func (m *PublicKeyRequest) Type() Type     { return TPublicKeyRequest }
func (m *PublicKeyRequest) marshal(*enc)   {}
func (m *PublicKeyRequest) unmarshal(*dec) {}

// PublicKey carries the key server's public key (Lattigo binary form).
type PublicKey struct{ Key []byte }

func (m *PublicKey) Type() Type { return TPublicKey }
func (m *PublicKey) marshal(e *enc) {
	e.u32(uint32(len(m.Key)))
	e.raw(m.Key)
}
func (m *PublicKey) unmarshal(d *dec) {
	n := int(d.u32())
	if n > MaxCiphertext {
		d.fail("public key of %d bytes", n)
		return
	}
	m.Key = append([]byte(nil), d.take(n)...)
}

// HEQuery opens a query at the key server: Rows rows in Groups groups; the
// live bitset (Words(Rows) words) and then, per group, the serialised ct+
// and ct- (CiphertextBytes each) follow as raw bytes.
type HEQuery struct {
	Groups  uint32
	Rows    uint32
	TopK    uint16
	CtBytes uint32
}

func (m *HEQuery) Type() Type { return THEQuery }
func (m *HEQuery) marshal(e *enc) {
	e.u32(m.Groups)
	e.u32(m.Rows)
	e.u16(m.TopK)
	e.u32(m.CtBytes)
}
func (m *HEQuery) unmarshal(d *dec) {
	m.Groups, m.Rows, m.TopK, m.CtBytes = d.u32(), d.u32(), d.u16(), d.u32()
	if d.err == nil && (m.Rows > MaxRows || m.TopK < 1 || m.TopK > MaxTopK || m.CtBytes == 0 || m.CtBytes > MaxCiphertext) {
		d.fail("query of %d rows, top %d, ciphertexts of %d bytes", m.Rows, m.TopK, m.CtBytes)
	}
}

// HEResult is the key server's answer: the rows (indices into the local
// server's row order) whose scores exceed the threshold, best first, at most
// TopK; empty means reject.
type HEResult struct{ Rows []uint32 }

func (m *HEResult) Type() Type { return THEResult }
func (m *HEResult) marshal(e *enc) {
	e.u32(uint32(len(m.Rows)))
	for _, r := range m.Rows {
		e.u32(r)
	}
}
func (m *HEResult) unmarshal(d *dec) {
	n := d.count(MaxTopK, 4)
	for range n {
		m.Rows = append(m.Rows, d.u32())
	}
}

// Reserve is the HE local server's log record of slots taken by a batch:
// rows Base.. get IDs. The slots stay taken even if the batch aborts, so a
// slot whose ciphertexts may hold a contribution is never reused.
type Reserve struct {
	Txn  TxnID
	Base uint32
	IDs  []string
}

func (m *Reserve) Type() Type { return TReserve }
func (m *Reserve) marshal(e *enc) {
	e.raw(m.Txn[:])
	e.u32(m.Base)
	e.u32(uint32(len(m.IDs)))
	for _, id := range m.IDs {
		e.str(id)
	}
}
func (m *Reserve) unmarshal(d *dec) {
	copy(m.Txn[:], d.take(16))
	m.Base = d.u32()
	n := d.count(MaxBatch, 2)
	for range n {
		m.IDs = append(m.IDs, d.str(MaxIDLen))
	}
}

// HEDecide ends a (mu,nu)-IDFace enrollment at every local server: commit
// makes rows Base..Base+N-1 live; abort leaves them burned, and a server
// that never reserved them (it refused or missed the prepare) burns them
// now, so every local server keeps the same slot order.
type HEDecide struct {
	Txn    TxnID
	Commit bool
	Base   uint32
	N      uint32
}

func (m *HEDecide) Type() Type { return THEDecide }
func (m *HEDecide) marshal(e *enc) {
	e.raw(m.Txn[:])
	e.bool(m.Commit)
	e.u32(m.Base)
	e.u32(m.N)
}
func (m *HEDecide) unmarshal(d *dec) {
	copy(m.Txn[:], d.take(16))
	m.Commit = d.bool()
	m.Base, m.N = d.u32(), d.u32()
	if d.err == nil && (m.N > MaxBatch || uint64(m.Base)+uint64(m.N) > MaxRows) {
		d.fail("decision for %d rows at %d", m.N, m.Base)
	}
}
