package protocol

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/wire"
)

// Hidden probes (replicated mode, docs/HIDDEN-PROBES.md): the device's
// client computes the query vector y = Q(q) itself, splits it into three
// replicated shares over the cluster's ring and seals each holder's pair
// (y_i, y_(i+1)) to that holder. The entry relays the parts it cannot
// read; no server sees q or y.

// MaxQueryPart bounds one sealed pair of query shares: the seal's
// overhead, two vectors of MaxDim 16-bit elements and two components of
// the verdict key.
const MaxQueryPart = seal.Overhead + 2*MaxDim*2 + 2*VerdictKeySize

// HiddenIdentify is a device's identify in a hidden-probe cluster: Parts
// (party order) are the holders' sealed pairs of query shares, each sealed
// for the Binding {cluster, holder, mode, QueryContext(Nonce, Time)}. Time
// is the device's clock (Unix seconds): every holder refuses a probe
// outside its window or a nonce it has seen in it, so that the entry
// cannot run a traveller's probe again later. Auth is the device's
// signature over the probe (SignProbe): holders run only probes a client
// of the cluster made, so an entry cannot make probes of its own (a unit
// query, say, to read a coordinate of chosen rows through the answers).
type HiddenIdentify struct {
	TopK  uint16
	Nonce [16]byte
	Time  int64
	Parts [][]byte
	Auth  Auth // Auth.Nonce is Nonce
}

func (m *HiddenIdentify) Type() Type { return THiddenIdentify }
func (m *HiddenIdentify) marshal(e *wire.Enc) {
	e.U16(m.TopK)
	e.Raw(m.Nonce[:])
	e.U64(uint64(m.Time))
	e.U32(uint32(len(m.Parts)))
	for _, p := range m.Parts {
		e.Bytes32(p)
	}
	MarshalAuth(e, m.Auth)
}
func (m *HiddenIdentify) unmarshal(d *wire.Dec) {
	m.TopK = d.U16()
	d.Fixed(m.Nonce[:])
	m.Time = int64(d.U64())
	n := d.Count(MaxParties, 4)
	for range n {
		m.Parts = append(m.Parts, d.Bytes32(MaxQueryPart))
	}
	m.Auth = UnmarshalAuth(d)
	if d.Err == nil && (m.TopK < 1 || m.TopK > MaxTopK) {
		d.Fail("top-k %d outside 1..%d", m.TopK, MaxTopK)
	}
	if d.Err == nil && m.Auth.Nonce != m.Nonce {
		d.Fail("a hidden probe signed for another nonce")
	}
}

// ProbeAuth is what a helper needs of a hidden probe beyond its own part
// to check the device's signature (HiddenItem.Probe): the top-k asked and
// the hashes of every holder's part, in party order.
type ProbeAuth struct {
	TopK   uint16
	Hashes [][32]byte
	Auth   Auth
}

func (a *ProbeAuth) marshal(e *wire.Enc) {
	e.U16(a.TopK)
	e.U8(uint8(len(a.Hashes)))
	for _, h := range a.Hashes {
		e.Raw(h[:])
	}
	MarshalAuth(e, a.Auth)
}

func (a *ProbeAuth) unmarshal(d *wire.Dec) {
	a.TopK = d.U16()
	n := int(d.U8())
	if d.Err == nil && n > MaxParties {
		d.Fail("%d part hashes", n)
		return
	}
	a.Hashes = make([][32]byte, n)
	for i := range a.Hashes {
		d.Fixed(a.Hashes[i][:])
	}
	a.Auth = UnmarshalAuth(d)
}

// probeStatement is what a device signs for a hidden probe: the cluster,
// the nonce and time its parts are sealed for, the top-k it asks and the
// hash of every part (so no part can be swapped for another's).
func probeStatement(cluster [16]byte, nonce [16]byte, t int64, topK uint16, hashes [][32]byte) []byte {
	h := sha256.New()
	h.Write([]byte("idface hidden probe v1 signed\x00"))
	h.Write(cluster[:])
	h.Write(QueryContext(nonce, t))
	var b [8]byte
	binary.BigEndian.PutUint16(b[:2], topK)
	h.Write(b[:2])
	h.Write([]byte{byte(len(hashes))})
	for _, p := range hashes {
		h.Write(p[:])
	}
	return h.Sum(nil)
}

