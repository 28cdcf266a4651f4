package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// request is an object of the three kinds of field.
type request struct {
	id     string
	tmpl   []float32
	dedupe bool
	fields []Field
}

func newRequest() *request {
	r := &request{}
	r.fields = []Field{
		{Key: "id", Into: &r.id},
		{Key: "template", Into: &r.tmpl, Required: true},
		{Key: "dedupe", Into: &r.dedupe},
	}
	return r
}

// TestObject: what is read as written, and each refusal with the value
// it names.
func TestObject(t *testing.T) {
	r := newRequest()
	if err := Object([]byte("\ufeff "+`{"template": [0.5, -1e-3, 2E2, -0, 1e39, 1e-50], "id": "a\u00e9", "dedupe": true}`+"\r\n\t"), r.fields); err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(1))
	if r.id != "aé" || !r.dedupe || !slices.Equal(r.tmpl, []float32{0.5, -1e-3, 200, 0, inf, 0}) || !r.fields[0].Seen || !r.fields[2].Seen {
		t.Fatalf("read %q %v %v %+v", r.id, r.tmpl, r.dedupe, r.fields)
	}
	r = newRequest()
	if err := Object([]byte(`{"template":[1]}`), r.fields); err != nil || r.fields[0].Seen || r.fields[2].Seen || r.id != "" {
		t.Fatalf("optional fields: %v %+v", err, r.fields)
	}
	for _, c := range []struct{ in, path, says string }{
		{`{"template":[1,null]}`, "template[1]", "template[1] is null, not a number"},
		{`{"template":[1,"2"]}`, "template[1]", "template[1] is a string, not a number"},
		{`{"template":[[1]]}`, "template[0]", "template[0] is an array, not a number"},
		{`{"template":[1,NaN]}`, "template[1]", "template[1] is not a number (syntax error at byte"},
		{`{"template":[1,Infinity]}`, "template[1]", "template[1] is not a number"},
		{`{"template":[1,,2]}`, "template[1]", "template[1] is not a number"},
		{`{"template":[1,2,]}`, "template[2]", "template[2] is not a number"},
		{`{"template":[1,2`, "template[2]", "template[2] is not a number (the JSON is cut short)"},
		{`{"template":null}`, "template", "template is null, not an array of numbers"},
		{`{"template":{}}`, "template", "template is an object, not an array of numbers"},
		{`{"template":[1],"id":null}`, "id", "id is null, not a string"},
		{`{"template":[1],"id":7}`, "id", "id is a number, not a string"},
		{`{"template":[1],"dedupe":null}`, "dedupe", "dedupe is null, not true or false"},
		{`{"template":[1],"dedupe":"true"}`, "dedupe", "dedupe is a string, not true or false"},
		{`{"id":"a"}`, "template", "template is missing"},
		{`{"template":[1],"id":"a","id":"b"}`, "id", `the field "id" appears twice`},
		{`{"id":"a","ID":"b","template":[1]}`, "ID", `the field "ID" repeats "id"`},
		{`{"ID":"b","id":"a","template":[1]}`, "ID", `unknown field "ID": fields are read as written, case included; write "id"`},
		{`{"template":[1],"Template":[2]}`, "Template", `the field "Template" repeats "template"`},
		{`{"id":"a","\u0069d":"b","template":[1]}`, "id", `the field "id" appears twice`},
		{`{"template":[1],"extra":{"deep":[[[[[[]]]]]]}}`, "extra", `unknown field "extra": the fields are "id", "template", "dedupe"`},
		{`{"template":[1]} {}`, "", "data after the JSON object"},
		{`{"template":[1]}x`, "", "data after the JSON object"},
		{`[1]`, "", `an array, not a JSON object {"id", "template", "dedupe"}`},
		{`null`, "", "null, not a JSON object"},
		{``, "", "empty: want a JSON object"},
		{"\ufeff\ufeff{}", "", "not JSON: syntax error at byte 1"},
		{"{\"template\":[1],\"id\":\"\xff\"}", "", "not UTF-8 (byte 23)"},
		{`{"template" [1]}`, "template", "template is not an array of numbers (syntax error at byte 12)"},
		{`{"template":[1],}`, "", "not JSON: syntax error at byte"},
	} {
		r := newRequest()
		err := Object([]byte(c.in), r.fields)
		var e *Error
		if !errors.As(err, &e) || e.Path != c.path || !strings.Contains(e.Msg, c.says) {
			t.Errorf("%s: %v (path %q); want path %q saying %q", c.in, err, pathOf(err), c.path, c.says)
		}
	}
	var n int
	if err := Object([]byte(`{}`), []Field{{Key: "n", Into: &n}}); err == nil || errors.As(err, new(*Error)) {
		t.Errorf("a field Into an *int: %v, want the caller's error", err)
	}
}

func pathOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Path
	}
	return "(not an *Error)"
}

