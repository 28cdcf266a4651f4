package sharing

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/idface/idface/template"
)

// ErrRow reports a row index outside the store.
var ErrRow = errors.New("sharing: no such row")

// ChunkWords is the number of 64-row words per storage chunk (262,144
// rows). Columns grow a chunk at a time, so growth never copies the store
// (nor holds a lock for the length of a copy), and views never cross a
// chunk boundary: Columns serves ranges within one chunk.
const ChunkWords = 4096

// Store is one party's shares in column-major form (DESIGN "Performance
// design"): for every position j there is one bitset over all rows for the
// Plus bit (column j) and one for the Minus bit (column d+j). A query needs
// only its 2*beta selected columns, which are contiguous word runs.
//
// Rows are addressed by index; the party layer keeps every party's indices
// equal. A deleted row keeps its index (a tombstone) and is never scored.
// Store is not safe for concurrent mutation; readers may share it with a
// writer only under the caller's lock (but see Columns).
type Store struct {
	dim    int
	rows   int
	chunks [][][]uint64 // chunks[k][c]: column c, words k*ChunkWords.. (ChunkWords each)
	live   LiveRows
}

// NewStore returns an empty store for templates of dimension d; capacity
// is a hint of the rows to expect.
func NewStore(d, capacity int) (*Store, error) {
	if d < 1 || d > template.MaxDim {
		return nil, fmt.Errorf("%w: d = %d", template.ErrDimension, d)
	}
	return &Store{dim: d, live: NewLiveRows(capacity)}, nil
}

// ensure makes room for word w.
func (s *Store) ensure(w int) {
	for len(s.chunks)*ChunkWords <= w {
		slab := make([]uint64, 2*s.dim*ChunkWords)
		cols := make([][]uint64, 2*s.dim)
		for c := range cols {
			cols[c] = slab[c*ChunkWords : (c+1)*ChunkWords : (c+1)*ChunkWords]
		}
		s.chunks = append(s.chunks, cols)
	}
	s.live.Grow(w)
}

// word returns a pointer to word w of column c.
func (s *Store) word(c, w int) *uint64 { return &s.chunks[w/ChunkWords][c][w%ChunkWords] }

// Dim returns d. Rows returns the number of row slots (live or deleted);
// Live returns the number of live rows. Words is template.Words(Rows()).
func (s *Store) Dim() int   { return s.dim }
func (s *Store) Rows() int  { return s.rows }
func (s *Store) Live() int  { return s.live.Count() }
func (s *Store) Words() int { return (s.rows + 63) / 64 }

// IsLive reports whether row r holds an enrolled, undeleted share.
func (s *Store) IsLive(r int) bool {
	return r >= 0 && r < s.rows && s.live.Has(r)
}

// LiveWords returns the live bitset for words [w0, w1); it aliases the store.
func (s *Store) LiveWords(w0, w1 int) []uint64 { return s.live.Words(w0, w1) }

// Append stores sh as a new live row and returns its index.
func (s *Store) Append(sh Share) (int, error) {
	r := s.rows
	return r, s.Put(r, sh, true)
}

// Put writes sh at row r, which may be an existing row (overwritten) or any
// row at or past Rows() (the store grows; skipped rows are dead). live says
// whether the row takes part in identification.
func (s *Store) Put(r int, sh Share, live bool) error {
	if r < 0 {
		return fmt.Errorf("%w: %d", ErrRow, r)
	}
	if err := sh.Check(s.dim); err != nil {
		return err
	}
	wi, bit := r>>6, uint64(1)<<uint(r&63)
	s.ensure(wi)
	cols, off := s.chunks[wi/ChunkWords], wi%ChunkWords
	if r < s.rows {
		for _, c := range cols {
			c[off] &^= bit
		}
	}
	for j := range sh.Plus {
		for b := sh.Plus[j]; b != 0; b &= b - 1 {
			cols[j*64+bits.TrailingZeros64(b)][off] |= bit
		}
		for b := sh.Minus[j]; b != 0; b &= b - 1 {
			cols[s.dim+j*64+bits.TrailingZeros64(b)][off] |= bit
		}
	}
	s.rows = max(s.rows, r+1)
	s.live.Set(r, live)
	return nil
}

