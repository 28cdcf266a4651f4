package sharing

import "github.com/idface/idface/template"

// LiveRows is a store's live rows: bit r&63 of word r>>6 is set for a
// row that holds an enrolled, undeleted share, with their count. Both
// stores (XOR bitsets here, additive shares in sharing/additive) keep
// their rows' liveness in one.
type LiveRows struct {
	bits []uint64
	n    int
}

// NewLiveRows returns an empty set with room for capacity rows (a hint).
func NewLiveRows(capacity int) LiveRows {
	return LiveRows{bits: make([]uint64, 0, template.Words(max(capacity, 64)))}
}

// Grow makes room for word w (rows 64w .. 64w+63), dead.
func (l *LiveRows) Grow(w int) {
	for len(l.bits) <= w {
		l.bits = append(l.bits, 0)
	}
}

// Set marks row r live or dead (its word must exist: Grow).
func (l *LiveRows) Set(r int, live bool) {
	wi, bit := r>>6, uint64(1)<<uint(r&63)
	was := l.bits[wi]&bit != 0
	switch {
	case live && !was:
		l.bits[wi] |= bit
		l.n++
	case !live && was:
		l.bits[wi] &^= bit
		l.n--
	}
}

// Has reports whether row r is live; r must be below the store's rows.
func (l *LiveRows) Has(r int) bool { return l.bits[r>>6]>>uint(r&63)&1 == 1 }

// Count is the number of live rows.
func (l *LiveRows) Count() int { return l.n }

// Words returns words [w0, w1) of the set; it aliases it.
func (l *LiveRows) Words(w0, w1 int) []uint64 { return l.bits[w0:w1] }
