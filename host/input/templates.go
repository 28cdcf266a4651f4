// Package input reads what an operator hands to the CLI: templates as
// .npy, CSV or JSON lines, and lists of ids or labels, one per line. Every
// message names the file and the row or line in the user's terms and says
// what to do; no template value is ever printed.
package input

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idface/idface/internal/codec/npy"
	"github.com/idface/idface/internal/codec/strictjson"
)

// MaxLine bounds one line of a CSV, JSON lines, ids or labels file.
const MaxLine = 1 << 20

// Formats is the help text of the template formats, for --help. A
// constant, so that no caller changes it; the bounds are template.MaxDim
// and npy.MaxElems (TestHelpTexts).
const Formats = "Templates: .npy (float32 or float64, one row per template), CSV (.csv,\n" +
	".tsv, .txt: one template per line, values separated by commas or white\n" +
	"space, as numpy.savetxt writes; lines starting with # and a first line\n" +
	"without numbers, a header, are skipped) or JSON lines (.jsonl, .ndjson:\n" +
	"one template per line, a bare array [0.1, ...] or an object\n" +
	"{\"id\": \"...\", \"template\": [0.1, ...]}; every line has an id or none;\n" +
	"read as written, as the gateway reads its bodies: a null, a field given\n" +
	"twice or also in another case (\"ID\"), or any other field is refused).\n" +
	"Other names are recognised by their content. Blank lines are refused\n" +
	"(they would shift every later template against its id), except at the\n" +
	"end; a line is at most 1 MiB. Values must be finite and a template not\n" +
	"all zeros; a template has the cluster's dimension d (512 by default, at\n" +
	"most 4096) and a file at most 2147483648 values in all. A file with a\n" +
	"line it cannot read is refused whole, naming the line and the value."

// Templates is a file of templates, one per row.
type Templates struct {
	Path   string
	Format string // "npy", "csv" or "jsonl"
	M      *npy.Matrix
	// IDs are the ids of a JSON lines file whose objects carry them; nil
	// otherwise.
	IDs   []string
	lines []int // the line of each row (csv, jsonl)
}

// Rows is the number of templates; Dim their dimension.
func (t *Templates) Rows() int { return t.M.Rows }
func (t *Templates) Dim() int  { return t.M.Cols }

// Row returns template i as float32.
func (t *Templates) Row(i int, dst []float32) []float32 { return t.M.RowF32(i, dst) }

// Where names template i in the file: "row 17" of a .npy (numbered from
// 0, as NumPy does), "line 18" of a text file.
func (t *Templates) Where(i int) string {
	if t.lines != nil {
		return fmt.Sprintf("line %d", t.lines[i])
	}
	return fmt.Sprintf("row %d", i)
}

// Line is the line of template i in a text file (0 in a .npy).
func (t *Templates) Line(i int) int {
	if t.lines == nil {
		return 0
	}
	return t.lines[i]
}

// Check reports a template the cluster would refuse: a value that is NaN
// or infinite (also a value too large for float32), or all zeros.
func (t *Templates) Check(i int) error {
	x := t.Row(i, nil)
	if err := CheckTemplate(x); err != nil {
		return fmt.Errorf("%s %s: %w", t.Path, t.Where(i), t.valueName(err))
	}
	return nil
}

// valueName numbers a bad value as the file's users do: index j (from 0)
// of a .npy row, value j+1 of a text line.
func (t *Templates) valueName(err error) error {
	var be *BadValue
	if !errors.As(err, &be) {
		return err
	}
	if t.lines != nil {
		return fmt.Errorf("value %d %s", be.Index+1, be.What)
	}
	return fmt.Errorf("index %d %s", be.Index, be.What)
}

// BadValue is a template value the cluster refuses.
type BadValue struct {
	Index int // from 0
	What  string
}

func (e *BadValue) Error() string { return fmt.Sprintf("value at index %d %s", e.Index, e.What) }

// ErrZero is a template of zeros only: it has no direction to compare.
var ErrZero = errors.New("all values are zero (a zero vector has no direction to compare)")

