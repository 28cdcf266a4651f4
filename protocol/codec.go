package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("protocol: malformed message")

// enc appends big-endian fields.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *enc) str(s string) { e.u16(uint16(len(s))); e.b = append(e.b, s...) }
func (e *enc) raw(b []byte) { e.b = append(e.b, b...) }
func (e *enc) words(w []uint64) {
	for _, v := range w {
		e.u64(v)
	}
}
func (e *enc) f32s(v []float32) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.u32(math.Float32bits(x))
	}
}

// dec reads fields with bounds checks; the first failure sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
	}
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("need %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}
func (d *dec) u16() uint16 {
	if b := d.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}
func (d *dec) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}
func (d *dec) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}
func (d *dec) bool() bool {
	switch v := d.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("boolean byte %d", v)
		return false
	}
}
func (d *dec) str(max int) string {
	n := int(d.u16())
	if n > max {
		d.fail("string of %d bytes, limit %d", n, max)
		return ""
	}
	b := d.take(n)
	if d.err == nil && !utf8.Valid(b) {
		d.fail("string is not UTF-8")
	}
	return string(b)
}
func (d *dec) words(n int) []uint64 {
	b := d.take(8 * n)
	if b == nil {
		return nil
	}
	w := make([]uint64, n)
	for i := range w {
		w[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return w
}
func (d *dec) f32s(max int) []float32 {
	n := int(d.u32())
	if n > max {
		d.fail("%d values, limit %d", n, max)
		return nil
	}
	b := d.take(4 * n)
	if b == nil {
		return nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.BigEndian.Uint32(b[4*i:]))
	}
	return v
}

// count reads an element count and checks it against max and against the
// bytes left (each element needs at least minSize), so a forged count
// cannot trigger a large allocation.
func (d *dec) count(max, minSize int) int {
	n := int(d.u32())
	if n > max || n*minSize > len(d.b) {
		d.fail("count %d exceeds the limit or the message", n)
		return 0
	}
	return n
}

func (d *dec) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