// Row returns a copy of the share at row r (live or not).
func (s *Store) Row(r int) (Share, error) {
	if r < 0 || r >= s.rows {
		return Share{}, fmt.Errorf("%w: %d of %d", ErrRow, r, s.rows)
	}
	sh := NewShare(s.dim)
	wi, b := r>>6, uint(r&63)
	for j := 0; j < s.dim; j++ {
		sh.Plus[j>>6] |= (*s.word(j, wi) >> b & 1) << uint(j&63)
		sh.Minus[j>>6] |= (*s.word(s.dim+j, wi) >> b & 1) << uint(j&63)
	}
	return sh, nil
}

// Delete tombstones row r: it keeps its index but is never scored again.
func (s *Store) Delete(r int) error {
	if !s.IsLive(r) {
		return fmt.Errorf("%w: %d is not a live row", ErrRow, r)
	}
	s.live.Set(r, false)
	return nil
}

// Selection lists, for a query T_beta(y), the 2*beta store columns whose
// bits are the paper's four sub-vectors: the first beta columns add to the
// score (z+[y+] and z-[y-]), the last beta subtract (z+[y-] and z-[y+]).
type Selection struct {
	Beta int
	Cols []int32
}

// NewSelection builds the selection of query y (a valid ternary vector).
func NewSelection(y template.Ternary) Selection {
	beta := y.Weight()
	cols := make([]int32, 2*beta)
	pos, neg := cols[:0], cols[beta:beta]
	for j := 0; j < y.Dim; j++ {
		switch y.At(j) {
		case 1:
			pos = append(pos, int32(j))
			neg = append(neg, int32(y.Dim+j))
		case -1:
			pos = append(pos, int32(y.Dim+j))
			neg = append(neg, int32(j))
		}
	}
	return Selection{Beta: beta, Cols: cols}
}

// Union is the selection of every column that some of sels selects, in
// increasing order, and for each selection the position of each of its
// columns in the union: a batch of queries streams the union once and
// each query scores its own columns out of it (Pick).
func Union(sels []Selection) (Selection, [][]int32) {
	top := int32(-1)
	for _, s := range sels {
		for _, c := range s.Cols {
			top = max(top, c)
		}
	}
	at := make([]int32, top+1) // column -> 1 + its position in the union
	for _, s := range sels {
		for _, c := range s.Cols {
			at[c] = 1
		}
	}
	var u Selection
	for c, in := range at {
		if in != 0 {
			at[c] = int32(len(u.Cols)) + 1
			u.Cols = append(u.Cols, int32(c))
		}
	}
	idx := make([][]int32, len(sels))
	for i, s := range sels {
		idx[i] = make([]int32, len(s.Cols))
		for j, c := range s.Cols {
			idx[i][j] = at[c] - 1
		}
	}
	return u, idx
}

// Pick appends to out the columns of cols at positions idx (a query's
// columns out of a union block, Union): views, not copies.
func Pick(cols [][]uint64, idx []int32, out [][]uint64) [][]uint64 {
	for _, i := range idx {
		out = append(out, cols[i])
	}
	return out
}

// Columns returns views of the selected columns over row words [w0, w1),
// which must lie within one chunk (see ChunkEnd): out[i] is column Cols[i],
// words w0..w1-1, aliasing the store. Words below Rows()/64 (all 64 rows
// present) are never written again, so they may be read without the
// caller's lock; the last, partial word may still gain rows and must be
// copied under the lock (Gather) when appends run concurrently.
func (s *Store) Columns(sel Selection, w0, w1 int, out [][]uint64) ([][]uint64, error) {
	if err := s.checkRange(sel, w0, w1); err != nil {
		return nil, err
	}
	if w1 > ChunkEnd(w0) {
		return nil, fmt.Errorf("sharing: words [%d, %d) cross a chunk boundary", w0, w1)
	}
	out = out[:0]
	if w0 == w1 {
		for range sel.Cols {
			out = append(out, nil)
		}
		return out, nil
	}
	cols, off := s.chunks[w0/ChunkWords], w0%ChunkWords
	for _, c := range sel.Cols {
		out = append(out, cols[c][off:off+w1-w0:off+w1-w0])
	}
	return out, nil
}

