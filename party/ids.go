package party

import "hash/maphash"

// idIndex maps enrolled ids to their rows without a Go string per id: keys
// are 64-bit seeded hashes, values packed row references, so the map holds
// no pointers and costs the garbage collector nothing to scan. A hash
// collision (two ids, one hash) is resolved by checking the stored id and
// keeping the later id in a small overflow map.
type idIndex struct {
	hash     func(string) uint64
	m        map[uint64]uint64
	overflow map[string]uint64
	idAt     func(rowRef) string
}

func newIDIndex(idAt func(rowRef) string) *idIndex {
	seed := maphash.MakeSeed()
	return &idIndex{hash: func(s string) uint64 { return maphash.String(seed, s) },
		m: map[uint64]uint64{}, overflow: map[string]uint64{}, idAt: idAt}
}

func pack(r rowRef) uint64   { return uint64(r.seg)<<32 | uint64(r.seq) }
func unpack(v uint64) rowRef { return rowRef{seg: int(v >> 32), seq: int(v & (1<<32 - 1))} }

func (x *idIndex) lookup(id string) (rowRef, bool) {
	if v, ok := x.m[x.hash(id)]; ok && x.idAt(unpack(v)) == id {
		return unpack(v), true
	}
	v, ok := x.overflow[id]
	return unpack(v), ok
}

func (x *idIndex) insert(id string, r rowRef) {
	h := x.hash(id)
	if _, taken := x.m[h]; taken {
		x.overflow[id] = pack(r)
		return
	}
	x.m[h] = pack(r)
}

func (x *idIndex) remove(id string) {
	h := x.hash(id)
	if v, ok := x.m[h]; ok && x.idAt(unpack(v)) == id {
		delete(x.m, h)
		return
	}
	delete(x.overflow, id)
}
