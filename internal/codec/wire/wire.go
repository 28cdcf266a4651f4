// Package wire is the bounded binary codec shared by the wire protocol
// (package protocol) and the storage records (internal/codec/store and the
// engines' log records): big-endian integers, u16-length UTF-8 strings,
// u32-counted lists, each checked against the bytes left so that a forged
// count never causes a large allocation. It has no notion of messages.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed")

// Enc appends big-endian fields to B.
type Enc struct{ B []byte }

func (e *Enc) U8(v uint8)   { e.B = append(e.B, v) }
func (e *Enc) U16(v uint16) { e.B = binary.BigEndian.AppendUint16(e.B, v) }
func (e *Enc) U32(v uint32) { e.B = binary.BigEndian.AppendUint32(e.B, v) }
func (e *Enc) U64(v uint64) { e.B = binary.BigEndian.AppendUint64(e.B, v) }
func (e *Enc) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}

// Str writes a u16 length and the bytes; callers bound len(s) below 65536.
func (e *Enc) Str(s string) { e.U16(uint16(len(s))); e.B = append(e.B, s...) }

// Bytes32 writes a u32 length and the bytes.
func (e *Enc) Bytes32(b []byte) { e.U32(uint32(len(b))); e.B = append(e.B, b...) }
func (e *Enc) Raw(b []byte)     { e.B = append(e.B, b...) }
func (e *Enc) Words(w []uint64) {
	for _, v := range w {
		e.U64(v)
	}
}
func (e *Enc) F32s(v []float32) {
	e.U32(uint32(len(v)))
	for _, x := range v {
		e.U32(math.Float32bits(x))
	}
}

// Dec reads fields with bounds checks; the first failure sticks in Err and
// every later read returns zero values.
type Dec struct {
	B   []byte
	Err error
}

// Fail records a decoding failure (the first one wins).
func (d *Dec) Fail(format string, a ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
	}
}

// Take returns the next n bytes (aliasing the input).
func (d *Dec) Take(n int) []byte {
	if d.Err != nil {
		return nil
	}
	if n < 0 || n > len(d.B) {
		d.Fail("need %d bytes, have %d", n, len(d.B))
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

func (d *Dec) U8() uint8 {
	if b := d.Take(1); b != nil {
		return b[0]
	}
	return 0
}
func (d *Dec) U16() uint16 {
	if b := d.Take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}
func (d *Dec) U32() uint32 {
	if b := d.Take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}
func (d *Dec) U64() uint64 {
	if b := d.Take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}
func (d *Dec) Bool() bool {
	switch v := d.U8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.Fail("boolean byte %d", v)
		return false
	}
}

// Str reads a u16-length UTF-8 string of at most max bytes.
func (d *Dec) Str(max int) string {
	n := int(d.U16())
	if n > max {
		d.Fail("string of %d bytes, limit %d", n, max)
		return ""
	}
	b := d.Take(n)
	if d.Err == nil && !utf8.Valid(b) {
		d.Fail("string is not UTF-8")
	}
	return string(b)
}

// Bytes32 reads a u32-length byte string of at most max bytes (copied).
func (d *Dec) Bytes32(max int) []byte {
	n := d.U32()
	if int64(n) > int64(max) { // compared before int(n), negative on 32-bit platforms
		d.Fail("%d bytes, limit %d", n, max)
		return nil
	}
	return append([]byte(nil), d.Take(int(n))...)
}

// Fixed copies exactly len(dst) bytes into dst.
func (d *Dec) Fixed(dst []byte) { copy(dst, d.Take(len(dst))) }

// Words reads n big-endian words.
func (d *Dec) Words(n int) []uint64 {
	b := d.Take(8 * n)
	if b == nil {
		return nil
	}
	w := make([]uint64, n)
	for i := range w {
		w[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return w
}

// F32s reads a u32-counted list of at most max float32 values.
func (d *Dec) F32s(max int) []float32 {
	u := d.U32()
	if int64(u) > int64(max) {
		d.Fail("%d values, limit %d", u, max)
		return nil
	}
	n := int(u)
	b := d.Take(4 * n)
	if b == nil {
		return nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.BigEndian.Uint32(b[4*i:]))
	}
	return v
}

// Count reads an element count and checks it against max and against the
// bytes left (each element needs at least minSize), so a forged count
// cannot trigger a large allocation.
func (d *Dec) Count(max, minSize int) int {
	n := int64(d.U32())
	if n > int64(max) || n*int64(minSize) > int64(len(d.B)) {
		d.Fail("count %d exceeds the limit or the message", n)
		return 0
	}
	return int(n)
}

// Done fails on trailing bytes and returns the first error.
func (d *Dec) Done() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
	return d.Err
}
