package protocol

import "github.com/idface/idface/internal/codec/wire"

// Rebuild of a replicated share holder that lost its data (modes/replicated,
// `idface party rebuild`): the holder asks each of the two others for rows
// of one origin's segment; each answers with the ids, liveness and the one
// share of those rows that it holds in common with the asker (the asker's
// own share from its predecessor, its next share from its successor),
// with what the asker checks it by (modes/replicated/records.go): that
// share's salt, the answering holder's record of the share the other peer
// sends, and a fresh record of the asker's third share.

// MaxFetchRows bounds the rows of one ReplRows.
const MaxFetchRows = 2048

// Sizes of a row's salt and records in ReplRows (sharing/replicated's
// SaltSize and RecordSize).
const (
	SaltSize   = 16
	RecordSize = 32
)

// ReplFetch asks for rows [From, From+Max) of origin Seg's segment. With
// Attest, the answer carries no shares: the recorder of reshared rows asks
// for the fresh records only.
type ReplFetch struct {
	Seg    uint8
	From   uint32
	Max    uint32
	Attest bool
}

func (m *ReplFetch) Type() Type { return TReplFetch }
func (m *ReplFetch) marshal(e *wire.Enc) {
	e.U8(m.Seg)
	e.U32(m.From)
	e.U32(m.Max)
	e.Bool(m.Attest)
}
func (m *ReplFetch) unmarshal(d *wire.Dec) {
	m.Seg, m.From, m.Max, m.Attest = d.U8(), d.U32(), d.U32(), d.Bool()
	if d.Err == nil && (m.Seg >= MaxParties || m.Max == 0 || m.Max > MaxFetchRows) {
		d.Fail("fetch of %d rows of segment %d", m.Max, m.Seg)
	}
}

// ReplRows answers a ReplFetch: the segment's committed rows (Total) and,
// from row From, each row's id and liveness and the share (Dim elements of
// Bits bits, little-endian, back to back; zeros for a deleted row; none at
// all for an Attest fetch), its salt (SaltSize bytes a row) and two
// records a row (RecordSize bytes each: the answering holder's record of
// the share the asker's other peer sends, then a fresh record of the
// asker's third share; zeros for a deleted row).
type ReplRows struct {
	Seg     uint8
	Total   uint32
	From    uint32
	Bits    uint8
	Dim     uint16
	IDs     []string
	Live    []bool
	Shares  []byte
	Epoch   uint32 // the segment's reshare epoch
	Salts   []byte
	Records []byte
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
	e.Bytes32(m.Salts)
	e.Bytes32(m.Records)
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
	m.Salts = d.Bytes32(MaxFetchRows * SaltSize)
	m.Records = d.Bytes32(MaxFetchRows * 2 * RecordSize)
	if d.Err == nil && (len(m.Shares) != 0 && len(m.Shares) != n*int(m.Dim)*int(m.Bits)/8 || uint64(m.From)+uint64(n) > uint64(m.Total)) {
		d.Fail("%d bytes of shares for %d rows of %d elements, rows %d+%d of %d", len(m.Shares), n, m.Dim, m.From, n, m.Total)
	}
	if d.Err == nil && (len(m.Salts) != n*SaltSize || len(m.Records) != 2*n*RecordSize) {
		d.Fail("%d bytes of salts and %d of records for %d rows", len(m.Salts), len(m.Records), n)
	}
}

// ReplAttest asks a share holder, from the origin of a reshare once it has
// committed, to attest now its records of origin Seg's reshared rows: it
// asks the two holders of the share it records for the new records and
// keeps those they agree on (modes/replicated/records.go). It answers
// ReshareOK (the segment's epoch, the rows attested) or an Error.
type ReplAttest struct{ Seg uint8 }

func (m *ReplAttest) Type() Type            { return TReplAttest }
func (m *ReplAttest) marshal(e *wire.Enc)   { e.U8(m.Seg) }
func (m *ReplAttest) unmarshal(d *wire.Dec) { m.Seg = d.U8() }

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
