package rowmap

import (
	"crypto/sha256"
	"encoding/binary"
)

// IDs holds the id of every row of a segment in row order, back to back
// in one byte arena (kept after deletion: the slot stays taken).
type IDs struct {
	data []byte
	end  []uint64 // end[seq] is the end of row seq's id in data
}

// Len is the number of rows.
func (s *IDs) Len() int { return len(s.end) }

// Append adds the id of the next row.
func (s *IDs) Append(id string) {
	s.data = append(s.data, id...)
	s.end = append(s.end, uint64(len(s.data)))
}

// At returns the id of row seq.
func (s *IDs) At(seq int) string { return string(s.Bytes(seq)) }

// Bytes returns the id of row seq without a copy: the caller reads it
// before the next Append and never changes it.
func (s *IDs) Bytes(seq int) []byte {
	var start uint64
	if seq > 0 {
		start = s.end[seq-1]
	}
	return s.data[start:s.end[seq]:s.end[seq]]
}

// Hash is a set hash of live rows: the XOR of RowHash over them, so that
// adding or removing a row is O(1) and two servers with the same live rows
// at the same places have the same Hash.
type Hash [16]byte

// Toggle adds or removes one row.
func (h *Hash) Toggle(r [16]byte) {
	for i := range h {
		h[i] ^= r[i]
	}
}

// Combine returns the hash of the union of disjoint sets of rows: a party
// whose rows are split over shards (ShardOf) combines its shards' hashes
// into the one it compares with its peers.
func Combine(hs ...Hash) Hash {
	var out Hash
	for _, h := range hs {
		out.Toggle(h)
	}
	return out
}

// RowHash binds a live row's address and id to the cluster, so that the
// digests of two different clusters never agree by accident.
func RowHash(cluster [16]byte, seg, seq int, id string) [16]byte {
	h := sha256.New()
	h.Write(cluster[:])
	var b [5]byte
	b[0] = byte(seg)
	binary.BigEndian.PutUint32(b[1:], uint32(seq))
	h.Write(b[:])
	h.Write([]byte(id))
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}