// TestArray: a bare array of numbers, and what it refuses.
func TestArray(t *testing.T) {
	got, err := Array([]byte(" [1, 2.5e0 ,-3] "), "template", []float32{9})
	if err != nil || !slices.Equal(got, []float32{9, 1, 2.5, -3}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := Array([]byte("[]"), "template", nil); err != nil || got != nil {
		t.Fatalf("an empty array: %v %v", got, err)
	}
	for in, says := range map[string]string{
		"[null,null]":       "template[0] is null, not a number",
		"[1,2] [3]":         "data after the JSON array",
		`{"template":[1]}`:  "an object, not a JSON array of numbers",
		"[1,[2]]":           "template[1] is an array, not a number",
		"[1,true]":          "template[1] is a boolean, not a number",
		"[1,0x10]":          "is not a number (syntax error at byte 4)",
		"[1,.5]":            "template[1] is not a number",
		"[1,01]":            "is not a number (syntax error at byte 4)",
		"[1,-]":             "template[1] is not a number",
		"[1,2":              "template[2] is not a number (the JSON is cut short)",
		"\"[1]\"":           "a string, not a JSON array",
		"\x00[1]":           "not JSON: syntax error at byte 1",
		"[1,2]\u00a0":       "data after the JSON array",
		"\u00a0[1,2]":       "not JSON",
		"[1]\n[2]":          "data after the JSON array",
		"[\"\\ud800\", 1]":  "template[0] is a string",
		"[1e999999999999]":  "",
		"[-1e999999999999]": "",
	} {
		_, err := Array([]byte(in), "template", nil)
		if says == "" {
			if err != nil {
				t.Errorf("%q: %v; want ±Inf", in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v; want %q", in, err, says)
		}
	}
}

// FuzzObject: no input panics; whatever Object reads, encoding/json reads
// alike (the same keys once each, the same strings, booleans and
// numbers), so the strict reading only ever refuses more.
func FuzzObject(f *testing.F) {
	for _, s := range []string{
		`{"template":[0.5,-1,2e3],"id":"a","dedupe":false}`,
		`{"template":[1,null]}`, `{"id":"a","ID":"b","template":[1]}`, `{"template":[1]} {}`,
		`{"\u0074emplate":[1e39,-0,1e-50]}`, "\ufeff{\"template\":[]}", `{"template":[1],"id":"\ud83d\ude00"}`,
		`{"template":[3.4028235e38, 3.4028236e38, 1.401298464324817e-45]}`, `[1,2]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newRequest()
		if err := Object(b, r.fields); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Msg == "" {
				t.Fatalf("%q: an error that is not an *Error: %v", b, err)
			}
			return
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(b, []byte("\ufeff"))))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%q: read strictly, refused by encoding/json: %v", b, err)
		}
		for _, f := range r.fields {
			v, ok := m[f.Key]
			if ok != f.Seen {
				t.Fatalf("%q: %s seen %v, encoding/json %v", b, f.Key, f.Seen, ok)
			}
			if !ok {
				continue
			}
			delete(m, f.Key)
			switch into := f.Into.(type) {
			case *string:
				if v != *into {
					t.Fatalf("%q: id %q, encoding/json %q", b, *into, v)
				}
			case *bool:
				if v != *into {
					t.Fatalf("%q: dedupe %v, encoding/json %v", b, *into, v)
				}
			case *[]float32:
				arr, _ := v.([]any)
				if len(arr) != len(*into) {
					t.Fatalf("%q: template of %d, encoding/json %v", b, len(*into), v)
				}
				for i, x := range arr {
					want, _ := strconv.ParseFloat(string(x.(json.Number)), 32)
					if math.Float32bits(float32(want)) != math.Float32bits((*into)[i]) {
						t.Fatalf("%q: template[%d] = %v, encoding/json %v", b, i, (*into)[i], x)
					}
				}
			}
		}
		if len(m) > 0 {
			t.Fatalf("%q: encoding/json read more fields: %v", b, m)
		}
	})
}

// FuzzArray: no input panics; what Array reads, encoding/json reads as
// the same numbers.
func FuzzArray(f *testing.F) {
	for _, s := range []string{`[1,2.5,-3e-2]`, `[null]`, `[1,2] [3]`, `[]`, `[1e39]`, "\ufeff[0]", `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Array(b, "x", nil)
		if err != nil {
			return
		}
		var want []json.Number
		dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(b, []byte("\ufeff"))))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil || len(want) != len(got) {
			t.Fatalf("%q: read %v strictly, encoding/json %v %v", b, got, want, err)
		}
		for i, n := range want {
			v, _ := strconv.ParseFloat(string(n), 32)
			if math.Float32bits(float32(v)) != math.Float32bits(got[i]) {
				t.Fatalf("%q: [%d] = %v, encoding/json %v", b, i, got[i], n)
			}
		}
	})
}
