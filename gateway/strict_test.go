package gateway_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idface/idface/gateway"
	"github.com/idface/idface/protocol"
)

// recorder is a Client that records what reached it: the templates
// identified, the items enrolled, the ids deleted.
type recorder struct {
	identified [][]float32
	enrolled   []protocol.Item
	deleted    []string
}

func (r *recorder) Identify(_ context.Context, x []float32, _ int) (*protocol.IdentifyOK, error) {
	r.identified = append(r.identified, x)
	return &protocol.IdentifyOK{}, nil
}
func (r *recorder) Enroll(_ context.Context, items []protocol.Item) error {
	r.enrolled = append(r.enrolled, items...)
	return nil
}
func (r *recorder) Delete(_ context.Context, id string) error {
	r.deleted = append(r.deleted, id)
	return nil
}
func (r *recorder) Health(context.Context, string) (*protocol.HealthOK, error) {
	return &protocol.HealthOK{Name: "p1", Mode: "2pc"}, nil
}
func (r *recorder) Entry() string { return "p1" }
func (r *recorder) IDs(context.Context, string, int) ([]string, bool, error) {
	return nil, false, nil
}
func (r *recorder) Exists(context.Context, string) (bool, error) { return false, nil }

func (r *recorder) calls() int { return len(r.identified) + len(r.enrolled) + len(r.deleted) }

// post sends body to an operator's gateway of dimension d on a Unix
// socket (no Host check, no token) through its handler, in process.
func post(t testing.TB, c gateway.Client, d int, path, body string) (int, map[string]any) {
	t.Helper()
	h, err := gateway.Handler(c, gateway.Options{Dim: d, Operator: true, Listen: "unix:/nonexistent/gate.sock"})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "http://gate"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("POST %s: an answer that is not JSON: %q", path, w.Body.String())
	}
	return w.Code, out
}

// TestGatewayStrictBodies: a repeated field (exactly, or differing in
// case), a case variant, a null and an id with white space at an end
// are refused, naming the field, and nothing reaches the cluster. Before
// (ef9314f) {"id":"dup-a","id":"dup-b",...} enrolled dup-b, and
// /v1/delete {"id":"no-such","id":"bad-9"} deleted bad-9: a proxy or an
// audit log in front saw one id and the cluster acted on another.
func TestGatewayStrictBodies(t *testing.T) {
	const tmpl = `[0.5,0.5,0.5,0.5]`
	for _, c := range []struct{ name, path, body, says string }{
		{"repeated id", "/v1/enroll", `{"id":"dup-a","id":"dup-b","template":` + tmpl + `}`, `the field "id" appears twice`},
		{"case-variant id", "/v1/enroll", `{"id":"dup-a","ID":"dup-b","template":` + tmpl + `}`, `the field "ID" repeats "id"`},
		{"case variant alone", "/v1/enroll", `{"ID":"dup-a","template":` + tmpl + `}`, `unknown field "ID"`},
		{"repeated template", "/v1/enroll", `{"id":"a","template":` + tmpl + `,"template":[1,1,1,1]}`, `the field "template" appears twice`},
		{"null id", "/v1/enroll", `{"id":null,"template":` + tmpl + `}`, "id is null"},
		{"null dedupe", "/v1/enroll", `{"id":"a","template":` + tmpl + `,"dedupe":null}`, "dedupe is null"},
		{"space id", "/v1/enroll", `{"id":" gw-space ","template":` + tmpl + `}`, "space"},
		{"case-variant template", "/v1/identify", `{"Template":` + tmpl + `}`, `unknown field "Template"`},
		{"repeated delete", "/v1/delete", `{"id":"no-such","id":"bad-9"}`, `the field "id" appears twice`},
		{"case-variant delete", "/v1/delete", `{"id":"no-such","Id":"bad-9"}`, `the field "Id" repeats "id"`},
		{"null delete", "/v1/delete", `{"id":null}`, "id is null"},
		{"space delete", "/v1/delete", `{"id":" gw-space "}`, "space"},
	} {
		rec := &recorder{}
		code, out := post(t, rec, 4, c.path, c.body)
		if code != http.StatusBadRequest || !strings.Contains(out["error"].(string), c.says) || rec.calls() > 0 {
			t.Errorf("%s: %d %v, enrolled %v, deleted %q; want 400 saying %q and no call", c.name, code, out, rec.enrolled, rec.deleted, c.says)
		}
	}
}

// FuzzGatewayBodies: no body panics the gateway or reaches the cluster
// unless it is valid, and what reaches it is what any other JSON reader
// (a proxy, an audit log: encoding/json here) reads in the body: the same
// id, the same numbers, no other field.
func FuzzGatewayBodies(f *testing.F) {
	for _, s := range diffSeeds {
		for _, p := range []string{"/v1/identify", "/v1/enroll", "/v1/delete"} {
			f.Add(p, s)
		}
	}
	f.Add("/v1/enroll", `{"id":"a","template":[1,2,3,4],"dedupe":true}`)
	f.Add("/v1/delete", `{"id":"no-such","id":"bad-9"}`)
	f.Add("/v1/delete", `{"id":"a"}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		if path != "/v1/identify" && path != "/v1/enroll" && path != "/v1/delete" {
			t.Skip("one of the bodies the gateway reads")
		}
		const d = 4
		rec := &recorder{}
		code, out := post(t, rec, d, path, body)
		if code != 200 {
			if rec.calls() > 0 || code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge || out["error"] == "" {
				t.Fatalf("%s %q: %d %v after %d calls", path, body, code, out, rec.calls())
			}
			return
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(body, "\ufeff")))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s %q: taken, and encoding/json refuses it: %v", path, body, err)
		}
		var id string
		var tmpl []float32
		switch {
		case len(rec.enrolled) == 1: // after an identify, with dedupe
			id, tmpl = rec.enrolled[0].ID, rec.enrolled[0].Template
		case len(rec.identified) == 1:
			tmpl = rec.identified[0]
		case len(rec.deleted) == 1:
			id = rec.deleted[0]
		default:
			t.Fatalf("%s %q: 200 after %d calls", path, body, rec.calls())
		}
		if path != "/v1/identify" && m["id"] != id {
			t.Fatalf("%s %q: acted on id %q, encoding/json reads %v", path, body, id, m["id"])
		}
		if tmpl != nil {
			arr, _ := m["template"].([]any)
			if len(arr) != d || len(tmpl) != d {
				t.Fatalf("%s %q: acted on %v, encoding/json reads %v", path, body, tmpl, m["template"])
			}
			for i, x := range arr {
				v, _ := strconv.ParseFloat(string(x.(json.Number)), 32)
				if float32(v) != tmpl[i] || math.IsInf(v, 0) {
					t.Fatalf("%s %q: acted on %v, encoding/json reads %v", path, body, tmpl, m["template"])
				}
			}
		}
		delete(m, "id")
		delete(m, "template")
		delete(m, "dedupe")
		if len(m) > 0 {
			t.Fatalf("%s %q: taken with more fields: %v", path, body, m)
		}
	})
}
