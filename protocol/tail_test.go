package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idface/idface/harness/golden"
	"github.com/idface/idface/protocol/frame"
)

// tailed is a message with the raw tail that follows it on its stream.
type tailed struct {
	m    Msg
	tail [][]byte
}

// seq is n bytes counting from b.
func seq(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b + byte(i)
	}
	return out
}

// checkPart is the size of a sample's check part, in elements.
const checkPart = 3

// tailSamples are messages with tails, small enough to read in a golden
// file, with every optional part of each layout.
func tailSamples(t testing.TB) []tailed {
	t.Helper()
	repl := func(m *ReplShare, tl ReplTail, checks int) tailed {
		parts, err := m.TailParts(tl, checks)
		if err != nil {
			t.Fatal(err)
		}
		return tailed{m, parts}
	}
	checks := ReplChecksSize(checkPart, 8)
	he := &HEQuery{Key: [32]byte{1}, Groups: 2, Rows: 70, TopK: 1, CtBytes: 3, Query: [16]byte{7}}
	return []tailed{
		{&DecideShare{Query: [16]byte{3}, Rows: 4, Bits: 8, TopK: 2, Entry: true}, [][]byte{seq(0x10, 4)}},
		{&DecideShare{Query: [16]byte{4}, Rows: 3, Bits: 16, TopK: 1}, [][]byte{seq(0x20, 6)}},
		repl(&ReplShare{Query: [16]byte{4}, Rows: 2, Bits: 16, TopK: 1, Entry: 2, Digest: [32]byte{5}}, ReplTail{Own: seq(0x30, 4)}, 0),
		repl(&ReplShare{Query: [16]byte{9}, Rows: 2, Bits: 8, TopK: 1, Tags: true, Down: 2, Next: true},
			ReplTail{Own: seq(0x40, 2), Next: seq(0x50, 2), Tags: seq(0x60, 8)}, 0),
		repl(&ReplShare{Query: [16]byte{4}, Rows: 2, Bits: 8, TopK: 1, Entry: 1, Hidden: true, QueryDigests: [2][32]byte{{1}, {2}}},
			ReplTail{Own: seq(0x70, 2), Check: AppendReplChecks(nil, seq(0x80, checkPart), seq(0x90, checkPart), [DigestSize]byte{0xaa})}, checks),
		{&HiddenVector{Query: [16]byte{1, 2}, Rows: 3, Bits: 16}, [][]byte{seq(0xa0, 6)}},
		{&HiddenVector{Query: [16]byte{3}, Bits: 8, None: true, Why: "p2: its part does not open"}, nil},
		{he, [][]byte{AppendWords(nil, []uint64{0x0102030405060708, 0x3f}), seq(0xb0, he.PairBytes()), seq(0xc0, he.PairBytes())}},
		{&Block{Seg: 1, W0: 2, NW: 2}, [][]byte{AppendWords(nil, []uint64{1, 2, 3, 4, 5, 6})}}, // three columns
	}
}

// wireImage is what a sender writes on the stream: the frame and the
// tail's parts one after another.
func wireImage(s tailed) []byte {
	msg := Marshal(s.m)
	b := append(frame.Append(nil, len(msg)), msg...)
	for _, p := range s.tail {
		b = append(b, p...)
	}
	return b
}

// tailSize is what the receiver of m expects after it.
func tailSize(t testing.TB, m Msg) int {
	switch m := m.(type) {
	case *DecideShare:
		return m.TailSize()
	case *ReplShare:
		return m.TailSize(ReplChecksSize(checkPart, int(m.Bits)))
	case *HiddenVector:
		return m.TailSize()
	case *HEQuery:
		return m.TailSize()
	case *Block:
		return 8 * m.TailWords(3)
	}
	t.Fatalf("no tail for %v", m.Type())
	return 0
}

// TestTailGolden pins the layout of every raw tail with its frame:
// testdata/tail-NN-Type.hex holds, for each sample, the frame header, the
// message and its tail as a sender writes them (one hex line each), and
// each line reads back by the receiver's steps: the header, the message,
// the tail's size from the message, its parts.
func TestTailGolden(t *testing.T) {
	byType := map[Type][]string{}
	var order []Type
	for _, s := range tailSamples(t) {
		if _, ok := byType[s.m.Type()]; !ok {
			order = append(order, s.m.Type())
		}
		byType[s.m.Type()] = append(byType[s.m.Type()], hex.EncodeToString(wireImage(s)))
	}
	for _, typ := range order {
		name := fmt.Sprintf("tail-%02d-%v.hex", uint8(typ), typ)
		golden.Check(t, name, "TestTailGolden from tailSamples() of type "+typ.String(), strings.Join(byType[typ], "\n")+"\n")
	}
	for _, s := range tailSamples(t) {
		b := wireImage(s)
		n := frame.Len(b)
		m, err := Decode(b[frame.Header : frame.Header+n])
		if err != nil {
			t.Fatalf("%v: %v", s.m.Type(), err)
		}
		tail := b[frame.Header+n:]
		if got := tailSize(t, m); got != len(tail) {
			t.Fatalf("%v: the message announces %d bytes of tail, %d follow", m.Type(), got, len(tail))
		}
		if !bytes.Equal(tail, bytes.Join(s.tail, nil)) {
			t.Fatalf("%v: the tail read is not the tail written", m.Type())
		}
	}
}

