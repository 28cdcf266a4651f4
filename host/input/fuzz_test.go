package input

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idface/idface/internal/codec/npy"
)

// The fuzz tests run each reader on arbitrary bytes: none panics, and
// what one reads is what the file says (written out again and read back,
// it is the same; an id is its line as written).

// fuzzRead writes b under name in dir and reads it as templates.
func fuzzRead(t *testing.T, dir, name string, b []byte) (*Templates, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadTemplates(p, 0)
}

// seeds adds each string as a seed.
func seeds(f *testing.F, ss ...string) {
	for _, s := range ss {
		f.Add([]byte(s))
	}
}

// readBack reads b under name; what it reads must have its shape (nil
// when refused).
func readBack(t *testing.T, dir, name string, b []byte) *Templates {
	t.Helper()
	tm, err := fuzzRead(t, dir, name, b)
	if err != nil {
		return nil
	}
	checkShape(t, tm, b)
	return tm
}

// sameRows reports whether two readings hold the same values bit for bit
// (any NaN equal to any NaN: a text file writes one NaN).
func sameRows(a, b *Templates) bool {
	if a.Rows() != b.Rows() || a.Dim() != b.Dim() {
		return false
	}
	for i := range a.Rows() {
		x, y := a.Row(i, nil), b.Row(i, nil)
		for j := range x {
			if math.Float32bits(x[j]) != math.Float32bits(y[j]) && !(x[j] != x[j] && y[j] != y[j]) {
				return false
			}
		}
	}
	return true
}

// checkShape: every row has Dim values, and a text file's rows each have
// a line, in order.
func checkShape(t *testing.T, tm *Templates, b []byte) {
	t.Helper()
	if tm.Rows() < 1 || tm.Dim() < 1 {
		t.Fatalf("%q: read %d x %d", b, tm.Rows(), tm.Dim())
	}
	for i := range tm.Rows() {
		if n := len(tm.Row(i, nil)); n != tm.Dim() {
			t.Fatalf("%q: row %d has %d values of %d", b, i, n, tm.Dim())
		}
	}
	if tm.IDs != nil && len(tm.IDs) != tm.Rows() {
		t.Fatalf("%q: %d ids for %d rows", b, len(tm.IDs), tm.Rows())
	}
	for i := 1; i < tm.Rows() && tm.Format != "npy"; i++ {
		if tm.Line(i) <= tm.Line(i-1) {
			t.Fatalf("%q: row %d on line %d after line %d", b, i, tm.Line(i), tm.Line(i-1))
		}
	}
}

func FuzzReadNpy(f *testing.F) {
	dir := f.TempDir()
	for _, m := range []*npy.Matrix{
		{Rows: 2, Cols: 3, F32: []float32{1, 2, 3, 4, 5, float32(math.NaN())}},
		{Rows: 1, Cols: 2, F64: []float64{0.5, -1e300}},
		{Rows: 1, Cols: 3, I8: []int8{-1, 0, 1}},
	} {
		p := filepath.Join(dir, "seed.npy")
		if err := npy.WriteFile(p, m); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(b, 0))
		f.Add(b[:5])
	}
	f.Add([]byte{})
	f.Add([]byte("\x93NUMPY\x01\x00\xff\xff"))
	f.Add([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff"))
	f.Add([]byte("\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', 'fortran_order': False, 'shape': (99999999, 99999999), }\n"))
	f.Add([]byte("0.1,0.2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, err := fuzzRead(t, dir, "x.npy", b)
		if err != nil {
			if !strings.Contains(err.Error(), "x.npy") {
				t.Fatalf("%q: a refusal that does not name the file: %v", b, err)
			}
			return
		}
		checkShape(t, tm, b)
		again := filepath.Join(dir, "again.npy")
		if err := npy.WriteFile(again, tm.M); err != nil {
			t.Fatal(err)
		}
		if tm2, err := ReadTemplates(again, 0); err != nil || !sameRows(tm, tm2) {
			t.Fatalf("%q: written again and read back: %v", b, err)
		}
	})
}

// text writes tm as CSV or, with ids, as JSON lines objects (values that
// JSON cannot hold, as null: such a file must then be refused).
func text(tm *Templates, format string) []byte {
	var sb strings.Builder
	for i := range tm.Rows() {
		var vals []string
		for _, v := range tm.Row(i, nil) {
			s := strconv.FormatFloat(float64(v), 'g', -1, 32)
			if format == "jsonl" && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
				s = "null"
			}
			vals = append(vals, s)
		}
		switch {
		case format == "csv":
			sb.WriteString(strings.Join(vals, ",") + "\n")
		case tm.IDs != nil:
			id, _ := json.Marshal(tm.IDs[i])
			sb.WriteString(`{"id":` + string(id) + `,"template":[` + strings.Join(vals, ",") + "]}\n")
		default:
			sb.WriteString("[" + strings.Join(vals, ",") + "]\n")
		}
	}
	return []byte(sb.String())
}

