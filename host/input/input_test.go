package input

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idface/idface/internal/codec/npy"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFormats: the same two templates as .npy, CSV (commas, spaces, a
// header, comments), JSON lines (arrays, objects with ids) and under a
// name that says nothing read alike.
func TestFormats(t *testing.T) {
	want := []float32{0.5, -1, 2, 0.25, 0, -3}
	dir := t.TempDir()
	np := filepath.Join(dir, "x.npy")
	if err := npy.WriteFile(np, &npy.Matrix{Rows: 2, Cols: 3, F64: []float64{0.5, -1, 2, 0.25, 0, -3}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, format string
		ids          []string
	}{
		{np, "npy", nil},
		{write(t, "x.csv", "0.5,-1,2\n0.25, 0 ,-3e0\n"), "csv", nil},
		{write(t, "x.csv", "# numpy.savetxt header\nf0,f1,f2\n0.5,-1,2\r\n0.25,0,-3\n\n\n"), "csv", nil},
		{write(t, "x.txt", "5.000000000000000000e-01 -1.0 2\n0.25\t0 -3\n"), "csv", nil},
		{write(t, "x.jsonl", "[0.5, -1, 2]\n[0.25, 0, -3]\n"), "jsonl", nil},
		{write(t, "x.ndjson", `{"id": "a", "template": [0.5, -1, 2]}`+"\n"+`{"template": [0.25, 0, -3], "id": "b"}`), "jsonl", []string{"a", "b"}},
		{write(t, "x.data", "[0.5, -1, 2]\n[0.25, 0, -3]\n"), "jsonl", nil},
		{write(t, "x.data", "0.5,-1,2\n0.25,0,-3\n"), "csv", nil},
	} {
		tm, err := ReadTemplates(c.path, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		var got []float32
		for i := range tm.Rows() {
			got = append(got, tm.Row(i, nil)...)
		}
		if tm.Format != c.format || tm.Dim() != 3 || !slices.Equal(got, want) || !slices.Equal(tm.IDs, c.ids) {
			t.Errorf("%s: %s %d x %d %v ids %v", filepath.Base(c.path), tm.Format, tm.Rows(), tm.Dim(), got, tm.IDs)
		}
	}
}

// TestMessages: what was wrong and where, in the user's terms (a CSV got
// "npy: not a .npy file (bad magic)"; a blank line shifted every id).
func TestMessages(t *testing.T) {
	long := strings.Repeat("x", 10000)
	for _, c := range []struct {
		name, text string
		dim        int
		want       string
	}{
		{"short.csv", "1,2,3\n1,2,3\n1,2\n", 0, "short.csv line 3: 2 values, want 3 (as on line 1)"},
		{"dim.csv", "1,2,3\n", 4, "dim.csv line 1: 3 values, want 4 (the cluster's dimension)"},
		{"word.csv", "1,2,3\n1,two,3\n", 0, `word.csv line 2: value 2 ("two") is not a number`},
		{"empty.csv", "1,,3\n", 0, "empty.csv line 1: value 2 is empty"},
		{"blank.csv", "1,2\n\n1,2\n", 0, "blank.csv line 2 is blank"},
		{"none.csv", "\n\n", 0, "none.csv holds no template"},
		{"obj.jsonl", `{"id": "a", "templat": [1]}`, 0, `obj.jsonl line 1: unknown field "templat": the fields are "id", "template"`},
		{"str.jsonl", `["1", 2]`, 0, "str.jsonl line 1: template[0] is a string, not a number"},
		{"mixed.jsonl", "{\"id\": \"a\", \"template\": [1, 2]}\n[1, 2]\n", 0, "mixed.jsonl line 2 has no id, line 1 has one: give every line an id or none"},
		{"notmp.jsonl", `{"id": "a"}`, 0, `notmp.jsonl line 1: template is missing`},
		{"empty.jsonl", `[]`, 0, `empty.jsonl line 1: the template holds no values`},
		{"csv.npy", "0.1,0.2\n", 0, "csv.npy is not a .npy file; it looks like CSV text: name it"},
		{"a.npz", "PK\x03\x04rest", 0, "a.npz is a NumPy archive (.npz): save one array with numpy.save"},
		{"long.csv", "1," + strings.Repeat("1", MaxLine) + "\n", 0, "long.csv line 1 is longer than 1048576 bytes"},
	} {
		_, err := ReadTemplates(write(t, c.name, c.text), c.dim)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ name, text, want string }{
		{"blank.txt", "a\n\nb\n", "blank.txt line 2 is blank"},
		{"long.txt", "a\n" + long + "\n", "long.txt line 2: id is 10000 bytes; ids are at most 256 bytes"},
		{"twice.txt", "a\nb\na\r\n", `twice.txt line 3 repeats the id on line 1 ("a")`},
		{"space.txt", "a\nb \n", `space.txt line 2: id "b " ends with a space (U+0020): ids are taken as written, not trimmed; remove it`},
		{"bom.txt", "a\n\ufeffb\n", `bom.txt line 2: id "\ufeffb" contains the control or invisible character U+FEFF`},
		{"ctl.txt", "a\x01b\n", "ctl.txt line 1: id"},
	} {
		_, _, err := ReadIDs(write(t, c.name, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	ids, lines, err := ReadIDs(write(t, "ok.txt", "\ufeffa\r\nb\nc\n\n \n"))
	if err != nil || !slices.Equal(ids, []string{"a", "b", "c"}) || !slices.Equal(lines, []int{1, 2, 3}) {
		t.Errorf("ok.txt: %v %v %v", ids, lines, err)
	}
	if _, err := ReadLabels(write(t, "labels.txt", "p1\n\np1\n")); err == nil || !strings.Contains(err.Error(), "line 2 is blank") {
		t.Errorf("labels with a blank line: %v", err)
	}
}

// TestCheck: a NaN, an infinite value or a zero template named by row
// and index (.npy) or line and value (text).
func TestCheck(t *testing.T) {
	inf := float32(math.Inf(1))
	np := filepath.Join(t.TempDir(), "x.npy")
	if err := npy.WriteFile(np, &npy.Matrix{Rows: 3, Cols: 2, F32: []float32{1, 2, 0, 0, 1, inf}}); err != nil {
		t.Fatal(err)
	}
	tm, err := ReadTemplates(np, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "x.npy row 1: all values are zero", "x.npy row 2: index 1 is infinite"} {
		err := tm.Check(i)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("row %d: %v, want %q", i, err, want)
		}
	}
	tm, err = ReadTemplates(write(t, "x.csv", "# comment\n1,2\n1,NaN\n1,1e300\n"), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "x.csv line 3: value 2 is NaN", "x.csv line 4: value 2 is infinite (or too large for float32)"} {
		err := tm.Check(i)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("line %d: %v, want %q", i, err, want)
		}
	}
	if w := fmt.Sprint(tm.Where(1)); w != "line 3" {
		t.Errorf("Where(1) = %s", w)
	}
}

// TestHelpTexts: the help texts, constants so that no caller can change
// them, state the bounds the code enforces.
func TestHelpTexts(t *testing.T) {
	for _, c := range []struct{ text, says string }{
		{IDRules, fmt.Sprintf("1 to %d bytes", protocol.MaxIDLen)},
		{Formats, fmt.Sprintf("most %d)", template.MaxDim)},
		{Formats, fmt.Sprintf("at most %d values", npy.MaxElems)},
		{Formats, fmt.Sprintf("at most %d MiB", MaxLine>>20)},
	} {
		if !strings.Contains(strings.ReplaceAll(c.text, "\n", " "), c.says) {
			t.Errorf("the help text does not say %q:\n%s", c.says, c.text)
		}
	}
}
