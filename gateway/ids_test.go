package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/gateway"
	"github.com/idface/idface/harness/inproc"
)

// TestGatewayIDs (issue 47 item 3): an operator's gateway lists the
// enrolled ids a page at a time (GET /v1/ids) and says whether one is
// enrolled (GET /v1/exists), against a real in-process cluster; a
// device's gateway is refused both; a query is read as strictly as a
// body.
func TestGatewayIDs(t *testing.T) {
	tau := 0.4
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: "2pc", Dim: dim, Tau: &tau, Timeout: config.Duration(10 * time.Second)}, 2))
	op := serve(t, c.Client("client", "p1"), gateway.Options{Dim: dim, Operator: true, Token: []byte(token)})
	dev := serve(t, c.Client("device", "p2"), gateway.Options{Dim: dim, Name: "device"})
	if code, out := call(t, op, "GET", "/v1/ids", nil); code != 200 || fmt.Sprint(out["ids"]) != "[]" || out["more"] != false {
		t.Fatalf("no ids: %d %v", code, out)
	}
	for i, x := range inproc.Templates(5, dim, 3) {
		if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: fmt.Sprintf("person-%d", i), Template: x}); code != 200 {
			t.Fatalf("enroll %d: %d %v", i, code, out)
		}
	}
	if code, out := call(t, op, "POST", "/v1/delete", gateway.DeleteRequest{ID: "person-2"}); code != 200 {
		t.Fatalf("delete: %d %v", code, out)
	}
	for _, p := range []struct{ path, ids, after string }{
		{"/v1/ids", "[person-0 person-1 person-3 person-4]", ""},
		{"/v1/ids?limit=3", "[person-0 person-1 person-3]", "person-3"},
		{"/v1/ids?limit=3&after=person-3", "[person-4]", ""},
		{"/v1/ids?after=person-0&limit=1", "[person-1]", "person-1"},
	} {
		code, out := call(t, op, "GET", p.path, nil)
		after, _ := out["after"].(string)
		if code != 200 || fmt.Sprint(out["ids"]) != p.ids || out["more"] != (p.after != "") || after != p.after {
			t.Errorf("%s: %d %v; want ids %s after %q", p.path, code, out, p.ids, p.after)
		}
	}
	for id, want := range map[string]bool{"person-1": true, "person-2": false, "nobody": false, "a%20b": false} {
		if code, out := call(t, op, "GET", "/v1/exists?id="+id, nil); code != 200 || out["enrolled"] != want || out["id"] != strings.ReplaceAll(id, "%20", " ") {
			t.Errorf("exists %s: %d %v", id, code, out)
		}
	}
	for path, says := range map[string]string{
		"/v1/ids?limit=0":                "limit=\"0\": give a number of ids from 1 to 10000",
		"/v1/ids?limit=x":                "limit=\"x\"",
		"/v1/ids?Limit=3":                "unknown parameter \"Limit\"",
		"/v1/ids?limit=1&limit=2":        "parameter \"limit\" given 2 times",
		"/v1/ids?after=%09":              "after: ",
		"/v1/ids?x=%zz":                  "not a URL query",
		"/v1/exists":                     "give the id to look for",
		"/v1/exists?id=":                 "id: empty id",
		"/v1/exists?id=a&id=b":           "given 2 times",
		"/v1/exists?id=a&after=person-1": "unknown parameter \"after\"",
	} {
		if code, out := call(t, op, "GET", path, nil); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), says) {
			t.Errorf("%s: %d %v; want 400 saying %q", path, code, out, says)
		}
	}
	for _, path := range []string{"/v1/ids", "/v1/exists?id=person-1"} {
		if code, out := call(t, dev, "GET", path, nil); code != http.StatusForbidden || !strings.Contains(fmt.Sprint(out["error"]), "device (device) may not") {
			t.Errorf("a device's %s: %d %v", path, code, out)
		}
	}
	if code, _ := call(t, op, "POST", "/v1/ids", `{}`); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/ids: %d", code)
	}
}
