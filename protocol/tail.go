package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/idface/idface/template"
)

// Raw tails. Some messages are followed on their stream by raw bytes,
// unframed: score vectors, tags, check parts, a live-row bitset,
// ciphertexts, column words. The message says how many bytes follow, and
// their layout is here: the receiver computes a tail's size from the
// message's fields once it has checked them (TailSize and the like), so
// that nothing is allocated before it is known and bounded, and reads it
// as its bytes arrive (network.ReadGrowing). Elements are little-endian:
// a score vector of k-bit elements is k/8 bytes an element (the form
// sharing/additive.ElemBytes views a vector in, without a copy), a tag is
// TagBytes, a bitset and a column are 64-bit words (network.WordBytes).
// testdata/tail-NN-Type.hex pins each layout (TestTailGolden).

// ErrTail reports a tail whose length is not the one its message
// announces.
var ErrTail = fmt.Errorf("%w: a raw tail of the wrong length", ErrMalformed)

// VectorBytes is a score vector of rows elements of bits bits (8 or 16).
func VectorBytes(rows, bits int) int { return rows * bits / 8 }

// VectorAt is element i of a score vector of bits-bit elements.
func VectorAt(vec []byte, bits, i int) uint16 {
	if bits == 16 {
		return binary.LittleEndian.Uint16(vec[2*i:])
	}
	return uint16(vec[i])
}

// TagBytes is one tag in a list of tags (a ReplShare's, a tag-grid row).
const TagBytes = 4

// TagAt is tag i of a list of tags.
func TagAt(tags []byte, i int) uint32 { return binary.LittleEndian.Uint32(tags[TagBytes*i:]) }

// TailSize is the score vector that follows a DecideShare.
func (m *DecideShare) TailSize() int { return VectorBytes(int(m.Rows), int(m.Bits)) }

// TailSize is the vector that follows a HiddenVector (none with None).
func (m *HiddenVector) TailSize() int {
	if m.None {
		return 0
	}
	return VectorBytes(int(m.Rows), int(m.Bits))
}

// TailWords is the words that follow a Block of cols selected columns:
// NW words of each column, one column after another.
func (m *Block) TailWords(cols int) int { return int(m.NW) * cols }

// ReplTail is what follows a ReplShare, in this order: the holder's own
// vector; its next one in full (Next); the tags of the vector of the
// share the entry lacks, TagBytes a row (Tags); a hidden probe's check
// parts (Hidden: ReplChecksSize bytes, split by SplitReplChecks).
type ReplTail struct {
	Own, Next, Tags, Check []byte
}

// TailSize is the bytes that follow m, whose check parts (if Hidden) are
// checks bytes.
func (m *ReplShare) TailSize(checks int) int {
	vec := VectorBytes(int(m.Rows), int(m.Bits))
	size := vec
	if m.Next {
		size += vec
	}
	if m.Tags {
		size += TagBytes * int(m.Rows)
	}
	if m.Hidden {
		size += checks
	}
	return size
}

// SplitTail views the tail b of m as its parts; b must be exactly
// m.TailSize(checks) bytes. Absent parts are empty.
func (m *ReplShare) SplitTail(b []byte, checks int) (ReplTail, error) {
	size := m.TailSize(checks)
	if len(b) != size {
		return ReplTail{}, fmt.Errorf("%w: %d bytes after a ReplShare that announces %d", ErrTail, len(b), size)
	}
	if !m.Hidden {
		checks = 0
	}
	vec := VectorBytes(int(m.Rows), int(m.Bits))
	t := ReplTail{Own: b[:vec], Tags: b[vec : size-checks], Check: b[size-checks:]}
	if m.Next {
		t.Next, t.Tags = b[vec:2*vec], b[2*vec:size-checks]
	}
	return t, nil
}

// TailParts is t as the parts a holder writes after m, in order, each
// checked against m's fields (checks: the check parts' size, if Hidden).
func (m *ReplShare) TailParts(t ReplTail, checks int) ([][]byte, error) {
	vec := VectorBytes(int(m.Rows), int(m.Bits))
	parts := [][]byte{t.Own}
	want := []int{vec}
	if m.Next {
		parts, want = append(parts, t.Next), append(want, vec)
	}
	if m.Tags {
		parts, want = append(parts, t.Tags), append(want, TagBytes*int(m.Rows))
	}
	if m.Hidden {
		parts, want = append(parts, t.Check), append(want, checks)
	}
	for i, p := range parts {
		if len(p) != want[i] {
			return nil, fmt.Errorf("%w: part %d of a ReplShare's tail has %d bytes, not %d", ErrTail, i, len(p), want[i])
		}
	}
	return parts, nil
}

// ReplChecksSize is a hidden probe's check parts (ReplTail.Check): the
// low and the high part, each of part elements of bits bits
// (sharing/replicated.CheckPartSize of the dimension), then the digest of
// the predecessor's vector that the holder checked.
func ReplChecksSize(part, bits int) int { return 2*VectorBytes(part, bits) + DigestSize }

// AppendReplChecks appends the check parts low and high (part elements
// each, as bytes) and the digest g to b.
func AppendReplChecks(b, low, high []byte, g [DigestSize]byte) []byte {
	b = append(b, low...)
	b = append(b, high...)
	return append(b, g[:]...)
}

// SplitReplChecks views check parts c of part elements of bits bits as
// the low part, the high part and the digest.
func SplitReplChecks(c []byte, part, bits int) (low, high, g []byte, err error) {
	if len(c) != ReplChecksSize(part, bits) {
		return nil, nil, nil, fmt.Errorf("%w: check parts of %d bytes, not %d", ErrTail, len(c), ReplChecksSize(part, bits))
	}
	half := VectorBytes(part, bits)
	return c[:half], c[half : 2*half], c[2*half:], nil
}

// LiveBytes is the live-row bitset that follows an HEQuery first: a bit a
// row, in 64-bit words.
func (m *HEQuery) LiveBytes() int { return 8 * template.Words(int(m.Rows)) }

// PairBytes is one group's (ct+, ct-), which follow the live rows, group
// after group.
func (m *HEQuery) PairBytes() int { return 2 * int(m.CtBytes) }

// TailSize is all that follows an HEQuery.
func (m *HEQuery) TailSize() int { return m.LiveBytes() + int(m.Groups)*m.PairBytes() }

// LiveWords decodes the live-row bitset b (LiveBytes).
func (m *HEQuery) LiveWords(b []byte) ([]uint64, error) {
	if len(b) != m.LiveBytes() {
		return nil, fmt.Errorf("%w: a live-row bitset of %d bytes for %d rows", ErrTail, len(b), m.Rows)
	}
	w := make([]uint64, len(b)/8)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w, nil
}

// AppendWords appends words w in the tails' form (little-endian), as
// network.Stream.WriteWords writes them.
func AppendWords(b []byte, w []uint64) []byte {
	for _, x := range w {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}
