package additive

import (
	"fmt"
	"unsafe"

	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// ChunkRows is the number of rows per chunk of an Store
// (32 MiB per chunk at d = 512, k = 8). As in Store, growth appends a chunk
// and never copies, and a column run never crosses a chunk.
const ChunkRows = 1 << 16

// Store is one share holder's additive shares in column-major
// form (docs/BLIND-NOTES.md "Shares and the store"): for every position j, one k-bit column over
// all rows, so a query reads only the columns of its support. Each column
// is uint64 words holding 64/k consecutive rows (the elements' memory
// order), which the score kernel adds lane by lane (SWAR).
//
// Rows are addressed by index, equal at every holder. Delete erases the
// row's share and marks it dead. Not safe for concurrent mutation; readers
// need the caller's lock while a writer runs.
type Store[E Elem] struct {
	dim    int
	rows   int
	chunks [][][]uint64 // chunks[c][j]: column j, rows c*ChunkRows..
	live   sharing.LiveRows
}

// NewStore returns an empty store of dimension d; capacity is a
// hint of the rows to expect.
func NewStore[E Elem](d, capacity int) (*Store[E], error) {
	if d < 1 || d > template.MaxDim {
		return nil, fmt.Errorf("%w: d = %d", template.ErrDimension, d)
	}
	return &Store[E]{dim: d, live: sharing.NewLiveRows(capacity)}, nil
}

// lanes is the number of rows per column word: 8 for k = 8, 4 for k = 16.
func lanes[E Elem]() int { return 64 / elemBits[E]() }

// chunkWords is the number of column words per chunk.
func chunkWords[E Elem]() int { return ChunkRows / lanes[E]() }

// Dim returns d; Rows the row slots (live or deleted); Live the live rows;
// Words the column words covering Rows (64/k rows per word).
func (s *Store[E]) Dim() int   { return s.dim }
func (s *Store[E]) Rows() int  { return s.rows }
func (s *Store[E]) Live() int  { return s.live.Count() }
func (s *Store[E]) Words() int { return (s.rows + lanes[E]() - 1) / lanes[E]() }

// Ring returns the store's ring.
func (s *Store[E]) Ring() Ring { return RingOf[E]() }

// IsLive reports whether row r holds an enrolled, undeleted share.
func (s *Store[E]) IsLive(r int) bool {
	return r >= 0 && r < s.rows && s.live.Has(r)
}

// LiveBits returns the live bitset (bit r&63 of word r>>6 for row r) over
// template.Words(Rows()) words; it aliases the store.
func (s *Store[E]) LiveBits() []uint64 { return s.live.Words(0, template.Words(s.rows)) }

func (s *Store[E]) ensure(r int) {
	for len(s.chunks)*ChunkRows <= r {
		cw := chunkWords[E]()
		slab := make([]uint64, s.dim*cw)
		cols := make([][]uint64, s.dim)
		for j := range cols {
			cols[j] = slab[j*cw : (j+1)*cw : (j+1)*cw]
		}
		s.chunks = append(s.chunks, cols)
	}
	s.live.Grow(r >> 6)
}

// column returns the elements of column j in the chunk of row r and the
// offset of r in it.
func (s *Store[E]) column(j, r int) ([]E, int) {
	w := s.chunks[r/ChunkRows][j]
	return unsafe.Slice((*E)(unsafe.Pointer(&w[0])), ChunkRows), r % ChunkRows
}

// Column returns column j's elements from row r to the end of r's chunk
// of ChunkRows rows (rows past Rows read as zero), for a reader that walks
// a column; the caller holds the lock the store's writers take.
func (s *Store[E]) Column(j, r int) []E {
	col, off := s.column(j, r)
	return col[off:]
}

// Append stores share as a new live row and returns its index.
func (s *Store[E]) Append(share []E) (int, error) {
	r := s.rows
	return r, s.Put(r, share, true)
}

// Put writes share (d entries) at row r: an existing row is overwritten,
// a row at or past Rows() grows the store (skipped rows are dead and zero).
// live says whether the row takes part in identification. Growth
// allocates every chunk up to r, so the caller bounds r (the party layer
// accepts only its next rows).
func (s *Store[E]) Put(r int, share []E, live bool) error {
	if r < 0 || r > 1<<31-1 {
		return fmt.Errorf("%w: %d", sharing.ErrRow, r)
	}
	if len(share) != s.dim {
		return fmt.Errorf("sharing: share has %d entries, want d = %d", len(share), s.dim)
	}
	s.ensure(r)
	for j, v := range share {
		col, off := s.column(j, r)
		col[off] = v
	}
	s.rows = max(s.rows, r+1)
	s.live.Set(r, live)
	return nil
}

// Row copies row r's share (live or not) into dst (d entries) and returns it.
func (s *Store[E]) Row(r int, dst []E) ([]E, error) {
	if r < 0 || r >= s.rows {
		return nil, fmt.Errorf("%w: %d of %d", sharing.ErrRow, r, s.rows)
	}
	if len(dst) != s.dim {
		return nil, fmt.Errorf("sharing: row buffer has %d entries, want d = %d", len(dst), s.dim)
	}
	for j := range dst {
		col, off := s.column(j, r)
		dst[j] = col[off]
	}
	return dst, nil
}

// Delete erases live row r's share (every column entry becomes zero) and
// marks it dead: the index stays, its score shares are zero, and the
// permute step hands the decider DeadScore for it.
func (s *Store[E]) Delete(r int) error {
	if !s.IsLive(r) {
		return fmt.Errorf("%w: %d is not a live row", sharing.ErrRow, r)
	}
	for j := range s.dim {
		col, off := s.column(j, r)
		col[off] = 0
	}
	s.live.Set(r, false)
	return nil
}

// PutRows stores len(shares) new live rows at r0, r0+1, ... (each share d
// entries): a bulk enrollment. It writes column by column over tiles of 64
// rows, so each column takes one short contiguous run per tile instead of
// one scattered element per row.
func (s *Store[E]) PutRows(r0 int, shares [][]E) error {
	if r0 < 0 || r0+len(shares) > 1<<31-1 {
		return fmt.Errorf("%w: %d", sharing.ErrRow, r0)
	}
	for i, sh := range shares {
		if len(sh) != s.dim {
			return fmt.Errorf("sharing: share %d has %d entries, want d = %d", i, len(sh), s.dim)
		}
	}
	if len(shares) == 0 {
		return nil
	}
	s.ensure(r0 + len(shares) - 1)
	const tile = 64
	for t0 := 0; t0 < len(shares); t0 += tile {
		t1 := min(t0+tile, len(shares))
		for r := r0 + t0; r < r0+t1; { // a tile may cross a chunk
			end := min(r0+t1, (r/ChunkRows+1)*ChunkRows)
			for j := range s.dim {
				col, off := s.column(j, r)
				run := col[off : off+end-r]
				for i := range run {
					run[i] = shares[r-r0+i][j]
				}
			}
			r = end
		}
	}
	s.rows = max(s.rows, r0+len(shares))
	for r := r0; r < r0+len(shares); r++ {
		s.live.Set(r, true)
	}
	return nil
}
