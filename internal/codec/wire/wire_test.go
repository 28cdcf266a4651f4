package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/idface/idface/internal/codec/wire"
)

// record is one value of every kind the codec has, in a fixed order: what
// the tests encode, decode and compare.
type record struct {
	u8     uint8
	flag   bool
	u16    uint16
	u32    uint32
	u64    uint64
	name   string
	blob   []byte
	words  []uint64 // two, uncounted
	fixed  [4]byte
	floats []float32
	items  []uint16 // a counted list
	raw    []byte   // the rest
}

// Bounds of the decoder below.
const (
	maxName   = 16
	maxBlob   = 32
	maxFloats = 8
	maxItems  = 4
)

func (r *record) encode() []byte {
	var e wire.Enc
	e.U8(r.u8)
	e.Bool(r.flag)
	e.U16(r.u16)
	e.U32(r.u32)
	e.U64(r.u64)
	e.Str(r.name)
	e.Bytes32(r.blob)
	e.Words(r.words)
	e.Raw(r.fixed[:])
	e.F32s(r.floats)
	e.U32(uint32(len(r.items)))
	for _, v := range r.items {
		e.U16(v)
	}
	e.Raw(r.raw)
	return e.B
}

func decode(b []byte) (*record, error) {
	d := &wire.Dec{B: b}
	r := &record{}
	r.u8 = d.U8()
	r.flag = d.Bool()
	r.u16 = d.U16()
	r.u32 = d.U32()
	r.u64 = d.U64()
	r.name = d.Str(maxName)
	r.blob = d.Bytes32(maxBlob)
	r.words = d.Words(2)
	d.Fixed(r.fixed[:])
	r.floats = d.F32s(maxFloats)
	n := d.Count(maxItems, 2)
	for range n {
		r.items = append(r.items, d.U16())
	}
	r.raw = d.Take(len(d.B))
	return r, d.Done()
}

func sample() *record {
	return &record{u8: 0xfe, flag: true, u16: 0xbeef, u32: 0xdeadbeef, u64: math.MaxUint64 - 1,
		name: "née-7", blob: []byte{0, 1, 2, 255}, words: []uint64{1 << 63, 42}, fixed: [4]byte{9, 8, 7, 6},
		floats: []float32{0, -1.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32}, items: []uint16{1, 65535}, raw: []byte("tail")}
}

// TestRoundTrip: every kind decodes to what was encoded, big-endian and
// length-prefixed as the package says.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *record
	}{
		{"values", sample()},
		{"empty", &record{words: []uint64{0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.r.encode()
			got, err := decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.encode(), b) {
				t.Fatalf("decode then encode changed the bytes:\n%x\n%x", b, got.encode())
			}
			if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", *tc.r) { // nil and empty slices alike
				t.Fatalf("decoded %+v, encoded %+v", *got, *tc.r)
			}
		})
	}
	var e wire.Enc
	e.U16(0x0102)
	e.U32(0x03040506)
	e.Str("ab")
	if want := []byte{1, 2, 3, 4, 5, 6, 0, 2, 'a', 'b'}; !bytes.Equal(e.B, want) {
		t.Fatalf("encoded %x, want %x (big-endian, u16 string length)", e.B, want)
	}
}

// TestAliasing: Take aliases the input (bulk data is not copied), Bytes32
// copies (a decoded message outlives its buffer).
func TestAliasing(t *testing.T) {
	var e wire.Enc
	e.Bytes32([]byte{1, 2})
	e.Raw([]byte{3, 4})
	d := &wire.Dec{B: e.B}
	copied, aliased := d.Bytes32(2), d.Take(2)
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
	e.B[4], e.B[6] = 9, 9
	if copied[0] != 1 || aliased[0] != 9 {
		t.Fatalf("Bytes32 gave %v, Take %v after the input changed", copied, aliased)
	}
}

