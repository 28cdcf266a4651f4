package txnbase

import (
	"context"
	"slices"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/protocol"
)

// Page lists the live ids after after ("": from the first) in increasing
// byte order, at most limit of them, and reports whether more follow. It
// reads every slot's id in place and copies only those that may be on
// the page, so a page costs one pass over the ids, not a sort of them.
func (m *RowMap) Page(after string, limit int) (ids []string, more bool) {
	keep := limit + 1 // one more than the page: whether more follow
	var bound string  // with full: keep ids at or below it are held
	full := false
	for seg := range m.segs {
		slots := &m.segs[seg].ids
		for seq := range slots.Len() {
			b := slots.Bytes(seq)
			if string(b) <= after || full && string(b) >= bound {
				continue
			}
			id := string(b)
			if at, ok := m.index.Lookup(id); !ok || at != (rowmap.Ref{Seg: seg, Seq: seq}) {
				continue // a deleted row's slot (its id may be live at another)
			}
			ids = append(ids, id)
			if len(ids) == 2*keep {
				slices.Sort(ids)
				ids, bound, full = ids[:keep], ids[keep-1], true
			}
		}
	}
	slices.Sort(ids)
	if len(ids) > limit {
		return ids[:limit:limit], true
	}
	return ids, false
}

// Has reports whether id is live.
func (m *RowMap) Has(id string) bool { _, ok := m.index.Lookup(id); return ok }

// IDRoutes are the routes of an operator's list of the enrolled ids and
// check of one (protocol.ListIDs, protocol.HasID), answered from the row
// map that read hands its argument under the core's read lock. Ids are
// personal data: operators only (a device is refused by its role); a
// server forwards neither, so a sharded member's shards each answer for
// their own rows.
func IDRoutes(read func(f func(*RowMap))) map[protocol.Type]engine.Route {
	list := func(_ context.Context, r engine.Request) protocol.Msg {
		m := r.Msg.(*protocol.ListIDs)
		out := &protocol.IDList{}
		read(func(rows *RowMap) { out.IDs, out.More = rows.Page(m.After, int(m.Limit)) })
		return out
	}
	has := func(_ context.Context, r engine.Request) protocol.Msg {
		m := r.Msg.(*protocol.HasID)
		out := &protocol.HasIDOK{}
		read(func(rows *RowMap) { out.Enrolled = rows.Has(m.ID) })
		return out
	}
	return map[protocol.Type]engine.Route{
		protocol.TListIDs: {Op: "ids", From: engine.Operators, Handle: list, Max: protocol.Small, Query: true},
		protocol.THasID:   {Op: "exists", From: engine.Operators, Handle: has, Max: protocol.Small, Query: true},
	}
}
