// Package additive is the sharing of blind mode (docs/BLIND-NOTES.md, docs/SECURITY.md "Blind mode"): additive shares
// over Z_(2^k), k = 8 or 16. A gallery vector v in Z^d
// (template.ApplyLevels) is split into mu shares that sum to v mod 2^k
// (GenShare, or seeds that expand to shares); every share holder keeps its
// shares column-major (Store, one k-bit column per position, erased on
// delete), computes its score share of every row with packed arithmetic
// (Store.ScoreShares), then permutes and masks it from the query's seed
// (PermuteMask); the decider adds the mu vectors and keeps the best
// positions (Decide), and the entry maps them back (Permuter.Unpermute).
// docs/BLIND-NOTES.md has the construction and its measurements.
//
// # Security model
//
// Any mu-1 shares are uniform and independent of v. Score shares are too;
// with fresh per-query masks and permutation the vectors a decider
// receives reveal only the multiset of the query's scores.
package additive

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"unsafe"

	"github.com/idface/idface/template"
)

// Elem is the element type of a ring: uint8 for Z_(2^8), uint16 for
// Z_(2^16). Shares, score shares and scores are slices of it; the type
// parameter fixes k at compile time so the kernels cannot mix rings.
type Elem interface{ uint8 | uint16 }

// Ring is Z_(2^Bits) with Bits 8 or 16. Scores are read as signed Bits-bit
// integers, so a ring holds every score s with |s| <= 2^(Bits-1) - 1;
// -2^(Bits-1) is never a score and marks deleted rows (DeadScore).
type Ring struct{ Bits int }

// NewRing checks bits is 8 or 16.
func NewRing(bits int) (Ring, error) {
	if bits != 8 && bits != 16 {
		return Ring{}, fmt.Errorf("sharing: ring Z_(2^%d), want k = 8 or 16", bits)
	}
	return Ring{Bits: bits}, nil
}

// RingForScore returns the smallest ring holding every score in
// [-maxAbs, maxAbs] as a signed value.
func RingForScore(maxAbs int) (Ring, error) {
	switch {
	case maxAbs < 0:
		return Ring{}, fmt.Errorf("sharing: max |score| = %d", maxAbs)
	case maxAbs <= 1<<7-1:
		return Ring{Bits: 8}, nil
	case maxAbs <= 1<<15-1:
		return Ring{Bits: 16}, nil
	}
	return Ring{}, fmt.Errorf("sharing: max |score| = %d does not fit Z_(2^16)", maxAbs)
}

// RingFor returns the smallest ring for gallery levels g and query levels q:
// k = 8 for a ternary gallery with beta <= 127, else (usually) 16.
func RingFor(g, q template.Levels) (Ring, error) {
	return RingForScore(template.MaxAbsScore(g, q))
}

// MaxScore is the largest score the ring holds, 2^(Bits-1) - 1.
func (r Ring) MaxScore() int { return 1<<(r.Bits-1) - 1 }

// RingOf returns the ring of element type E.
func RingOf[E Elem]() Ring { return Ring{Bits: elemBits[E]()} }

func elemBits[E Elem]() int {
	var e E
	return 8 * int(unsafe.Sizeof(e))
}

// Signed reads a ring element as a signed k-bit score.
func Signed[E Elem](v E) int {
	if elemBits[E]() == 8 {
		return int(int8(v))
	}
	return int(int16(v))
}

// DeadScore is the value the decider sees for a deleted row,
// -2^(k-1): below every score, and never returned.
func DeadScore[E Elem]() int { return -1 << (elemBits[E]() - 1) }

// elemBytes views an element slice as bytes: uniform bytes give uniform
// elements in any byte order, and element order is kept.
func elemBytes[E Elem](v []E) []byte {
	if len(v) == 0 {
		return nil
	}
	var e E
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(e)))
}

// viewElems views a byte buffer whose length is a multiple of the element
// size (and whose start is aligned for E: all our buffers come from make)
// as elements.
func viewElems[E Elem](b []byte) []E {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*E)(unsafe.Pointer(&b[0])), len(b)/(elemBits[E]()/8))
}

