package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/gateway"
	"github.com/idface/idface/internal/inproc"
	_ "github.com/idface/idface/modes"
)

const dim = 64

// call sends one request and decodes the JSON answer.
func call(t *testing.T, srv *httptest.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: an answer that is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// TestGateway: an operator's gateway enrolls, identifies (accepted with
// the id, or rejected), counts and deletes against a real in-process
// cluster; a device's gateway identifies and is refused the operator's
// operations; bad bodies get clear 4xx answers, never a call.
func TestGateway(t *testing.T) {
	tau := 0.4
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: "2pc", Dim: dim, Tau: &tau, Timeout: config.Duration(10 * time.Second)}, 2))
	op := httptest.NewServer(gateway.Handler(c.Client("client", "p1"), gateway.Options{Dim: dim, Operator: true}))
	defer op.Close()
	dev := httptest.NewServer(gateway.Handler(c.Client("device", "p2"), gateway.Options{Dim: dim}))
	defer dev.Close()

	xs := inproc.Templates(6, dim, 3)
	for i, x := range xs[:5] {
		if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: fmt.Sprintf("person-%d", i), Template: x}); code != 200 || out["enrolled"] != fmt.Sprintf("person-%d", i) {
			t.Fatalf("enroll %d: %d %v", i, code, out)
		}
	}
	if code, out := call(t, op, "GET", "/v1/count", nil); code != 200 || out["count"] != 5.0 {
		t.Fatalf("count: %d %v", code, out)
	}
	for _, g := range []*httptest.Server{op, dev} {
		if code, out := call(t, g, "POST", "/v1/identify", gateway.IdentifyRequest{Template: xs[2]}); code != 200 || out["decision"] != "accepted" || out["id"] != "person-2" {
			t.Fatalf("identify an enrolled person: %d %v", code, out)
		}
		if code, out := call(t, g, "POST", "/v1/identify", gateway.IdentifyRequest{Template: xs[5]}); code != 200 || out["decision"] != "rejected" || out["id"] != nil {
			t.Fatalf("identify a stranger: %d %v", code, out)
		}
		if code, out := call(t, g, "GET", "/v1/health", nil); code != 200 || out["status"] != "ok" || out["mode"] != "2pc" {
			t.Fatalf("health: %d %v", code, out)
		}
	}
	if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: "person-1", Template: xs[5]}); code != http.StatusConflict {
		t.Fatalf("a duplicate id: %d %v", code, out)
	}
	if code, out := call(t, op, "POST", "/v1/delete", gateway.DeleteRequest{ID: "person-2"}); code != 200 || out["deleted"] != "person-2" {
		t.Fatalf("delete: %d %v", code, out)
	}
	if code, out := call(t, op, "POST", "/v1/delete", gateway.DeleteRequest{ID: "person-2"}); code != http.StatusNotFound {
		t.Fatalf("delete an unknown id: %d %v", code, out)
	}
	if code, out := call(t, op, "GET", "/v1/count", nil); code != 200 || out["count"] != 4.0 {
		t.Fatalf("count after a deletion: %d %v", code, out)
	}
	if code, out := call(t, dev, "POST", "/v1/identify", gateway.IdentifyRequest{Template: xs[2]}); code != 200 || out["decision"] != "rejected" {
		t.Fatalf("identify a deleted person: %d %v", code, out)
	}
	for _, path := range []string{"/v1/enroll", "/v1/delete"} {
		if code, out := call(t, dev, "POST", path, gateway.EnrollRequest{ID: "x", Template: xs[0]}); code != http.StatusForbidden || !strings.Contains(fmt.Sprint(out["error"]), "operator") {
			t.Fatalf("a device's %s: %d %v", path, code, out)
		}
	}
	if code, _ := call(t, dev, "GET", "/v1/count", nil); code != http.StatusForbidden {
		t.Fatalf("a device's count: %d", code)
	}

	long := strings.Repeat("1,", dim*200)
	for name, b := range map[string]struct {
		body   string
		status int
		says   string
	}{
		"short":    {`{"template":[1,2,3]}`, 400, "3 numbers"},
		"zero":     {`{"template":[` + strings.TrimSuffix(strings.Repeat("0,", dim), ",") + `]}`, 400, "all-zero"},
		"overflow": {`{"template":[1e39]}`, 400, "not the JSON"},
		"unknown":  {`{"template":[1],"extra":1}`, 400, "unknown field"},
		"trailing": {`{"template":[1]} {}`, 400, "after the JSON"},
		"large":    {`{"template":[` + long + `1]}`, 413, "more than"},
		"not json": {`template=1`, 400, "not the JSON"},
	} {
		code, out := call(t, dev, "POST", "/v1/identify", b.body)
		if code != b.status || !strings.Contains(fmt.Sprint(out["error"]), b.says) {
			t.Errorf("%s: %d %v; want %d saying %q", name, code, out, b.status, b.says)
		}
	}
	if code, out := call(t, op, "POST", "/v1/enroll", `{"id":"","template":[1]}`); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "id") {
		t.Errorf("an empty id: %d %v", code, out)
	}
	if code, _ := call(t, op, "GET", "/v1/identify", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/identify: %d", code)
	}
	if code, out := call(t, op, "GET", "/v2/anything", nil); code != 404 || !strings.Contains(fmt.Sprint(out["error"]), "openapi") {
		t.Errorf("an unknown path: %d %v", code, out)
	}
}

// TestOpenAPIMatchesRoutes: docs/openapi.json describes exactly the
// gateway's routes.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile("../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	served := slices.Sorted(slices.Values(gateway.Routes))
	if !slices.Equal(documented, served) {
		t.Fatalf("docs/openapi.json describes %v; the gateway serves %v", documented, served)
	}
}