// ChunkEnd is the first word past the chunk holding word w.
func ChunkEnd(w int) int { return (w/ChunkWords + 1) * ChunkWords }

func (s *Store) checkRange(sel Selection, w0, w1 int) error {
	if w0 < 0 || w1 < w0 || w1 > s.Words() {
		return fmt.Errorf("%w: words [%d, %d) of %d", ErrRow, w0, w1, s.Words())
	}
	for _, c := range sel.Cols {
		if c < 0 || int(c) >= 2*s.dim {
			return fmt.Errorf("sharing: selected column %d outside 2d = %d", c, 2*s.dim)
		}
	}
	return nil
}

// Gather copies the selected columns for row words [w0, w1) into dst in
// column-major order, dst[i*(w1-w0) + t] = word w0+t of column Cols[i]:
// the block layout on the wire. Each column is a few contiguous copies.
func (s *Store) Gather(dst []uint64, sel Selection, w0, w1 int) error {
	nw := w1 - w0
	if len(dst) < nw*len(sel.Cols) {
		return fmt.Errorf("sharing: gather buffer holds %d words, want %d", len(dst), nw*len(sel.Cols))
	}
	if err := s.checkRange(sel, w0, w1); err != nil {
		return err
	}
	for i, c := range sel.Cols {
		out := dst[i*nw : (i+1)*nw]
		for w := w0; w < w1; {
			end := min(w1, ChunkEnd(w))
			off := w % ChunkWords
			copy(out[w-w0:end-w0], s.chunks[w/ChunkWords][c][off:off+end-w])
			w = end
		}
	}
	return nil
}

// BlockColumns slices a gathered block (Gather layout, n columns) into its
// column views, appending to out.
func BlockColumns(block []uint64, n int, out [][]uint64) [][]uint64 {
	nw := len(block) / max(n, 1)
	for i := range n {
		out = append(out, block[i*nw:(i+1)*nw:(i+1)*nw])
	}
	return out
}

// PutRows stores len(shares) new live rows at r0, r0+1, ... (a bulk
// enrollment). Rows are gathered 64 at a time into one word per column in
// a small buffer, then each column gets one word per 64 rows, instead of
// one scattered bit per set bit of every row.
func (s *Store) PutRows(r0 int, shares []Share) error {
	if r0 < 0 {
		return fmt.Errorf("%w: %d", ErrRow, r0)
	}
	for i, sh := range shares {
		if err := sh.Check(s.dim); err != nil {
			return fmt.Errorf("row %d: %w", r0+i, err)
		}
	}
	if len(shares) == 0 {
		return nil
	}
	s.ensure((r0 + len(shares) - 1) >> 6)
	words := make([]uint64, 2*s.dim)
	for i := 0; i < len(shares); {
		r := r0 + i
		wi := r >> 6
		end := min(len(shares), i+64-(r&63)) // the rows of word wi
		clear(words)
		var mask uint64
		for ; i < end; i++ {
			bit := uint64(1) << uint((r0+i)&63)
			mask |= bit
			sh := shares[i]
			for k := range sh.Plus {
				for b := sh.Plus[k]; b != 0; b &= b - 1 {
					words[k*64+bits.TrailingZeros64(b)] |= bit
				}
				for b := sh.Minus[k]; b != 0; b &= b - 1 {
					words[s.dim+k*64+bits.TrailingZeros64(b)] |= bit
				}
			}
		}
		cols, off := s.chunks[wi/ChunkWords], wi%ChunkWords
		for c, w := range words {
			cols[c][off] = cols[c][off]&^mask | w
		}
	}
	s.rows = max(s.rows, r0+len(shares))
	for r := r0; r < r0+len(shares); r++ {
		s.live.Set(r, true)
	}
	return nil
}