func FuzzReadCSV(f *testing.F) {
	dir := f.TempDir()
	seeds(f, "0.5,-1,2\n0.25, 0 ,-3e0\n", "# c\nf0,f1\n1,2\r\n3,4\n\n\n", "1 2\t3\n", "\ufeff1,2\n", "1,,3\n", "1,2\n\n1,2\n",
		"1,2,3\n1,2\n", "NaN,1\ninf,-Infinity\n1e39,1e-50\n", "0x1p-2,1_0\n", "1,2,\n", "null,1\n", "\u00a01,2\u00a0\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		tm := readBack(t, dir, "x.csv", b)
		if tm == nil {
			return
		}
		tm2, err := fuzzRead(t, dir, "again.csv", text(tm, "csv"))
		if err != nil || !sameRows(tm, tm2) {
			t.Fatalf("%q: written again and read back: %v", b, err)
		}
	})
}

func FuzzReadJSONLines(f *testing.F) {
	dir := f.TempDir()
	seeds(f, "[0.5,-1,2]\n[0.25,0,-3]\n", `{"id":"a","template":[1,2]}`+"\n"+`{"template":[3,4],"id":"b"}`+"\n",
		"[1,2]\n[null,null]\n", `{"id":"a","template":[1,null]}`, `{"id":"a","id":"b","template":[1]}`, `{"id":"a","ID":"b","template":[1]}`,
		`{"id":" a ","template":[1]}`, `{"id":"a","template":[1]}`+"\n[1]\n", "\ufeff[1e39,1e-50]\r\n", "[1,2] [3]\n", "[]\n",
		`{"id":"a","template":[1],"extra":0}`, "{\"id\":\"\xff\",\"template\":[1]}", `{"id":"\u0000","template":[1]}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		tm := readBack(t, dir, "x.jsonl", b)
		if tm == nil {
			return
		}
		for i := range tm.Rows() {
			for _, v := range tm.Row(i, nil) {
				if math.IsNaN(float64(v)) {
					t.Fatalf("%q: row %d holds a NaN, which JSON cannot write", b, i)
				}
			}
		}
		for i, id := range tm.IDs {
			if err := CheckID(id); err != nil {
				t.Fatalf("%q: id %d %q read, and CheckID refuses it: %v", b, i, id, err)
			}
		}
		again, err := fuzzRead(t, dir, "again.jsonl", text(tm, "jsonl"))
		finite := true
		for i := range tm.Rows() {
			finite = finite && !infinite(tm.Row(i, nil))
		}
		switch {
		case !finite && err == nil:
			t.Fatalf("%q: an infinity written as null was read back", b)
		case finite && (err != nil || !sameRows(tm, again) || strings.Join(tm.IDs, "\n") != strings.Join(again.IDs, "\n")):
			t.Fatalf("%q: written again and read back: %v", b, err)
		}
	})
}

func infinite(x []float32) bool {
	for _, v := range x {
		if math.IsInf(float64(v), 0) {
			return true
		}
	}
	return false
}

func FuzzReadIDs(f *testing.F) {
	dir := f.TempDir()
	seeds(f, "a\nb\nc\n", "\ufeffa\r\nb\n\n\n", "a\n\nb\n", " gw-space \n", "a\nb\na\n", "a\x01b\n", "e\u0301\n", "\ufeff\n", "\u00a0b\n", "a\tb\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "ids.txt")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ids, lines, err := ReadIDs(p)
		if err != nil {
			return
		}
		file := strings.Split(string(b), "\n")
		seen := map[string]bool{}
		for i, id := range ids {
			want := strings.TrimSuffix(file[lines[i]-1], "\r")
			if lines[i] == 1 {
				want = strings.TrimPrefix(want, "\ufeff")
			}
			if id != want || CheckID(id) != nil || seen[id] {
				t.Fatalf("%q: id %d %q is not line %d as written (%q), or refused, or repeated", b, i, id, lines[i], want)
			}
			seen[id] = true
		}
	})
}