// CheckTemplate reports a NaN or infinite value (a *BadValue) or an
// all-zero template (ErrZero).
func CheckTemplate(x []float32) error {
	zero := true
	for j, v := range x {
		f := float64(v)
		switch {
		case math.IsNaN(f):
			return &BadValue{j, "is NaN: templates hold finite numbers"}
		case math.IsInf(f, 0):
			return &BadValue{j, "is infinite (or too large for float32): templates hold finite numbers"}
		case v != 0:
			zero = false
		}
	}
	if zero {
		return ErrZero
	}
	return nil
}

// ReadTemplates reads a template file. dim > 0 is the dimension every
// template must have (the cluster's); with 0 the first template sets it.
// The format comes from the name (.npy; .csv, .tsv, .txt; .jsonl, .ndjson,
// .json) or, for other names, from the content.
func ReadTemplates(path string, dim int) (*Templates, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	format := formatOf(path)
	head, _ := r.Peek(512)
	if format == "" {
		format = sniff(head)
	}
	t := &Templates{Path: path, Format: format}
	switch format {
	case "npz":
		return nil, fmt.Errorf("%s is a NumPy archive (.npz): save one array with numpy.save to a .npy file", path)
	case "npy":
		if t.M, err = npy.ReadFile(path); err != nil {
			// A .npy name on text: say which text, so the fix is a
			// rename. Anything else (empty, cut short, binary) is a
			// damaged .npy, as ReadFile says.
			if s := sniff(head); s != "npy" && s != "npz" && isText(head) {
				return nil, fmt.Errorf("%s is not a .npy file; it looks like %s text: name it %s", path, strings.ToUpper(s), strings.TrimSuffix(path, filepath.Ext(path))+"."+s)
			}
			return nil, err
		}
	case "csv", "jsonl":
		if err := t.readText(r, dim); err != nil {
			return nil, err
		}
	}
	if dim > 0 && t.M.Cols != dim {
		return nil, fmt.Errorf("%s: templates have dimension %d, the cluster uses %d", path, t.M.Cols, dim)
	}
	return t, nil
}

func formatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		return "npy"
	case ".npz":
		return "npz"
	case ".csv", ".tsv", ".txt":
		return "csv"
	case ".jsonl", ".ndjson", ".json":
		return "jsonl"
	}
	return ""
}

// sniff tells the format from a file's first bytes.
func sniff(head []byte) string {
	if bytes.HasPrefix(head, []byte("\x93NUMPY")) {
		return "npy"
	}
	if bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return "npz"
	}
	if s := bytes.TrimLeft(head, " \t\r\n\ufeff"); len(s) > 0 && (s[0] == '[' || s[0] == '{') {
		return "jsonl"
	}
	return "csv"
}

// isText reports a file's first bytes that are text with a number in it:
// UTF-8 (perhaps cut inside a character at the end), no control
// characters but tabs and line breaks.
func isText(head []byte) bool {
	digit := false
	for len(head) > 0 {
		r, n := utf8.DecodeRune(head)
		switch {
		case r == utf8.RuneError && n <= 1 && !utf8.FullRune(head):
			return digit // a character cut by the peek
		case r == utf8.RuneError && n <= 1:
			return false
		case r >= '0' && r <= '9':
			digit = true
		case unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r':
			return false
		}
		head = head[n:]
	}
	return digit
}