// TestMalformed: each bound and each bad encoding fails with ErrMalformed
// (naming what), never a panic; the first failure sticks and later reads
// give zero values.
func TestMalformed(t *testing.T) {
	enc := func(f func(e *wire.Enc)) []byte {
		var e wire.Enc
		f(&e)
		return e.B
	}
	for _, tc := range []struct {
		name string
		in   []byte
		read func(d *wire.Dec)
		says string
	}{
		{"short u8", nil, func(d *wire.Dec) { d.U8() }, "need 1 bytes, have 0"},
		{"short u16", []byte{1}, func(d *wire.Dec) { d.U16() }, "need 2 bytes"},
		{"short u32", []byte{1, 2, 3}, func(d *wire.Dec) { d.U32() }, "need 4 bytes"},
		{"short u64", make([]byte, 7), func(d *wire.Dec) { d.U64() }, "need 8 bytes"},
		{"bool 2", []byte{2}, func(d *wire.Dec) { d.Bool() }, "boolean byte 2"},
		{"string over its limit", enc(func(e *wire.Enc) { e.Str(strings.Repeat("x", maxName+1)) }), func(d *wire.Dec) { d.Str(maxName) }, "limit 16"},
		{"string cut short", enc(func(e *wire.Enc) { e.U16(5); e.Raw([]byte("abc")) }), func(d *wire.Dec) { d.Str(maxName) }, "need 5 bytes, have 3"},
		{"string not UTF-8", enc(func(e *wire.Enc) { e.Str("a\xffb") }), func(d *wire.Dec) { d.Str(maxName) }, "not UTF-8"},
		{"bytes over their limit", enc(func(e *wire.Enc) { e.Bytes32(make([]byte, maxBlob+1)) }), func(d *wire.Dec) { d.Bytes32(maxBlob) }, "limit 32"},
		{"bytes counted 2^32-1", enc(func(e *wire.Enc) { e.U32(math.MaxUint32) }), func(d *wire.Dec) { d.Bytes32(math.MaxInt32) }, "limit"},
		{"bytes cut short", enc(func(e *wire.Enc) { e.U32(4); e.Raw([]byte{1}) }), func(d *wire.Dec) { d.Bytes32(maxBlob) }, "need 4 bytes, have 1"},
		{"floats over their limit", enc(func(e *wire.Enc) { e.F32s(make([]float32, maxFloats+1)) }), func(d *wire.Dec) { d.F32s(maxFloats) }, "9 values, limit 8"},
		{"floats cut short", enc(func(e *wire.Enc) { e.U32(2); e.U32(0) }), func(d *wire.Dec) { d.F32s(maxFloats) }, "need 8 bytes, have 4"},
		{"words cut short", make([]byte, 15), func(d *wire.Dec) { d.Words(2) }, "need 16 bytes"},
		{"fixed cut short", []byte{1, 2}, func(d *wire.Dec) { d.Fixed(make([]byte, 3)) }, "need 3 bytes"},
		{"take negative", []byte{1}, func(d *wire.Dec) { d.Take(-1) }, "need -1 bytes"},
		{"count over its limit", enc(func(e *wire.Enc) { e.U32(maxItems + 1); e.Raw(make([]byte, 64)) }), func(d *wire.Dec) { d.Count(maxItems, 2) }, "count 5"},
		// A forged count is refused before anything is allocated for it.
		{"count over the message", enc(func(e *wire.Enc) { e.U32(3); e.Raw(make([]byte, 5)) }), func(d *wire.Dec) { d.Count(maxItems, 2) }, "count 3"},
		{"count 2^32-1", enc(func(e *wire.Enc) { e.U32(math.MaxUint32) }), func(d *wire.Dec) { d.Count(math.MaxInt32, 0) }, "count"},
		{"trailing bytes", []byte{1, 2}, func(d *wire.Dec) { d.U8() }, "1 trailing bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &wire.Dec{B: tc.in}
			tc.read(d)
			err := d.Done()
			if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want ErrMalformed saying %q", err, tc.says)
			}
			// Sticky: later reads give zero values and keep the error.
			first := d.Err
			if d.U8() != 0 || d.U64() != 0 || d.Bool() || d.Str(10) != "" || d.Bytes32(10) != nil || d.Words(1) != nil || d.F32s(1) != nil || d.Count(1, 0) != 0 || d.Take(0) != nil {
				t.Fatal("a read after a failure gave a value")
			}
			d.Fail("later")
			if d.Err != first {
				t.Fatalf("a later failure replaced the first: %v", d.Err)
			}
		})
	}
}

// TestTruncated: every proper prefix of a valid encoding fails, and
// without a panic.
func TestTruncated(t *testing.T) {
	b := sample().encode()
	for n := range len(b) - len(sample().raw) { // the raw tail takes any length
		if _, err := decode(b[:n]); !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("%d of %d bytes: %v", n, len(b), err)
		}
	}
}

// FuzzDecode: no input panics the decoder or makes it allocate beyond its
// bounds, and what decodes encodes back to the same bytes (one encoding
// per value: no leniency a signature could be made to cover twice).
func FuzzDecode(f *testing.F) {
	f.Add(sample().encode())
	f.Add((&record{words: []uint64{0, 0}}).encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decode(b)
		if err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("an error that is not ErrMalformed: %v", err)
			}
			return
		}
		if len(r.name) > maxName || len(r.blob) > maxBlob || len(r.floats) > maxFloats || len(r.items) > maxItems {
			t.Fatalf("decoded beyond a bound: %+v", r)
		}
		if out := r.encode(); !bytes.Equal(out, b) {
			t.Fatalf("decode then encode changed the bytes:\n%x\n%x", b, out)
		}
	})
}
