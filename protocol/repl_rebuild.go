package protocol

import "github.com/idface/idface/internal/codec/wire"

// Rebuild of a replicated share holder that lost its data (engine/replicated,
// `idface party rebuild`): the holder asks each of the two others for rows
// of one origin's segment; each answers with the ids, liveness and the one
// share of those rows that it holds in common with the asker (the asker's
// own share from its predecessor, its next share from its successor).

// MaxFetchRows bounds the rows of one ReplRows.
const MaxFetchRows = 2048

// ReplFetch asks for rows [From, From+Max) of origin Seg's segment.
type ReplFetch struct {
	Seg  uint8
	From uint32
	Max  uint32
}

func (m *ReplFetch) Type() Type { return TReplFetch }
func (m *ReplFetch) marshal(e *wire.Enc) {
	e.U8(m.Seg)
	e.U32(m.From)
	e.U32(m.Max)
}
func (m *ReplFetch) unmarshal(d *wire.Dec) {
	m.Seg, m.From, m.Max = d.U8(), d.U32(), d.U32()
	if d.Err == nil && (m.Seg >= MaxParties || m.Max == 0 || m.Max > MaxFetchRows) {
		d.Fail("fetch of %d rows of segment %d", m.Max, m.Seg)
	}
}

// ReplRows answers a ReplFetch: the segment's committed rows (Total) and,
// from row From, each row's id and liveness and the share (Dim elements of
// Bits bits, little-endian, back to back; zeros for a deleted row).
type ReplRows struct {
	Seg    uint8
	Total  uint32
	From   uint32
	Bits   uint8
	Dim    uint16
	IDs    []string
	Live   []bool
	Shares []byte
	Epoch  uint32 // the segment's reshare epoch
}

func (m *ReplRows) Type() Type { return TReplRows }
func (m *ReplRows) marshal(e *wire.Enc) {
	e.U8(m.Seg)
	e.U32(m.Total)
	e.U32(m.From)
	e.U8(m.Bits)
	e.U16(m.Dim)
	e.U32(uint32(len(m.IDs)))
	for i, id := range m.IDs {
		e.Str(id)
		e.Bool(m.Live[i])
	}
	e.Bytes32(m.Shares)
	e.U32(m.Epoch)
}
func (m *ReplRows) unmarshal(d *wire.Dec) {
	m.Seg, m.Total, m.From, m.Bits, m.Dim = d.U8(), d.U32(), d.U32(), d.U8(), d.U16()
	if d.Err == nil && (m.Bits != 8 && m.Bits != 16 || m.Dim == 0 || m.Dim > MaxDim || m.Total > MaxRows) {
		d.Fail("rows of %d elements of %d bits, %d in all", m.Dim, m.Bits, m.Total)
		return
	}
	n := d.Count(MaxFetchRows, 3)
	m.IDs, m.Live = make([]string, n), make([]bool, n)
	for i := range n {
		m.IDs[i], m.Live[i] = d.Str(MaxIDLen), d.Bool()
	}
	m.Shares = d.Bytes32(MaxFetchRows * MaxDim * 2)
	m.Epoch = d.U32()
	if d.Err == nil && (len(m.Shares) != n*int(m.Dim)*int(m.Bits)/8 || uint64(m.From)+uint64(n) > uint64(m.Total)) {
		d.Fail("%d bytes of shares for %d rows of %d elements, rows %d+%d of %d", len(m.Shares), n, m.Dim, m.From, n, m.Total)
	}
}

// ReshareRequest asks a share holder, from an operator, to reshare its own
// segment: every row's shares at every holder refreshed with a
// zero-sharing, one transaction per batch of rows (idface reshare).
type ReshareRequest struct{}

func (m *ReshareRequest) Type() Type          { return TReshareRequest }
func (m *ReshareRequest) marshal(*wire.Enc)   {}
func (m *ReshareRequest) unmarshal(*wire.Dec) {}

// ReshareOK answers it: the segment's epoch and the rows reshared.
type ReshareOK struct {
	Epoch uint32
	Rows  uint32
}

func (m *ReshareOK) Type() Type { return TReshareOK }
func (m *ReshareOK) marshal(e *wire.Enc) {
	e.U32(m.Epoch)
	e.U32(m.Rows)
}
func (m *ReshareOK) unmarshal(d *wire.Dec) { m.Epoch, m.Rows = d.U32(), d.U32() }
