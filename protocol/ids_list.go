package protocol

import (
	"github.com/idface/idface/internal/codec/wire"
)

// MaxListIDs bounds the ids of one page (ListIDs.Limit, IDList.IDs): a
// page of 10,000 ids of MaxIDLen bytes is 2.6 MB, within a reply's bound
// (protocol/rpc.MaxReply).
const MaxListIDs = 10000

// ListIDs asks a row-holding server, from an operator, for the live ids
// it holds in byte order: the first Limit (1..MaxListIDs) after After
// ("" for the first page). Ids are personal data: servers answer it to
// operators only (engine.Operators). A sharded member's shards each
// answer for their own rows; the client merges their pages.
type ListIDs struct {
	After string
	Limit uint32
}

func (m *ListIDs) Type() Type { return TListIDs }
func (m *ListIDs) marshal(e *wire.Enc) {
	e.Str(m.After)
	e.U32(m.Limit)
}
func (m *ListIDs) unmarshal(d *wire.Dec) {
	m.After = d.Str(MaxIDLen)
	m.Limit = d.U32()
	if m.Limit == 0 || m.Limit > MaxListIDs {
		d.Fail("a page of %d ids (1..%d)", m.Limit, MaxListIDs)
	}
	if m.After != "" {
		if err := CheckStoredID(m.After); err != nil {
			d.Fail("after: %v", err)
		}
	}
}

// IDList answers ListIDs: at most Limit ids in increasing byte order, each
// after the request's After, and whether More follow the last.
type IDList struct {
	IDs  []string
	More bool
}

func (m *IDList) Type() Type { return TIDList }
func (m *IDList) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.IDs)))
	for _, id := range m.IDs {
		e.Str(id)
	}
	e.Bool(m.More)
}
func (m *IDList) unmarshal(d *wire.Dec) {
	n := d.Count(MaxListIDs, 3)
	m.IDs = make([]string, 0, n)
	for i := range n {
		id := d.Str(MaxIDLen)
		if err := CheckStoredID(id); err != nil {
			d.Fail("id %d: %v", i, err)
			return
		}
		if i > 0 && id <= m.IDs[i-1] {
			d.Fail("id %d out of order", i)
			return
		}
		m.IDs = append(m.IDs, id)
	}
	m.More = d.Bool()
}

// HasID asks a row-holding server, from an operator, whether ID is
// enrolled (live) there; operators only, as ListIDs.
type HasID struct{ ID string }

func (m *HasID) Type() Type          { return THasID }
func (m *HasID) marshal(e *wire.Enc) { e.Str(m.ID) }
func (m *HasID) unmarshal(d *wire.Dec) {
	m.ID = d.Str(MaxIDLen)
	if err := CheckStoredID(m.ID); err != nil {
		d.Fail("%v", err)
	}
}

// HasIDOK answers HasID.
type HasIDOK struct{ Enrolled bool }

func (m *HasIDOK) Type() Type            { return THasIDOK }
func (m *HasIDOK) marshal(e *wire.Enc)   { e.Bool(m.Enrolled) }
func (m *HasIDOK) unmarshal(d *wire.Dec) { m.Enrolled = d.Bool() }