// SignProbe signs a hidden probe as the client name holding key; its
// parts must be sealed already (their hashes are signed).
func SignProbe(key crypto.Signer, name string, cluster [16]byte, m *HiddenIdentify) error {
	hashes := make([][32]byte, len(m.Parts))
	for i, p := range m.Parts {
		hashes[i] = PartHash(p)
	}
	sig, err := key.Sign(rand.Reader, probeStatement(cluster, m.Nonce, m.Time, m.TopK, hashes), crypto.SHA256)
	if err != nil {
		return fmt.Errorf("signing the hidden probe: %w", err)
	}
	m.Auth = Auth{Signer: name, Nonce: m.Nonce, Sig: sig}
	return nil
}

// Probe is the probe's signature and part hashes, for the helpers.
func (m *HiddenIdentify) Probe() ProbeAuth {
	a := ProbeAuth{TopK: m.TopK, Auth: m.Auth, Hashes: make([][32]byte, len(m.Parts))}
	for i, p := range m.Parts {
		a.Hashes[i] = PartHash(p)
	}
	return a
}

// VerifyProbe checks that a is pub's signature of a probe of (nonce, t)
// in cluster whose part holder k sealed hashes to PartHash(part).
func (a *ProbeAuth) VerifyProbe(pub *ecdsa.PublicKey, cluster [16]byte, nonce [16]byte, t int64, k int, part []byte) bool {
	return pub != nil && len(a.Auth.Sig) > 0 && a.Auth.Nonce == nonce &&
		k >= 0 && k < len(a.Hashes) && a.Hashes[k] == PartHash(part) &&
		ecdsa.VerifyASN1(pub, probeStatement(cluster, nonce, t, a.TopK, a.Hashes), a.Auth.Sig)
}

// QueryContext is the seal context of a hidden-probe query's parts: a
// part opens only for the request (nonce, time) it was made for.
func QueryContext(nonce [16]byte, time int64) []byte {
	h := sha256.New()
	h.Write([]byte("idface hidden probe v1\x00"))
	h.Write(nonce[:])
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(time))
	h.Write(t[:])
	return h.Sum(nil)
}

// MaxHiddenBatch bounds the probes of one HiddenQuery (the dense kernel
// scores this many in one pass: additive.MaxDenseBatch).
const MaxHiddenBatch = 32

// HiddenQuery is an entry's batch of hidden probes for one helper: the
// row map the entry scored them on (sealed for the helper) and, for each
// probe, what the helper needs to open, check and score its part. The
// helper scores the batch in one pass over its shares and sends each
// probe's vector to the decider on its own.
type HiddenQuery struct {
	Digest Digest
	Items  []HiddenItem
}

// HiddenItem is one probe of a HiddenQuery: the query id and sigma (as
// in BlindQuery), the device's request nonce and time, this helper's
// sealed pair of query shares, and the device's signature with every
// part's hash.
type HiddenItem struct {
	Query  [16]byte
	Sigma  [32]byte
	Nonce  [16]byte
	Time   int64
	Sealed []byte
	Probe  ProbeAuth
}

