// Package npy reads and writes the NumPy .npy format for the 2-D arrays face
// pipelines produce: float32/float64 templates in, int8 ternary templates
// out. The header is parsed strictly and every size is checked before any
// allocation, so a hostile file gets an error, never a panic or a huge
// allocation.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unsafe"
)

// MaxElems bounds the arrays this package reads (2^31 elements: 8 GiB of
// float32), so a forged shape cannot make it allocate without limit.
const MaxElems = 1 << 31

// Matrix is a row-major N x D array; exactly one of F32, F64, I8 is set.
type Matrix struct {
	Rows, Cols int
	F32        []float32
	F64        []float64
	I8         []int8
}

// Dtype returns the NumPy descr of the matrix.
func (m *Matrix) Dtype() string {
	switch {
	case m.F64 != nil:
		return "<f8"
	case m.I8 != nil:
		return "|i1"
	}
	return "<f4"
}

// RowF64 returns row i as float64 values (float32 or float64 matrices).
func (m *Matrix) RowF64(i int, dst []float64) []float64 {
	dst = dst[:0]
	switch {
	case m.F32 != nil:
		for _, v := range m.F32[i*m.Cols : (i+1)*m.Cols] {
			dst = append(dst, float64(v))
		}
	case m.F64 != nil:
		dst = append(dst, m.F64[i*m.Cols:(i+1)*m.Cols]...)
	case m.I8 != nil:
		for _, v := range m.I8[i*m.Cols : (i+1)*m.Cols] {
			dst = append(dst, float64(v))
		}
	}
	return dst
}

// RowF32 returns row i converted to float32.
func (m *Matrix) RowF32(i int, dst []float32) []float32 {
	dst = dst[:0]
	if m.F32 != nil {
		return append(dst, m.F32[i*m.Cols:(i+1)*m.Cols]...)
	}
	for _, v := range m.RowF64(i, nil) {
		dst = append(dst, float32(v))
	}
	return dst
}

var (
	headerRe = regexp.MustCompile(`^\{\s*'descr'\s*:\s*'([^']*)'\s*,\s*'fortran_order'\s*:\s*(True|False)\s*,\s*'shape'\s*:\s*\(([^)]*)\)\s*,?\s*\}\s*$`)
	magic    = []byte("\x93NUMPY")
)

