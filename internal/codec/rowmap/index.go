// Package rowmap is the bookkeeping every server keeps about its rows:
// the ids in row order (a byte arena, no Go string per row), a pointer-free
// index from id to row, and the set hash of live (row, id) pairs that
// servers compare before they answer together (DESIGN "Consistency").
package rowmap

import "hash/maphash"

// Index maps enrolled ids to their rows without a Go string per id: keys
// are 64-bit seeded hashes, values packed row references, so the map holds
// no pointers and costs the garbage collector nothing to scan. A hash
// collision (two ids, one hash) is resolved by checking the stored id and
// keeping the later id in a small overflow map.
type Index struct {
	hash     func(string) uint64
	m        map[uint64]uint64
	overflow map[string]uint64
	idAt     func(Ref) string
}

// Ref addresses a row: its segment (the origin server's rows) and its
// sequence number there.
type Ref struct {
	Seg int
	Seq int
}

// NewIndex returns an empty index; idAt returns the id stored at a row.
func NewIndex(idAt func(Ref) string) *Index {
	seed := maphash.MakeSeed()
	return &Index{hash: func(s string) uint64 { return maphash.String(seed, s) },
		m: map[uint64]uint64{}, overflow: map[string]uint64{}, idAt: idAt}
}

func pack(r Ref) uint64   { return uint64(r.Seg)<<32 | uint64(r.Seq) }
func unpack(v uint64) Ref { return Ref{Seg: int(v >> 32), Seq: int(v & (1<<32 - 1))} }

// Lookup finds an id's row.
func (x *Index) Lookup(id string) (Ref, bool) {
	if v, ok := x.m[x.hash(id)]; ok && x.idAt(unpack(v)) == id {
		return unpack(v), true
	}
	v, ok := x.overflow[id]
	return unpack(v), ok
}

// Insert adds an id (not present) at row r.
func (x *Index) Insert(id string, r Ref) {
	h := x.hash(id)
	if _, taken := x.m[h]; taken {
		x.overflow[id] = pack(r)
		return
	}
	x.m[h] = pack(r)
}

// Remove drops an id.
func (x *Index) Remove(id string) {
	h := x.hash(id)
	if v, ok := x.m[h]; ok && x.idAt(unpack(v)) == id {
		delete(x.m, h)
		return
	}
	delete(x.overflow, id)
}