// readText reads CSV or JSON lines into a float32 matrix.
func (t *Templates) readText(r io.Reader, dim int) error {
	m := &npy.Matrix{Cols: dim}
	dimLine := 0 // the line that set the dimension
	header := t.Format == "csv"
	withIDs := -1 // JSON lines: 1 when the first template had an id, 0 when not
	var vals []float32
	err := Lines(r, t.Path, func(n int, line string) error {
		var err error
		var id *string
		if t.Format == "csv" {
			if line = trimmed(line); strings.HasPrefix(line, "#") {
				return nil
			}
			if header && isHeader(line) {
				header = false
				return nil
			}
			vals, err = parseCSV(line, vals[:0])
		} else {
			vals, id, err = parseJSON(line, vals[:0])
		}
		header = false
		if err != nil {
			return fmt.Errorf("%s line %d: %w", t.Path, n, err)
		}
		if len(vals) == 0 {
			return fmt.Errorf("%s line %d: the template holds no values", t.Path, n)
		}
		if t.Format == "jsonl" {
			has := 0
			if id != nil {
				has = 1
				t.IDs = append(t.IDs, *id)
			}
			switch {
			case withIDs < 0:
				withIDs = has
			case has == 1 && withIDs == 0:
				return fmt.Errorf("%s line %d has an id, line %d has none: give every line an id or none", t.Path, n, t.lines[0])
			case has == 0 && withIDs == 1:
				return fmt.Errorf("%s line %d has no id, line %d has one: give every line an id or none", t.Path, n, t.lines[0])
			}
		}
		switch {
		case m.Cols == 0:
			m.Cols, dimLine = len(vals), n
		case len(vals) != m.Cols && dimLine > 0:
			return fmt.Errorf("%s line %d: %d values, want %d (as on line %d)", t.Path, n, len(vals), m.Cols, dimLine)
		case len(vals) != m.Cols:
			return fmt.Errorf("%s line %d: %d values, want %d (the cluster's dimension)", t.Path, n, len(vals), m.Cols)
		}
		if m.Rows >= npy.MaxElems/max(m.Cols, 1) {
			return fmt.Errorf("%s line %d: more than %d values in all; split the file", t.Path, n, npy.MaxElems)
		}
		m.F32 = append(m.F32, vals...)
		m.Rows++
		t.lines = append(t.lines, n)
		return nil
	})
	if err != nil {
		return err
	}
	if m.Rows == 0 {
		return fmt.Errorf("%s holds no template", t.Path)
	}
	if withIDs == 0 {
		t.IDs = nil
	}
	if m.F32 == nil {
		m.F32 = []float32{}
	}
	t.M = m
	return nil
}

// isHeader reports a CSV line none of whose fields is a number.
func isHeader(line string) bool {
	for _, f := range splitCSV(line) {
		if _, err := strconv.ParseFloat(strings.TrimSpace(f), 64); err == nil {
			return false
		}
	}
	return true
}

func splitCSV(line string) []string {
	if strings.Contains(line, ",") {
		return strings.Split(line, ",")
	}
	return strings.Fields(line)
}

// parseCSV parses one line of numbers separated by commas, or by white
// space when the line has no comma. A value beyond float32's range reads
// as an infinity, which Check refuses with its line and value.
func parseCSV(line string, dst []float32) ([]float32, error) {
	for k, f := range splitCSV(line) {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseFloat(f, 32)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			if f == "" {
				return nil, fmt.Errorf("value %d is empty", k+1)
			}
			return nil, fmt.Errorf("value %d (%.20q) is not a number", k+1, f)
		}
		dst = append(dst, float32(v))
	}
	return dst, nil
}

// parseJSON parses one JSON line, strictly (strictjson): an array of
// numbers, or an object with "template" and an optional "id", which is
// checked (CheckID). A null, a repeated field (also differing in case),
// an unknown field or anything after the value is refused, naming the
// field or element.
func parseJSON(line string, dst []float32) ([]float32, *string, error) {
	if s := strings.TrimLeft(strings.TrimPrefix(line, bom), " \t\r"); strings.HasPrefix(s, "[") {
		vals, err := strictjson.Array([]byte(line), "template", dst)
		return vals, nil, err
	}
	var id string
	fields := []strictjson.Field{
		{Key: "id", Into: &id},
		{Key: "template", Into: &dst, Required: true},
	}
	if err := strictjson.Object([]byte(line), fields); err != nil {
		return nil, nil, err
	}
	if !fields[0].Seen {
		return dst, nil, nil
	}
	if err := CheckID(id); err != nil {
		return nil, nil, fmt.Errorf("id: %w", err)
	}
	return dst, &id, nil
}
