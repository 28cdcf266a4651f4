package input

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/internal/codec/npy"
)

// nums is a JSON array of n copies of v.
func nums(n int, v string) string {
	return "[" + strings.TrimSuffix(strings.Repeat(v+",", n), ",") + "]"
}

// TestNullLine: a line of nulls after a good line is refused, naming the
// line and the element. Before (ef9314f), the reused value buffer kept
// line 1's values, and line 2 answered (or enrolled) as person-0.
func TestNullLine(t *testing.T) {
	for name, text := range map[string]string{
		"array":  nums(512, "0.5") + "\n" + nums(512, "null") + "\n",
		"object": `{"id":"person-0","template":` + nums(512, "0.5") + "}\n" + `{"id":"person-1","template":` + nums(512, "null") + "}\n",
	} {
		tm, err := ReadTemplates(write(t, name+".jsonl", text), 512)
		if err == nil {
			t.Errorf("%s: line 2 of nulls read as %d templates, row 2 starting %v", name, tm.Rows(), tm.Row(tm.Rows()-1, nil)[:2])
			continue
		}
		if !strings.Contains(err.Error(), "line 2: template[0] is null") {
			t.Errorf("%s: %v, want it to name line 2 and template[0] as null", name, err)
		}
	}
}

// TestStrictLines: what a JSON lines reader must refuse, naming the line
// and the field; before (ef9314f) each was read, the object's null as 0,
// a repeated key's last value, a case variant as the field.
func TestStrictLines(t *testing.T) {
	good := nums(4, "0.5")
	for _, c := range []struct{ name, line, says string }{
		{"object null", `{"id":"a","template":[0.5,null,0.5,0.5]}`, "line 2: template[1] is null"},
		{"null id", `{"id":null,"template":` + good + `}`, "line 2: id is null"},
		{"null template", `{"id":"a","template":null}`, "line 2: template is null"},
		{"repeated id", `{"id":"dup-a","id":"dup-b","template":` + good + `}`, `line 2: the field "id" appears twice`},
		{"case-variant id", `{"id":"dup-a","ID":"dup-b","template":` + good + `}`, `line 2: the field "ID" repeats "id"`},
		{"case-variant only", `{"ID":"a","template":` + good + `}`, `line 2: unknown field "ID"`},
		{"repeated template", `{"id":"a","template":` + good + `,"template":` + nums(4, "1") + `}`, `line 2: the field "template" appears twice`},
		{"unknown field", `{"id":"a","template":` + good + `,"dedupe":true}`, `line 2: unknown field "dedupe"`},
		{"space id", `{"id":" gw-space ","template":` + good + `}`, "line 2: id"},
	} {
		first := `{"id":"first","template":` + good + "}\n"
		if _, err := ReadTemplates(write(t, "x.jsonl", first+c.line+"\n"), 4); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %q", c.name, err, c.says)
		}
	}
}

// TestIDsAsWritten: an id with white space at either end is refused in
// an ids file, as at the gateway; before (ef9314f) the file's " gw-space "
// was trimmed, so `delete --ids` could not name what the gateway enrolled.
func TestIDsAsWritten(t *testing.T) {
	for _, text := range []string{" gw-space \n", "a\ngw-space \n", "a\n\u00a0b\n"} {
		if ids, _, err := ReadIDs(write(t, "ids.txt", text)); err == nil || !strings.Contains(err.Error(), "space") {
			t.Errorf("%q: %q, %v; want a refusal naming the space", text, ids, err)
		}
	}
	if err := CheckID(" gw-space "); err == nil {
		t.Error(`CheckID(" gw-space ") took it`)
	}
}

// TestShortNpy: a .npy of 0 or 5 bytes (or a cut header) is named as a
// damaged .npy, not as CSV text; data after the array is refused.
// Before (ef9314f) both short files were "CSV text".
func TestShortNpy(t *testing.T) {
	for name, b := range map[string]string{
		"empty.npy": "",
		"five.npy":  "\x93NUMP",
		"junk5.npy": "\x00\x01\x02\x03\x04",
		"cut.npy":   "\x93NUMPY\x01\x00\x76",
	} {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadTemplates(p, 0)
		if err == nil || strings.Contains(err.Error(), "CSV") || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "numpy.save") {
			t.Errorf("%s: %v; want it named a damaged .npy, saved again with numpy.save", name, err)
		}
	}
	// A whole .npy with more data after the array its header announces.
	p := filepath.Join(t.TempDir(), "long.npy")
	if err := npy.WriteFile(p, &npy.Matrix{Rows: 1, Cols: 2, F32: []float32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 128, 63}) // one more float32
	f.Close()
	if tm, err := ReadTemplates(p, 0); err == nil || !strings.Contains(err.Error(), "after the 1 x 2 array") {
		t.Errorf("a .npy with data after its array: %v, %v; want a refusal", tm, err)
	}
}