// TestTailRoundTrip splits every tail into the parts it was made of, and
// refuses a tail one byte short or long (a prefix, or trailing bytes).
func TestTailRoundTrip(t *testing.T) {
	for _, s := range tailSamples(t) {
		tail := bytes.Join(s.tail, nil)
		switch m := s.m.(type) {
		case *ReplShare:
			checks := ReplChecksSize(checkPart, int(m.Bits))
			got, err := m.SplitTail(tail, checks)
			if err != nil {
				t.Fatal(err)
			}
			parts, err := m.TailParts(got, checks)
			if err != nil || !bytes.Equal(bytes.Join(parts, nil), tail) {
				t.Fatalf("ReplShare %+v: split and joined again: %x, %v", m, parts, err)
			}
			if m.Tags && (tagLE(got.Tags, 1) != TagAt(got.Tags, 1)) {
				t.Fatal("TagAt does not read little-endian")
			}
			if m.Hidden {
				low, high, g, err := SplitReplChecks(got.Check, checkPart, int(m.Bits))
				if err != nil || !bytes.Equal(low, seq(0x80, checkPart)) || !bytes.Equal(high, seq(0x90, checkPart)) || g[0] != 0xaa || len(g) != DigestSize {
					t.Fatalf("check parts %x %x %x, %v", low, high, g, err)
				}
				if _, _, _, err := SplitReplChecks(got.Check[1:], checkPart, int(m.Bits)); !errors.Is(err, ErrTail) {
					t.Fatalf("check parts one byte short: %v", err)
				}
			}
			for _, bad := range [][]byte{tail[:len(tail)-1], append(append([]byte{}, tail...), 0)} {
				if _, err := m.SplitTail(bad, checks); !errors.Is(err, ErrTail) {
					t.Fatalf("ReplShare: a tail of %d bytes for %d: %v", len(bad), len(tail), err)
				}
			}
			short := got
			short.Own = short.Own[1:]
			if _, err := m.TailParts(short, checks); !errors.Is(err, ErrTail) {
				t.Fatalf("ReplShare: a vector a byte short written: %v", err)
			}
		case *HEQuery:
			live := tail[:m.LiveBytes()]
			w, err := m.LiveWords(live)
			if err != nil || !bytes.Equal(AppendWords(nil, w), live) || w[0] != 0x0102030405060708 {
				t.Fatalf("live rows %x: %v", w, err)
			}
			for _, bad := range [][]byte{live[:len(live)-1], append(append([]byte{}, live...), 0)} {
				if _, err := m.LiveWords(bad); !errors.Is(err, ErrTail) {
					t.Fatalf("HEQuery: a live bitset of %d bytes: %v", len(bad), err)
				}
			}
		case *DecideShare:
			for i := range int(m.Rows) {
				want := uint16(tail[i])
				if m.Bits == 16 {
					want = uint16(tail[2*i]) | uint16(tail[2*i+1])<<8
				}
				if got := VectorAt(tail, int(m.Bits), i); got != want {
					t.Fatalf("element %d of a %d-bit vector: %d, want %d", i, m.Bits, got, want)
				}
			}
		}
	}
}

// tagLE reads tag i little-endian, byte by byte.
func tagLE(tags []byte, i int) uint32 {
	b := tags[TagBytes*i:]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// FuzzTail reads a stream as a receiver does: the frame, the message, and
// a tail split by its message's layout only when it has the announced
// length; nothing panics.
func FuzzTail(f *testing.F) {
	for _, s := range tailSamples(f) {
		f.Add(wireImage(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < frame.Header || frame.Len(b) > len(b)-frame.Header {
			return
		}
		n := frame.Len(b)
		m, err := Decode(b[frame.Header : frame.Header+n])
		if err != nil {
			return
		}
		tail := b[frame.Header+n:]
		switch m := m.(type) {
		case *ReplShare:
			checks := ReplChecksSize(checkPart, int(m.Bits))
			tl, err := m.SplitTail(tail, checks)
			if (err == nil) != (len(tail) == m.TailSize(checks)) {
				t.Fatalf("a tail of %d bytes for %d: %v", len(tail), m.TailSize(checks), err)
			}
			if err == nil && m.Hidden {
				if _, _, _, err := SplitReplChecks(tl.Check, checkPart, int(m.Bits)); err != nil {
					t.Fatal(err)
				}
			}
		case *HEQuery:
			if len(tail) >= m.LiveBytes() {
				if _, err := m.LiveWords(tail[:m.LiveBytes()]); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
