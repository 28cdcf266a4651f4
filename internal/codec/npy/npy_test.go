package npy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, m := range []*Matrix{
		{Rows: 2, Cols: 3, F32: []float32{1, -2, 3.5, 0, 1e-7, -9}},
		{Rows: 1, Cols: 2, F64: []float64{1.25, -3}},
		{Rows: 3, Cols: 2, I8: []int8{-1, 0, 1, 1, 0, -1}},
	} {
		var b bytes.Buffer
		if err := Write(&b, m); err != nil {
			t.Fatal(err)
		}
		if (b.Len()-len(m.F32)*4-len(m.F64)*8-len(m.I8))%64 != 0 {
			t.Error("header not padded to 64 bytes")
		}
		// A file (its size known: read straight into the array) and a
		// stream (grown as it arrives) read the same.
		path := filepath.Join(t.TempDir(), "m.npy")
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Read(&b)
		if err != nil {
			t.Fatal(err)
		}
		fromFile, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []*Matrix{got, fromFile} {
			if g.Rows != m.Rows || g.Cols != m.Cols || !slices.Equal(g.F32, m.F32) ||
				!slices.Equal(g.F64, m.F64) || !slices.Equal(g.I8, m.I8) {
				t.Fatalf("round trip: got %+v, want %+v", g, m)
			}
		}
	}
}

// BenchmarkReadFile reads a 10^5 x 512 float32 file (205 MB), as enroll
// reads its templates: allocated once at its size and read straight in.
func BenchmarkReadFile(b *testing.B) {
	m := &Matrix{Rows: 100_000, Cols: 512, F32: make([]float32, 100_000*512)}
	for i := range m.F32 {
		m.F32[i] = float32(i%1000) / 1000
	}
	path := filepath.Join(b.TempDir(), "big.npy")
	if err := WriteFile(path, m); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(m.F32) * 4))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadFile(path); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNumPyInterop(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		t.Skip("numpy not installed")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "a.npy")
	if out, err := exec.Command(py, "-c", "import numpy as np; np.save('"+p+"', np.arange(6, dtype=np.float32).reshape(2,3))").CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	m, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.F32, []float32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("got %v", m.F32)
	}
	q := filepath.Join(dir, "b.npy")
	if err := WriteFile(q, &Matrix{Rows: 1, Cols: 2, I8: []int8{-1, 1}}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", "import numpy as np; a=np.load('"+q+"'); print(a.dtype, a.shape, a.tolist())").CombinedOutput()
	if err != nil || string(out) != "int8 (1, 2) [[-1, 1]]\n" {
		t.Fatalf("numpy read back %q, %v", out, err)
	}
}

func TestRejects(t *testing.T) {
	hdr := func(h string) []byte {
		b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), 0)
		return append(b, h...)
	}
	for name, in := range map[string][]byte{
		"empty":       nil,
		"magic":       []byte("NOTNUMPY\x01\x00"),
		"version":     []byte("\x93NUMPY\x09\x00"),
		"fortran":     hdr("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }"),
		"dtype":       hdr("{'descr': '<c8', 'fortran_order': False, 'shape': (1, 1), }"),
		"3d":          hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1), }"),
		"huge":        hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 512), }"),
		"truncated":   hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 512), }"),
		"garbage":     hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (a, b), }"),
		"zero":        hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 512), }"),
		"big-endian":  hdr("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1), }"),
		"no-shape":    hdr("{'descr': '<f4', 'fortran_order': False}"),
		"negative":    hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }"),
		"short-hlen":  []byte("\x93NUMPY\x01\x00\x05"),
		"short-hdr":   []byte("\x93NUMPY\x01\x00\x50\x00{'descr'"),
		"overflowing": hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"),
	} {
		if _, err := Read(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	Write(&b, &Matrix{Rows: 2, Cols: 2, F32: []float32{1, 2, 3, 4}})
	f.Add(b.Bytes())
	b.Reset()
	Write(&b, &Matrix{Rows: 1, Cols: 3, I8: []int8{1, 0, -1}})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		// Whatever parses must write back and parse to the same matrix.
		var out bytes.Buffer
		if err := Write(&out, m); err != nil {
			t.Fatal(err)
		}
		m2, err := Read(&out)
		if err != nil {
			t.Fatal(err)
		}
		if m2.Rows != m.Rows || m2.Cols != m.Cols || len(m2.F32) != len(m.F32) || len(m2.F64) != len(m.F64) || len(m2.I8) != len(m.I8) {
			t.Fatal("round trip changed the matrix")
		}
	})
}

// TestTruncatedSaysWhatIsThere: a file cut in half names the data bytes
// present and announced (it said "2048000 of 2048000 bytes missing" when
// half was there), and the file's path.
func TestTruncatedSaysWhatIsThere(t *testing.T) {
	m := &Matrix{Rows: 1000, Cols: 512, F32: make([]float32, 1000*512)}
	var b bytes.Buffer
	if err := Write(&b, m); err != nil {
		t.Fatal(err)
	}
	head := b.Len() - 4*len(m.F32)
	path := filepath.Join(t.TempDir(), "half.npy")
	if err := os.WriteFile(path, b.Bytes()[:head+1024000], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	want := path + " is truncated: 1024000 of 2048000 data bytes present (its header announces 1000 x 512 float32)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	// Cut inside a chunk: the partial chunk counts too.
	if err := os.WriteFile(path, b.Bytes()[:head+7], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "7 of 2048000 data bytes present") {
		t.Fatalf("got %v", err)
	}
	if err := os.WriteFile(path, []byte("0.5,0.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), path+" is not a .npy file") {
		t.Fatalf("got %v", err)
	}
}

// TestShortAndLong: a file that ends inside its header (empty, the first
// 5 bytes of the magic, a cut header) is ErrShort, named as damaged with
// its size; one with more after its array is refused. Before, the short
// ones were "file too short for the .npy magic" (which the CLI then
// called CSV text) and the long one was read, its tail ignored.
func TestShortAndLong(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, &Matrix{Rows: 1, Cols: 2, F32: []float32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	whole := b.Bytes()
	for _, n := range []int{0, 5, 8, 9, 20} {
		if _, err := Read(bytes.NewReader(whole[:n])); !errors.Is(err, ErrShort) {
			t.Errorf("%d bytes: %v, want ErrShort", n, err)
		}
		path := filepath.Join(t.TempDir(), "x.npy")
		if err := os.WriteFile(path, whole[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s ends inside the .npy header (%d bytes): it is empty, cut short or damaged; save it again with numpy.save", path, n)
		if _, err := ReadFile(path); err == nil || err.Error() != want {
			t.Errorf("%d bytes: %v, want %q", n, err, want)
		}
	}
	if _, err := Read(bytes.NewReader([]byte("\x00\x01\x02\x03\x04"))); !errors.Is(err, ErrNotNpy) {
		t.Errorf("5 bytes that are no magic: %v, want ErrNotNpy", err)
	}
	path := filepath.Join(t.TempDir(), "long.npy")
	if err := os.WriteFile(path, append(slices.Clone(whole), 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), path+" holds data after the 1 x 2 array its header announces") {
		t.Errorf("a byte after the array: %v", err)
	}
}
