package gateway_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/host/input"
)

// diffSeeds are lines of a JSON lines file, each also a request body.
var diffSeeds = []string{
	`{"id":"a","template":[0.5,-1,2,0.25]}`,
	`{"template":[0.5,-1,2,0.25]}`,
	`[0.5,-1,2,0.25]`,
	"\ufeff[0.5,-1,2,0.25]  \r",
	` {"template" : [ 1e-3 , 2E2 , -0 , 3 ] } `,
	`[null,null,null,null]`,
	`{"id":"a","template":[0.5,null,2,0.25]}`,
	`{"id":null,"template":[0.5,-1,2,0.25]}`,
	`{"id":"a","template":null}`,
	`{"id":"dup-a","id":"dup-b","template":[0.5,-1,2,0.25]}`,
	`{"id":"dup-a","ID":"dup-b","template":[0.5,-1,2,0.25]}`,
	`{"ID":"a","template":[0.5,-1,2,0.25]}`,
	`{"\u0069d":"a","template":[0.5,-1,2,0.25]}`,
	`{"id":"a","template":[0.5,-1,2,0.25],"template":[1,1,1,1]}`,
	`{"id":"a","template":[0.5,-1,2,0.25],"extra":1}`,
	`{"id":" gw-space ","template":[0.5,-1,2,0.25]}`,
	`{"id":"a\u0000","template":[0.5,-1,2,0.25]}`,
	`{"id":"\ud800","template":[0.5,-1,2,0.25]}`,
	"{\"id\":\"\xff\",\"template\":[0.5,-1,2,0.25]}",
	`{"id":"a","template":[1e39,1,1,1]}`,
	`{"id":"a","template":[3.4028235e38,1,1,1]}`,
	`{"id":"a","template":[1e-50,1,1,1]}`,
	`{"id":"a","template":[0,0,0,0]}`,
	`{"id":"a","template":[NaN,1,1,1]}`,
	`{"id":"a","template":[1,1,1]}`,
	`{"id":"a","template":[1,1,1,1,1]}`,
	`{"id":"a","template":[]}`,
	`{"id":"a","template":[1,1,1,1]} {}`,
	`{"id":"a","template":[1,1,1,[1]]}`,
	`{"id":"a","template":[1,1,1,"1"]}`,
	`{"id":"a","template":[1,1,1,1,]}`,
	`{"id":"a","template":[1,1,1,1]`,
	`{"id":1,"template":[1,1,1,1]}`,
	`[]`,
	`{}`,
	`null`,
	`"a"`,
	``,
}

// FuzzSameAsCLI: the same bytes read by the CLI (one line of a JSON lines
// file, checked as enroll and identify check it) and by the gateway (a
// body of /v1/enroll or /v1/identify; a bare array as the template of an
// identify) give the same id and values or are refused by both.
func FuzzSameAsCLI(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, line string) {
		if strings.Contains(line, "\n") || mentionsDedupe(line) {
			t.Skip("the CLI reads one line; dedupe is the gateway's alone")
		}
		const d = 4
		p := filepath.Join(dir, "x.jsonl")
		if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		tm, cliErr := input.ReadTemplates(p, d)
		if cliErr == nil && tm.Rows() != 1 {
			t.Fatalf("%q: the CLI read %d templates from one line", line, tm.Rows())
		}
		if cliErr == nil {
			cliErr = tm.Check(0)
		}
		enroll, identify := &recorder{}, &recorder{}
		body := line
		if s := strings.TrimLeft(strings.TrimPrefix(line, "\ufeff"), " \t\r"); strings.HasPrefix(s, "[") {
			body = `{"template":` + strings.TrimPrefix(line, "\ufeff") + `}`
		} else {
			post(t, enroll, d, "/v1/enroll", body)
		}
		post(t, identify, d, "/v1/identify", body)
		switch {
		case cliErr != nil:
			if enroll.calls()+identify.calls() > 0 {
				t.Fatalf("%q: the CLI refused it (%v), the gateway took it (enrolled %v, identified %v)", line, cliErr, enroll.enrolled, identify.identified)
			}
		case tm.IDs != nil:
			if len(enroll.enrolled) != 1 || enroll.enrolled[0].ID != tm.IDs[0] || !same(enroll.enrolled[0].Template, tm.Row(0, nil)) || identify.calls() > 0 {
				t.Fatalf("%q: the CLI read id %q %v, the gateway enrolled %v (identified %v)", line, tm.IDs[0], tm.Row(0, nil), enroll.enrolled, identify.identified)
			}
		default:
			if len(identify.identified) != 1 || !same(identify.identified[0], tm.Row(0, nil)) || enroll.calls() > 0 {
				t.Fatalf("%q: the CLI read %v, the gateway identified %v (enrolled %v)", line, tm.Row(0, nil), identify.identified, enroll.enrolled)
			}
		}
	})
}

// mentionsDedupe reports a body with a field the gateway's enroll takes
// and a JSON lines file does not.
func mentionsDedupe(line string) bool {
	var m map[string]json.RawMessage
	json.Unmarshal([]byte(strings.TrimPrefix(line, "\ufeff")), &m)
	for k := range m {
		if strings.EqualFold(k, "dedupe") {
			return true
		}
	}
	return false
}

func same(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