func (m *HiddenQuery) Type() Type { return THiddenQuery }
func (m *HiddenQuery) marshal(e *wire.Enc) {
	m.Digest.marshal(e)
	e.U16(uint16(len(m.Items)))
	for i := range m.Items {
		it := &m.Items[i]
		e.Raw(it.Query[:])
		e.Raw(it.Sigma[:])
		e.Raw(it.Nonce[:])
		e.U64(uint64(it.Time))
		e.Bytes32(it.Sealed)
		it.Probe.marshal(e)
	}
}
func (m *HiddenQuery) unmarshal(d *wire.Dec) {
	m.Digest.unmarshal(d)
	n := int(d.U16())
	if d.Err == nil && (n < 1 || n > MaxHiddenBatch) {
		d.Fail("a batch of %d hidden probes (1..%d)", n, MaxHiddenBatch)
		return
	}
	m.Items = make([]HiddenItem, n)
	for i := range m.Items {
		it := &m.Items[i]
		d.Fixed(it.Query[:])
		d.Fixed(it.Sigma[:])
		d.Fixed(it.Nonce[:])
		it.Time = int64(d.U64())
		it.Sealed = d.Bytes32(MaxQueryPart)
		it.Probe.unmarshal(d)
		// A bad part is that probe's refusal at the helper (it does not
		// open), never the whole batch's.
		if d.Err == nil && it.Probe.Auth.Nonce != it.Nonce {
			d.Fail("hidden probe %d: signed for another nonce", i)
		}
	}
}

// HiddenQueryOK is a helper's answer to a HiddenQuery, one result per
// probe in order: the bytes it moved with the decider for that probe, or
// why it did not score it (then nothing of the probe reached the decider
// from this helper).
type HiddenQueryOK struct {
	Items []HiddenResult
}

// HiddenResult is one probe's result at a helper: Err is nil when the
// helper scored the probe and sent its vector.
type HiddenResult struct {
	Bytes  uint64
	TagKey [32]byte // the key of the tags of helper entry+1's vector, which both helpers derive (ReplQueryOK.TagKey)
	Err    *Error
}

func (m *HiddenQueryOK) Type() Type { return THiddenQueryOK }
func (m *HiddenQueryOK) marshal(e *wire.Enc) {
	e.U16(uint16(len(m.Items)))
	for _, it := range m.Items {
		e.U64(it.Bytes)
		e.Raw(it.TagKey[:])
		if it.Err == nil {
			e.U16(0)
			continue
		}
		it.Err.marshal(e)
	}
}
func (m *HiddenQueryOK) unmarshal(d *wire.Dec) {
	n := int(d.U16())
	if d.Err == nil && n > MaxHiddenBatch {
		d.Fail("%d results for a batch of at most %d", n, MaxHiddenBatch)
		return
	}
	m.Items = make([]HiddenResult, n)
	for i := range m.Items {
		m.Items[i].Bytes = d.U64()
		d.Fixed(m.Items[i].TagKey[:])
		if c := Code(d.U16()); c != 0 {
			m.Items[i].Err = &Error{Code: c, Msg: d.Str(MaxMessage)}
		}
	}
}

// HiddenVector is holder i's product-share vector of a hidden probe
// (pi(z_i) + its masks, as it sends the decider), to holder i+1, which
// checks it (docs/HIDDEN-PROBES.md, "Checking the products"). Rows
// elements of Bits bits follow the message on its stream.
//
// None says instead that holder i will send no vector of this probe (it
// refused the probe, or could not score it), so holder i+1 does not wait.
type HiddenVector struct {
	Query [16]byte
	Rows  uint32
	Bits  uint8
	None  bool
	Why   string // with None: why (holder i's refusal, as its entry gets it)
}

func (m *HiddenVector) Type() Type { return THiddenVector }
func (m *HiddenVector) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.U32(m.Rows)
	e.U8(m.Bits)
	e.Bool(m.None)
	e.Str(m.Why)
}
func (m *HiddenVector) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.Rows, m.Bits, m.None = d.U32(), d.U8(), d.Bool()
	m.Why = d.Str(MaxMessage)
}

// HiddenVectorOK acknowledges a HiddenVector, once read.
type HiddenVectorOK struct{}

func (m *HiddenVectorOK) Type() Type            { return THiddenVectorOK }
func (m *HiddenVectorOK) marshal(e *wire.Enc)   {}
func (m *HiddenVectorOK) unmarshal(d *wire.Dec) {}