// ReadFile reads a .npy file; see Read. A file that ends inside its
// header or its data, or holds more after its array, is refused as
// damaged, naming what is wrong.
func ReadFile(path string) (*Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	m, err := read(br, size)
	if err == nil {
		if _, more := br.ReadByte(); more == nil {
			return nil, fmt.Errorf("%s holds data after the %d x %d array its header announces: it is damaged or holds more than one array; save one array with numpy.save", path, m.Rows, m.Cols)
		}
	}
	var te *TruncatedError
	switch {
	case errors.Is(err, ErrShort):
		size := "its"
		if fi, serr := f.Stat(); serr == nil {
			size = fmt.Sprintf("%d", fi.Size())
		}
		return nil, fmt.Errorf("%s ends inside the .npy header (%s bytes): it is empty, cut short or damaged; save it again with numpy.save", path, size)
	case errors.As(err, &te):
		return nil, fmt.Errorf("%s is truncated: %d of %d data bytes present (its header announces %d x %d %s): the file was cut short; copy or save it again",
			path, te.Present, te.Want, te.Rows, te.Cols, te.Dtype)
	case errors.Is(err, ErrNotNpy):
		return nil, fmt.Errorf("%s is not a .npy file: it does not start with the NumPy magic (save templates with numpy.save)", path)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ErrNotNpy is returned for input that does not start with the .npy magic.
var ErrNotNpy = errors.New("npy: not a .npy file (bad magic)")

// ErrShort is returned for input that ends inside the .npy header (an
// empty file among them).
var ErrShort = errors.New("npy: the input ends inside the .npy header")

// TruncatedError reports a file whose data ends before its header's shape.
type TruncatedError struct {
	Present, Want int64 // data bytes present and announced
	Rows, Cols    int
	Dtype         string
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("npy: data truncated: %d of %d data bytes present", e.Present, e.Want)
}

// Read parses a C-order .npy array of dtype <f4, <f8 or |i1 with shape
// (N, D) or (D,) (read as one row). It reads no further than the array's
// last byte; ReadFile refuses a file with more after it.
func Read(r io.Reader) (*Matrix, error) { return read(r, -1) }

// read is Read of an input of size bytes in all (-1: unknown). Where the
// size is known and holds the whole array, the array is allocated once
// at its size and read straight into (the bytes to fill it are there);
// otherwise it grows as bytes arrive, so a header that claims more than
// the input holds gets no memory for the claim.
func read(r io.Reader, size int64) (*Matrix, error) {
	m, descr, consumed, err := readHeader(r)
	if err != nil {
		return nil, err
	}
	n := m.Rows * m.Cols
	// A size that does not cover the array (a file still being written,
	// a file system that reports 0) reads as a stream, which refuses what
	// is really short.
	if elem := elemSize(descr); elem > 0 && size-consumed >= int64(n)*int64(elem) && littleEndian {
		if err := readWhole(r, m, descr, n, elem); err != nil {
			return nil, err
		}
		return m, nil
	}
	err = readStream(r, m, descr, n)
	var te *TruncatedError
	if errors.As(err, &te) {
		te.Rows, te.Cols, te.Dtype = m.Rows, m.Cols, dtypeName(descr)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// readHeader reads the magic, the version and the header: the array's
// shape (in m, with no elements yet), its dtype descr and the bytes
// consumed so far.
func readHeader(r io.Reader) (m *Matrix, descr string, consumed int64, err error) {
	var pre [8]byte
	if n, err := io.ReadFull(r, pre[:]); err != nil {
		if !bytes.HasPrefix(magic, pre[:min(n, len(magic))]) {
			return nil, "", 0, ErrNotNpy
		}
		return nil, "", 0, fmt.Errorf("%w (%d bytes, before the magic and version)", ErrShort, n)
	}
	if string(pre[:6]) != string(magic) {
		return nil, "", 0, ErrNotNpy
	}
	var hlen int
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, "", 0, fmt.Errorf("%w (in the header length)", ErrShort)
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, "", 0, fmt.Errorf("%w (in the header length)", ErrShort)
		}
		hlen = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return nil, "", 0, fmt.Errorf("npy: unsupported format version %d.%d", pre[6], pre[7])
	}
	if hlen > 1<<16 {
		return nil, "", 0, fmt.Errorf("npy: header of %d bytes is implausibly long", hlen)
	}
	consumed = int64(8 + 2 + hlen)
	if pre[6] != 1 {
		consumed += 2
	}
	h := make([]byte, hlen)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, "", 0, fmt.Errorf("%w (in the header)", ErrShort)
	}
	g := headerRe.FindStringSubmatch(strings.TrimRight(string(h), " \n\x00"))
	if g == nil {
		return nil, "", 0, fmt.Errorf("npy: cannot parse header %q", strings.TrimSpace(string(h)))
	}
	if g[2] == "True" {
		return nil, "", 0, errors.New("npy: Fortran-order arrays are not supported; save with np.ascontiguousarray")
	}
	m, err = shape(g[3])
	return m, g[1], consumed, err
}

// shape is the Matrix of a header's shape: (N, d) or one template (d,),
// neither empty nor over MaxElems.
func shape(s string) (*Matrix, error) {
	var dims []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f, "L"))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("npy: bad shape entry %q", f)
		}
		dims = append(dims, n)
	}
	m := &Matrix{}
	switch len(dims) {
	case 1:
		m.Rows, m.Cols = 1, dims[0]
	case 2:
		m.Rows, m.Cols = dims[0], dims[1]
	default:
		return nil, fmt.Errorf("npy: shape %v: want a 2-D array (N, d) or one template (d,)", dims)
	}
	if m.Cols == 0 || m.Rows == 0 {
		return nil, fmt.Errorf("npy: empty array of shape (%d, %d)", m.Rows, m.Cols)
	}
	if m.Rows > MaxElems/m.Cols {
		return nil, fmt.Errorf("npy: shape (%d, %d) is larger than %d elements", m.Rows, m.Cols, MaxElems)
	}
	return m, nil
}