// GenShare splits v into len(dst) >= 2 additive shares over the ring of
// E: dst[0..mu-2] are drawn uniformly from rnd, dst[mu-1] = v - their sum
// mod 2^k. rnd must be a CSPRNG: crypto/rand.Reader when nil, or NewStream
// for bulk enrollment (never math/rand). Each dst[i] must have len(v)
// entries; nothing is allocated.
func GenShare[E Elem](dst [][]E, v []int8, rnd io.Reader) error {
	if len(dst) < 2 {
		return fmt.Errorf("sharing: %d share holders, want at least 2", len(dst))
	}
	if len(v) < 1 || len(v) > template.MaxDim {
		return fmt.Errorf("%w: d = %d", template.ErrDimension, len(v))
	}
	for i, s := range dst {
		if len(s) != len(v) {
			return fmt.Errorf("sharing: share %d has %d entries, want d = %d", i, len(s), len(v))
		}
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	last := dst[len(dst)-1]
	for j, x := range v {
		last[j] = E(x)
	}
	for _, s := range dst[:len(dst)-1] {
		if _, err := io.ReadFull(rnd, elemBytes(s)); err != nil {
			return fmt.Errorf("sharing: reading randomness: %w", err)
		}
		subInto(last, s)
	}
	return nil
}

// Combine adds shares mod 2^k into dst (len d) and returns the
// signed values: the gallery vector v, when given all mu shares.
func Combine[E Elem](dst []int, shares ...[]E) error {
	for i, s := range shares {
		if len(s) != len(dst) {
			return fmt.Errorf("sharing: share %d has %d entries, want %d", i, len(s), len(dst))
		}
	}
	for j := range dst {
		var sum E
		for _, s := range shares {
			sum += s[j]
		}
		dst[j] = Signed(sum)
	}
	return nil
}

// SeedSize is the length of a share seed and of a per-query seed.
const SeedSize = 32

// Seed is 32 bytes from a CSPRNG: a share that travels compressed, or a
// per-query seed sigma.
type Seed [SeedSize]byte

// NewSeed reads a seed from rnd (crypto/rand.Reader when nil).
func NewSeed(rnd io.Reader) (Seed, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var s Seed
	if _, err := io.ReadFull(rnd, s[:]); err != nil {
		return Seed{}, fmt.Errorf("sharing: reading a seed: %w", err)
	}
	return s, nil
}

// Domain labels: one AES-256 key (the seed) serves several independent
// keystreams, each starting at its own 128-bit counter block
// label || sub || 0 (64-bit block counter), so their blocks never overlap.
const (
	labelShare   = 'S' // ExpandShare; sub = k
	labelFeistel = 'P' // permutation above 2^16 rows: Feistel round tables; sub = m<<8 | round
	labelShuffle = 'F' // permutation up to 2^16 rows: Fisher-Yates draws
	labelReject  = 'R' // permutation up to 2^16 rows: redraws after a rejection
	labelMask    = 'M' // masks R_t; sub = t
)

// keystream is AES-256-CTR keyed by a seed, positioned in the stream of a
// label: the bulk CTR code runs at several GB/s with AES-NI.
type keystream struct {
	block cipher.Block
	ctr   cipher.Stream
}

func newKeystream(seed *Seed) (keystream, error) {
	b, err := aes.NewCipher(seed[:])
	if err != nil {
		return keystream{}, fmt.Errorf("sharing: %w", err)
	}
	return keystream{block: b}, nil
}

// seek positions the keystream at byte offset off of stream (label, sub).
func (k *keystream) seek(label byte, sub uint32, off uint64) {
	var iv [16]byte
	iv[0] = label
	binary.BigEndian.PutUint32(iv[4:], sub)
	binary.BigEndian.PutUint64(iv[8:], off/16)
	k.ctr = cipher.NewCTR(k.block, iv[:])
	if r := off % 16; r != 0 {
		var skip [16]byte
		k.ctr.XORKeyStream(skip[:r], skip[:r])
	}
}

// fill overwrites b with the next keystream bytes.
func (k *keystream) fill(b []byte) {
	clear(b)
	k.ctr.XORKeyStream(b, b)
}

// ExpandShare writes the share a seed stands for: AES-256-CTR keyed by the
// seed under its own domain label (and k), so the entry may send holders
// 1..mu-1 a 32-byte seed instead of d*k/8 bytes. Deterministic.
func ExpandShare[E Elem](dst []E, seed *Seed) error {
	ks, err := newKeystream(seed)
	if err != nil {
		return err
	}
	ks.seek(labelShare, uint32(elemBits[E]()), 0)
	ks.fill(elemBytes(dst))
	return nil
}

// GenSeededShares is GenShare where the first mu-1 shares travel as
// seeds: it draws len(seeds) seeds from rnd (crypto/rand.Reader when nil)
// and sets last = v - sum ExpandShare(seed) mod 2^k, the share of holder mu.
func GenSeededShares[E Elem](seeds []Seed, last []E, v []int8, rnd io.Reader) error {
	if len(seeds) < 1 {
		return fmt.Errorf("sharing: %d seeds, want at least 1 (mu >= 2)", len(seeds))
	}
	if len(v) < 1 || len(v) > template.MaxDim || len(last) != len(v) {
		return fmt.Errorf("%w: d = %d, last share has %d entries", template.ErrDimension, len(v), len(last))
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	// last = v - X_1 - ... : X_1 is expanded into last itself, the others
	// (mu > 2) into one scratch share.
	var x []E
	for i := range seeds {
		var err error
		if seeds[i], err = NewSeed(rnd); err != nil {
			return err
		}
		if i == 0 {
			if err := ExpandShare(last, &seeds[0]); err != nil {
				return err
			}
			for j, c := range v {
				last[j] = E(c) - last[j]
			}
			continue
		}
		if x == nil {
			x = make([]E, len(v))
		}
		if err := ExpandShare(x, &seeds[i]); err != nil {
			return err
		}
		subInto(last, x)
	}
	return nil
}

// ElemBytes views elements as their little-endian bytes (the wire and log
// form of additive shares and score vectors), without a copy.
func ElemBytes[E Elem](v []E) []byte { return elemBytes(v) }

// ViewElems views bytes (a multiple of the element size, from make) as
// elements, without a copy.
func ViewElems[E Elem](b []byte) []E { return viewElems[E](b) }
