package protocol

import (
	"crypto/sha256"

	"github.com/idface/idface/internal/codec/wire"
)

// Replicated blind mode (docs/REPLICATED-NOTES.md): three share holders
// with 2-of-3 replicated shares and a decider. The entry sends every
// helper the same BlindQuery as in blind mode; these messages carry what
// differs: the digests that let the decider check each share-score vector
// against the other holder of its share, and the tags that let the entry
// check the decider's answer.

// DigestSize is the bytes of a digest of a score-share vector or of a tag
// vector (SHA-256).
const DigestSize = 32

// ReplQueryOK is a helper's answer to the entry: its traffic with the
// decider (bytes_total) and the tag key of this query, which the two
// helpers derive from the key they share; the entry checks the decider's
// answer with it.
type ReplQueryOK struct {
	Bytes  uint64
	TagKey [32]byte
}

func (m *ReplQueryOK) Type() Type { return TReplQueryOK }
func (m *ReplQueryOK) marshal(e *wire.Enc) {
	e.U64(m.Bytes)
	e.Raw(m.TagKey[:])
}
func (m *ReplQueryOK) unmarshal(d *wire.Dec) {
	m.Bytes = d.U64()
	d.Fixed(m.TagKey[:])
}

// ReplShare announces holder i's share-score vectors of query Query to the
// decider. Rows elements of Bits bits (pi(c_i) + m_i, little-endian) follow
// as raw bytes, then, when Tags is set, Rows 4-byte little-endian tags of
// that vector. Digest is the digest of the holder's other vector,
// pi(c_(i+1)) + m_(i+1). Entry is the index of the query's entry holder;
// the entry's own ReplShare waits for the ReplResult, a helper's is
// answered DecideShareOK. The tags of the vector of the share the entry
// does not hold stay with the two helpers, which both compute them; the
// decider fetches those of its answer (TagAsk).
//
// Degraded queries (Down: 1 + the index of the holder that is down, 0
// when all are up): a holder whose next share's other holder is down
// sends that vector in full too (Next: it follows its own vector, and
// Digest is zero); a digest whose other holder is down is zero. In a
// research cluster (scores shown) the one live holder of the share the
// entry lacks sends that vector's tags (Tags): no second helper is there
// to answer a TagAsk.
type ReplShare struct {
	Query  [16]byte
	Rows   uint32
	Bits   uint8
	TopK   uint16
	Entry  uint8
	Tags   bool
	Digest [DigestSize]byte
	Down   uint8
	Next   bool
	// Hidden: a hidden-probe query. The holder's one vector is its
	// product share pi(z_i) + m_i, then its check parts; QueryDigests
	// are the digests of its two query shares y_i and y_(i+1), which the
	// decider compares with the other holders' (an entry that relays one
	// holder another probe's part is caught). Digest and Next are unused.
	Hidden       bool
	QueryDigests [2][DigestSize]byte
	// VerdictKeys: in a hidden-probe query, the holder's two components
	// (k and k+1) of the device's verdict key (verdict.go), which the
	// decider compares with the other holders' as it does QueryDigests.
	VerdictKeys [2][VerdictKeySize]byte
	// SigmaDigest: in a hidden-probe query, the digest of the sigma the
	// holder permuted with (SigmaDigest), which the decider compares across
	// the three: an entry that gave its helpers different sigmas could
	// otherwise make its own shifted product pass its checks.
	SigmaDigest [DigestSize]byte
}

func (m *ReplShare) Type() Type { return TReplShare }
func (m *ReplShare) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.U32(m.Rows)
	e.U8(m.Bits)
	e.U16(m.TopK)
	e.U8(m.Entry)
	e.Bool(m.Tags)
	e.Raw(m.Digest[:])
	e.U8(m.Down)
	e.Bool(m.Next)
	e.Bool(m.Hidden)
	e.Raw(m.QueryDigests[0][:])
	e.Raw(m.QueryDigests[1][:])
	e.Raw(m.VerdictKeys[0][:])
	e.Raw(m.VerdictKeys[1][:])
	e.Raw(m.SigmaDigest[:])
}
func (m *ReplShare) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.Rows, m.Bits, m.TopK, m.Entry, m.Tags = d.U32(), d.U8(), d.U16(), d.U8(), d.Bool()
	d.Fixed(m.Digest[:])
	m.Down, m.Next, m.Hidden = d.U8(), d.Bool(), d.Bool()
	d.Fixed(m.QueryDigests[0][:])
	d.Fixed(m.QueryDigests[1][:])
	d.Fixed(m.VerdictKeys[0][:])
	d.Fixed(m.VerdictKeys[1][:])
	d.Fixed(m.SigmaDigest[:])
	if d.Err == nil && m.Hidden && (m.Next || m.Down != 0 || m.Tags) {
		d.Fail("a hidden-probe share with a next vector, a holder down or tags")
	}
	if d.Err == nil && m.Tags && m.Down == 0 {
		d.Fail("tags in a share of a query with every holder up (the decider asks for its answer's)")
	}
	if d.Err == nil && !m.Hidden && (m.QueryDigests != [2][DigestSize]byte{} || m.VerdictKeys != [2][VerdictKeySize]byte{} || m.SigmaDigest != [DigestSize]byte{}) {
		d.Fail("query digests, verdict keys or a sigma digest in a share of a visible probe")
	}
	if d.Err == nil && (m.Bits != 8 && m.Bits != 16 || m.Rows > MaxRows || m.TopK > MaxTopK || m.Entry > 2 || m.Down > 3 || m.Down == m.Entry+1) {
		d.Fail("score shares of %d rows of %d bits, top %d, entry %d, down %d", m.Rows, m.Bits, m.TopK, m.Entry, m.Down)
	}
}

