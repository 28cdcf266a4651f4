package protocol

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/idface/idface/internal/seal"
	"github.com/idface/idface/internal/wire"
)

// Hidden probes (replicated mode, docs/HIDDEN-PROBES.md): the device's
// client computes the query vector y = Q(q) itself, splits it into three
// replicated shares over the cluster's ring and seals each holder's pair
// (y_i, y_(i+1)) to that holder. The entry relays the parts it cannot
// read; no server sees q or y.

// MaxQueryPart bounds one sealed pair of query shares: the seal's
// overhead and two vectors of MaxDim 16-bit elements.
const MaxQueryPart = seal.Overhead + 2*MaxDim*2

// HiddenIdentify is a device's identify in a hidden-probe cluster: Parts
// (party order) are the holders' sealed pairs of query shares, each sealed
// for the Binding {cluster, holder, mode, QueryContext(Nonce, Time)}. Time
// is the device's clock (Unix seconds): every holder refuses a probe
// outside its window or a nonce it has seen in it, so that the entry
// cannot run a traveller's probe again later.
type HiddenIdentify struct {
	TopK  uint16
	Nonce [16]byte
	Time  int64
	Parts [][]byte
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
}
func (m *HiddenIdentify) unmarshal(d *wire.Dec) {
	m.TopK = d.U16()
	d.Fixed(m.Nonce[:])
	m.Time = int64(d.U64())
	n := d.Count(MaxParties, 4)
	for range n {
		m.Parts = append(m.Parts, d.Bytes32(MaxQueryPart))
	}
	if d.Err == nil && (m.TopK < 1 || m.TopK > MaxTopK) {
		d.Fail("top-k %d outside 1..%d", m.TopK, MaxTopK)
	}
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