// readStream reads n elements of dtype descr into m as they arrive.
func readStream(r io.Reader, m *Matrix, descr string, n int) error {
	switch descr {
	case "<f4", "=f4":
		m.F32 = make([]float32, 0, min(n, 1<<20))
		return readChunks(r, n, 4, func(b []byte) {
			for i := 0; i < len(b); i += 4 {
				m.F32 = append(m.F32, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
			}
		})
	case "<f8", "=f8":
		m.F64 = make([]float64, 0, min(n, 1<<20))
		return readChunks(r, n, 8, func(b []byte) {
			for i := 0; i < len(b); i += 8 {
				m.F64 = append(m.F64, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
			}
		})
	case "|i1", "<i1", "i1":
		m.I8 = make([]int8, 0, min(n, 1<<20))
		return readChunks(r, n, 1, func(b []byte) {
			for _, v := range b {
				m.I8 = append(m.I8, int8(v))
			}
		})
	}
	return fmt.Errorf("npy: dtype %q not supported: want float32 (<f4), float64 (<f8) or int8", descr)
}

// littleEndian: the host keeps numbers in the file's byte order, so an
// array's bytes can be read into its memory as they are.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// elemSize is the bytes of an element of descr (0: not a dtype read).
func elemSize(descr string) int {
	switch descr {
	case "<f4", "=f4":
		return 4
	case "<f8", "=f8":
		return 8
	case "|i1", "<i1", "i1":
		return 1
	}
	return 0
}

// readWhole reads the n elements of m (dtype descr, elem bytes each)
// straight into the array's memory (a little-endian host), from an input
// whose size read has checked holds them.
func readWhole(r io.Reader, m *Matrix, descr string, n, elem int) error {
	want := int64(n) * int64(elem)
	var b []byte
	switch elem {
	case 4:
		m.F32 = make([]float32, n)
		b = unsafe.Slice((*byte)(unsafe.Pointer(&m.F32[0])), want)
	case 8:
		m.F64 = make([]float64, n)
		b = unsafe.Slice((*byte)(unsafe.Pointer(&m.F64[0])), want)
	default:
		m.I8 = make([]int8, n)
		b = unsafe.Slice((*byte)(unsafe.Pointer(&m.I8[0])), want)
	}
	if got, err := io.ReadFull(r, b); err != nil { // the file shrank since its size was read
		m.F32, m.F64, m.I8 = nil, nil, nil
		return &TruncatedError{Present: int64(got), Want: want, Rows: m.Rows, Cols: m.Cols, Dtype: dtypeName(descr)}
	}
	return nil
}

// dtypeName names a descr as NumPy users know it.
func dtypeName(descr string) string {
	switch strings.TrimLeft(descr, "<=|") {
	case "f4":
		return "float32"
	case "f8":
		return "float64"
	case "i1":
		return "int8"
	}
	return descr
}

// readChunks reads n elements of size bytes in bounded chunks, so a file
// shorter than its header claims fails without allocating the claim. A
// short file gives a *TruncatedError with the bytes present (dtype and
// shape filled in by the caller).
func readChunks(r io.Reader, n, size int, f func([]byte)) error {
	buf := make([]byte, min(n*size, 1<<20)/size*size)
	for left := n * size; left > 0; {
		b := buf[:min(left, len(buf))]
		if got, err := io.ReadFull(r, b); err != nil {
			return &TruncatedError{Present: int64(n*size - left + got), Want: int64(n * size)}
		}
		f(b)
		left -= len(b)
	}
	return nil
}

// Write writes m as a version 1.0 .npy file.
func Write(w io.Writer, m *Matrix) error {
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }", m.Dtype(), m.Rows, m.Cols)
	// magic(6) + version(2) + len(2) + header + '\n' padded to 64 bytes.
	pad := 64 - (10+len(h)+1)%64
	if pad == 64 {
		pad = 0
	}
	h += strings.Repeat(" ", pad) + "\n"
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.Write(magic)
	bw.Write([]byte{1, 0, byte(len(h)), byte(len(h) >> 8)})
	bw.WriteString(h)
	var b [8]byte
	switch {
	case m.F64 != nil:
		for _, v := range m.F64 {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
			bw.Write(b[:])
		}
	case m.I8 != nil:
		for _, v := range m.I8 {
			bw.WriteByte(byte(v))
		}
	default:
		for _, v := range m.F32 {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			bw.Write(b[:4])
		}
	}
	return bw.Flush()
}

// WriteFile writes m to path, syncing it to disk before it returns.
func WriteFile(path string, m *Matrix) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, m); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