// SigmaDigest is the digest of the sigma of query qid (ReplShare.SigmaDigest).
func SigmaDigest(qid [16]byte, sigma [32]byte) [DigestSize]byte {
	h := sha256.New()
	h.Write([]byte("idface hidden-probe sigma v1\x00"))
	h.Write(qid[:])
	h.Write(sigma[:])
	var d [DigestSize]byte
	h.Sum(d[:0])
	return d
}

// ReplResult is the decider's answer to the entry: as DecideResult, and
// for every position the value there of the vector the entry checks by
// tag (that of the share it does not hold; in a hidden-probe query, that
// of holder entry+1, the vector of holder entry+2 being the entry's own
// copy, which it checked) and its tag. Fetched is the bytes the
// decider's fetch of those tags moved (TagAsk, both helpers), for the
// query's traffic.
type ReplResult struct {
	Positions []uint32
	Scores    []int32
	Values    []uint16
	Tags      []uint32
	Fetched   uint64
	// Verdict: of a hidden probe, the decider's verdict sealed to the
	// device (SealVerdict); the entry forwards it.
	Verdict []byte
}

func (m *ReplResult) Type() Type { return TReplResult }
func (m *ReplResult) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.Positions)))
	for i, p := range m.Positions {
		e.U32(p)
		e.U16(m.Values[i])
		e.U32(m.Tags[i])
	}
	e.U32(uint32(len(m.Scores)))
	for _, s := range m.Scores {
		e.U32(uint32(s))
	}
	e.U64(m.Fetched)
	e.Bytes32(m.Verdict)
}
func (m *ReplResult) unmarshal(d *wire.Dec) {
	n := d.Count(MaxTopK, 10)
	for range n {
		m.Positions = append(m.Positions, d.U32())
		m.Values = append(m.Values, d.U16())
		m.Tags = append(m.Tags, d.U32())
	}
	k := d.Count(MaxTopK, 4)
	for range k {
		m.Scores = append(m.Scores, int32(d.U32()))
	}
	if d.Err == nil && k != 0 && k != n {
		d.Fail("%d scores for %d positions", k, n)
	}
	m.Fetched = d.U64()
	m.Verdict = d.Bytes32(VerdictSize)
	if d.Err == nil && len(m.Verdict) != 0 && len(m.Verdict) != VerdictSize {
		d.Fail("a verdict of %d bytes", len(m.Verdict))
	}
}

// MaxTagSelect, MaxTagRow and MaxTagList bound a TagAsk's selections and
// a TagAnswers' rows and list (sharing/replicated.TagGrid of MaxRows
// positions: a bit per grid row; 4 bytes per column; 16 bytes per row).
const (
	MaxTagSelect = 1 << 20
	MaxTagRow    = 1 << 18
	MaxTagList   = 1 << 20
)

// TagAsk is the decider's request to a helper for the tags of query
// Query's answer: one selection of grid rows per answered position, as
// many as the query's top K whatever the answer (so that the helper learns
// neither the positions nor how many there are). Each selection is a bit
// per row of the tags' grid (sharing/replicated.TagGrid), all of one size.
// List asks this helper for the digest of every grid row (the other
// sends the digest of that list), against which the decider checks every
// row it recovers.
type TagAsk struct {
	Query  [16]byte
	List   bool
	Select [][]byte
}

func (m *TagAsk) Type() Type { return TTagAsk }
func (m *TagAsk) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.Bool(m.List)
	e.U32(uint32(len(m.Select)))
	for _, s := range m.Select {
		e.Bytes32(s)
	}
}
func (m *TagAsk) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.List = d.Bool()
	n := d.Count(MaxTopK, 5)
	for i := range n {
		s := d.Bytes32(MaxTagSelect)
		if d.Err == nil && (len(s) == 0 || i > 0 && len(s) != len(m.Select[0])) {
			d.Fail("a tag selection of %d bytes (selection %d)", len(s), i)
		}
		m.Select = append(m.Select, s)
	}
}

// TagAnswers is a helper's answer to a TagAsk: for each selection, the
// XOR of the tag-grid rows it selects (4 bytes a column), and the digests
// of the grid's rows (List, when asked) or the digest of that list.
type TagAnswers struct {
	List       []byte
	ListDigest [DigestSize]byte
	Rows       [][]byte
}

func (m *TagAnswers) Type() Type { return TTagAnswers }
func (m *TagAnswers) marshal(e *wire.Enc) {
	e.Bytes32(m.List)
	e.Raw(m.ListDigest[:])
	e.U32(uint32(len(m.Rows)))
	for _, r := range m.Rows {
		e.Bytes32(r)
	}
}
func (m *TagAnswers) unmarshal(d *wire.Dec) {
	m.List = d.Bytes32(MaxTagList)
	d.Fixed(m.ListDigest[:])
	n := d.Count(MaxTopK, 4)
	for range n {
		r := d.Bytes32(4 * MaxTagRow)
		if d.Err == nil && (len(r) == 0 || len(r)%4 != 0 || len(m.Rows) > 0 && len(r) != len(m.Rows[0])) {
			d.Fail("a tag answer row of %d bytes", len(r))
		}
		m.Rows = append(m.Rows, r)
	}
}
