package replicated

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Tags on demand (docs/REPLICATED-NOTES.md "The decider check"): the two
// helpers both hold the vector whose tags the entry checks and both know
// the tag key, so each computes the whole tag vector and keeps it; the
// decider fetches the tags of the positions it answers by a two-server
// private information retrieval (Chor, Goldreich, Kushilevitz, Sudan):
// the tags are a grid of TagGrid's rows, the decider sends each helper a
// subset of the rows, uniform on its own, the two differing in the
// answered position's row alone, and each helper answers the XOR of its
// subset's rows. The XOR of the two answers is that row, so the decider
// learns the tags of one row of positions (it may learn every tag: they
// are one-time MACs it cannot forge from), and neither helper learns
// anything of the position. It costs O(sqrt n) bytes a position instead
// of 4 n a query.
//
// A helper that altered its answer would make the tag fail at the entry
// only where the answered position lies (a slot used, a column chosen),
// and so learn from the refusal something of the answer. So the decider
// checks every recovered row, used or not, against a digest of each grid
// row (TagRowDigests) that one helper sends and the other confirms with
// the digest of the list: an altered answer is refused by the decider,
// whatever the answer, naming the pair.

// TagGrid lays n tags out in rows of cols: the columns that balance the
// list of row digests (16 bytes a row, from one helper) and the
// selections (a bit a row, to each) against the answers (4 bytes a
// column, from each): cols = ceil(sqrt(2 n)).
func TagGrid(n int) (cols, rows int) {
	if n <= 0 {
		return 1, 0
	}
	cols = max(1, int(math.Ceil(math.Sqrt(2*float64(n)))))
	return cols, (n + cols - 1) / cols
}

// TagRowDigestSize is the bytes of one grid row's digest: a second
// preimage, which a helper would need to alter a row unseen, costs 2^128.
const TagRowDigestSize = 16

// TagRowDigests is the list of the digests of every grid row of tags
// (Tags' layout, cols columns) of query qid, TagRowDigestSize bytes each.
func TagRowDigests(tags []byte, cols int, qid [16]byte) []byte {
	w := 4 * cols
	_, rows := TagGrid(len(tags) / 4)
	out := make([]byte, 0, rows*TagRowDigestSize)
	for r := range rows {
		d := tagRowDigest(qid, r, tags[r*w:min((r+1)*w, len(tags))])
		out = append(out, d[:]...)
	}
	return out
}

func tagRowDigest(qid [16]byte, r int, row []byte) [TagRowDigestSize]byte {
	h := sha256.New()
	h.Write([]byte("idface/repl/tag row"))
	h.Write(qid[:])
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(r))
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(row)))
	h.Write(hdr[:])
	h.Write(row)
	var sum [32]byte
	h.Sum(sum[:0])
	return [TagRowDigestSize]byte(sum[:TagRowDigestSize])
}

// TagListDigest is the digest of a list of row digests, which the helper
// that does not send the list sends.
func TagListDigest(qid [16]byte, list []byte) [32]byte {
	return digest("idface/repl/tag rows", qid, 0, 32, list)
}

// TagRowCheck reports whether row (4 cols bytes, recovered from the two
// answers to a selection of grid row r of n tags) is the row whose
// digest list holds: its padding past n zero, its digest the list's.
func TagRowCheck(row, list []byte, cols, n, r int, qid [16]byte) bool {
	_, rows := TagGrid(n)
	if r < 0 || r >= rows || len(row) != 4*cols || len(list) != rows*TagRowDigestSize {
		return false
	}
	real := 4 * min(cols, n-r*cols)
	for _, b := range row[real:] {
		if b != 0 {
			return false
		}
	}
	d := tagRowDigest(qid, r, row[:real])
	return subtle.ConstantTimeCompare(d[:], list[r*TagRowDigestSize:(r+1)*TagRowDigestSize]) == 1
}

// TagSelectBytes is the bytes of one selection of a grid of rows rows.
func TagSelectBytes(rows int) int { return (rows + 7) / 8 }

// TagSelect draws the two helpers' selections of grid row target: s0
// uniform, s1 = s0 with target's bit flipped (bits past rows zero).
func TagSelect(rnd io.Reader, rows, target int) (s0, s1 []byte, err error) {
	if target < 0 || target >= rows {
		return nil, nil, fmt.Errorf("replicated: row %d of a tag grid of %d rows", target, rows)
	}
	s0 = make([]byte, TagSelectBytes(rows))
	if _, err := io.ReadFull(rnd, s0); err != nil {
		return nil, nil, fmt.Errorf("replicated: drawing a tag selection: %w", err)
	}
	if r := rows % 8; r != 0 {
		s0[len(s0)-1] &= byte(1)<<r - 1
	}
	s1 = append([]byte(nil), s0...)
	s1[target/8] ^= 1 << (target % 8)
	return s0, s1, nil
}

// TagAnswer writes into dst (4 cols bytes) the XOR of the grid rows of
// tags (4 bytes a position, Tags' layout) that sel selects; a last row
// shorter than cols counts as padded with zeros.
func TagAnswer(dst, tags []byte, cols int, sel []byte) error {
	n := len(tags) / 4
	_, rows := TagGrid(n)
	if len(tags)%4 != 0 || cols < 1 || len(dst) != 4*cols || len(sel) != TagSelectBytes(rows) {
		return fmt.Errorf("replicated: a tag answer of %d bytes over %d columns for %d tag bytes and a selection of %d bytes", len(dst), cols, len(tags), len(sel))
	}
	if c, _ := TagGrid(n); c != cols {
		return fmt.Errorf("replicated: a tag grid of %d columns, want %d for %d positions", cols, c, n)
	}
	for r := rows; r < 8*len(sel); r++ {
		if sel[r/8]>>(r%8)&1 != 0 {
			return fmt.Errorf("replicated: a tag selection names row %d of %d", r, rows)
		}
	}
	clear(dst)
	w := 4 * cols
	for r := range rows {
		if sel[r/8]>>(r%8)&1 == 0 {
			continue
		}
		row := tags[r*w : min((r+1)*w, len(tags))]
		subtle.XORBytes(dst[:len(row)], dst[:len(row)], row)
	}
	return nil
}
