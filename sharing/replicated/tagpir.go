package replicated

import (
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

// TagGrid lays n tags out in rows of cols: the columns that balance a
// selection's bytes (a bit a row, to each helper) against an answer's (4
// bytes a column, from each): cols = ceil(sqrt(n / 32)).
func TagGrid(n int) (cols, rows int) {
	if n <= 0 {
		return 1, 0
	}
	cols = max(1, int(math.Ceil(math.Sqrt(float64(n)/32))))
	return cols, (n + cols - 1) / cols
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

// TagFrom is the tag at position p from the two helpers' answers to the
// selections of p's row.
func TagFrom(a0, a1 []byte, cols, p int) (uint32, error) {
	if len(a0) != 4*cols || len(a1) != 4*cols {
		return 0, fmt.Errorf("replicated: tag answers of %d and %d bytes, want %d", len(a0), len(a1), 4*cols)
	}
	c := 4 * (p % cols)
	return binary.LittleEndian.Uint32(a0[c:]) ^ binary.LittleEndian.Uint32(a1[c:]), nil
}
