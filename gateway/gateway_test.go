package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/gateway"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

const dim = 64

// gate is a gateway under test: an httptest server whose Handler's Listen
// is the server's own address.
type gate struct {
	srv   *httptest.Server
	token string // sent as a bearer token unless a request sets Authorization
}

// serve starts a gateway on loopback TCP (or, with o.Listen "unix:", on a
// Unix socket in a temporary directory).
func serve(t *testing.T, c gateway.Client, o gateway.Options) gate {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	if o.Listen == "unix:" {
		srv.Listener.Close()
		path := filepath.Join(t.TempDir(), "gate.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		srv.Listener = ln
		o.Listen += path
	} else {
		o.Listen = srv.Listener.Addr().String()
	}
	h, err := gateway.Handler(c, o)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	if path, ok := strings.CutPrefix(o.Listen, "unix:"); ok {
		srv.URL = "http://gate" // the name curl or Go would send; any is accepted
		srv.Client().Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}
	}
	return gate{srv: srv, token: string(o.Token)}
}

// call sends one request as gate software does (a POST's body as
// application/json, the bearer token) and decodes the JSON answer. hdr
// are header name and value pairs that override those ("" drops the
// header; "Host" sets the Host).
func (g gate) call(t *testing.T, method, path string, body any, hdr ...string) (int, http.Header, map[string]any) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	req, _ := http.NewRequest(method, g.srv.URL+path, bytes.NewReader(b))
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		switch k, v := hdr[i], hdr[i+1]; {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := g.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: an answer that is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header, out
}

// The token of the tests' operator gateways.
const token = "3f9c2a7d41e08b5c6a1d2e3f40516273"

// call is gate.call without the headers.
func call(t *testing.T, g gate, method, path string, body any) (int, map[string]any) {
	t.Helper()
	code, _, out := g.call(t, method, path, body)
	return code, out
}

// TestGateway: an operator's gateway enrolls, identifies (accepted with
// the id, or rejected), counts and deletes against a real in-process
// cluster; a device's gateway identifies and is refused the operator's
// operations; bad bodies get clear 4xx answers, never a call.
func TestGateway(t *testing.T) {
	tau := 0.4
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: "2pc", Dim: dim, Tau: &tau, Timeout: config.Duration(10 * time.Second)}, 2))
	op := serve(t, c.Client("client", "p1"), gateway.Options{Dim: dim, Operator: true, Token: []byte(token)})
	dev := serve(t, c.Client("device", "p2"), gateway.Options{Dim: dim, Name: "device"})

	xs := inproc.Templates(6, dim, 3)
	for i, x := range xs[:5] {
		if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: fmt.Sprintf("person-%d", i), Template: x}); code != 200 || out["enrolled"] != fmt.Sprintf("person-%d", i) {
			t.Fatalf("enroll %d: %d %v", i, code, out)
		}
	}
	if code, out := call(t, op, "GET", "/v1/count", nil); code != 200 || out["count"] != 5.0 {
		t.Fatalf("count: %d %v", code, out)
	}
	for _, g := range []gate{op, dev} {
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
	// With dedupe, the same person under a new id is refused, naming the
	// enrolled id and no score (issue 38 item 6); nothing is enrolled.
	if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: "again-1", Template: xs[1], Dedupe: true}); code != http.StatusConflict ||
		out["duplicate_of"] != "person-1" || strings.Contains(fmt.Sprint(out), "score") {
		t.Fatalf("a duplicate person with dedupe: %d %v", code, out)
	}
	// enroll_refused goes with dedupe; with it an honest search that
	// matched still refuses the duplicate (only a refused search enrolls
	// unchecked: replicated.TestDedupeRefusedEnrolls).
	if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: "again-1", Template: xs[1], EnrollRefused: true}); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "goes with dedupe") {
		t.Fatalf("enroll_refused without dedupe: %d %v", code, out)
	}
	if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: "again-1", Template: xs[1], Dedupe: true, EnrollRefused: true}); code != http.StatusConflict || out["duplicate_of"] != "person-1" {
		t.Fatalf("a duplicate person with dedupe and enroll_refused: %d %v", code, out)
	}
	if code, out := call(t, op, "GET", "/v1/count", nil); code != 200 || out["count"] != 5.0 {
		t.Fatalf("count after a refused duplicate: %d %v", code, out)
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
	// A refusal says who may not send what (issue 38 item 1).
	for path, says := range map[string]string{"/v1/enroll": "device (device) may not send Enroll", "/v1/delete": "device (device) may not send Delete"} {
		if code, out := call(t, dev, "POST", path, gateway.EnrollRequest{ID: "x", Template: xs[0]}); code != http.StatusForbidden ||
			!strings.Contains(fmt.Sprint(out["error"]), says) || !strings.Contains(fmt.Sprint(out["error"]), "operator") {
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
		"short":    {`{"template":[1,2,3]}`, 400, "template has 3 numbers"},
		"zero":     {`{"template":[` + strings.TrimSuffix(strings.Repeat("0,", dim), ",") + `]}`, 400, "all-zero"},
		"overflow": {`{"template":[1e39` + strings.Repeat(",1", dim-1) + `]}`, 400, "template[0] is beyond a float32's range"},
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

// TestGatewayTemplateValues: a null, a NaN, an empty element or a wrong
// type in a template is refused naming the element, and nothing is
// enrolled. Before, encoding/json read a null as 0 and the template with
// a 0 was enrolled.
func TestGatewayTemplateValues(t *testing.T) {
	tau := 0.4
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: "2pc", Dim: dim, Tau: &tau, Timeout: config.Duration(10 * time.Second)}, 2))
	op := serve(t, c.Client("client", "p1"), gateway.Options{Dim: dim, Operator: true, Token: []byte(token)})
	x := inproc.Templates(1, dim, 5)[0]
	nums := make([]string, dim)
	for i, v := range x {
		nums[i] = strconv.FormatFloat(float64(v), 'g', -1, 32)
	}
	with := func(i int, v string) string {
		ns := slices.Clone(nums)
		ns[i] = v
		return `{"id":"alice","template":[` + strings.Join(ns, ",") + `]}`
	}
	for name, b := range map[string]struct{ body, says string }{
		"null":           {with(17, "null"), "template[17] is null"},
		"NaN":            {with(17, "NaN"), "template[17] is not a number"},
		"Infinity":       {with(3, "Infinity"), "template[3] is not a number"},
		"empty element":  {with(5, ""), "template[5] is not a number"},
		"a string":       {with(9, `"0.5"`), "template[9] is a string"},
		"a nested array": {with(0, "[1]"), "template[0] is an array"},
		"null template":  {`{"id":"alice","template":null}`, "template is null"},
		"no template":    {`{"id":"alice"}`, "template is missing"},
		"a short one":    {`{"id":"alice","template":[` + strings.Join(nums[:dim-1], ",") + `]}`, fmt.Sprintf("template has %d numbers; this cluster's templates have %d", dim-1, dim)},
		"cut off":        {`{"id":"alice","template":[` + strings.Join(nums[:3], ","), "template[3]"},
	} {
		if code, out := call(t, op, "POST", "/v1/enroll", b.body); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), b.says) {
			t.Errorf("%s: %d %v; want 400 saying %q", name, code, out, b.says)
		}
	}
	if code, out := call(t, op, "GET", "/v1/count", nil); code != 200 || out["count"] != 0.0 {
		t.Fatalf("count after refused enrolments: %d %v", code, out)
	}
	if code, out := call(t, op, "POST", "/v1/enroll", with(17, nums[17])); code != 200 || out["enrolled"] != "alice" {
		t.Fatalf("the template in full: %d %v", code, out)
	}
}

// TestGatewayClosedToWebPages: what a web page in a browser on the gate's
// host could send an operator's gateway on loopback is refused before it
// acts, and gate software's requests still pass. Before, a cross-site
// text/plain POST /v1/delete with Origin http://evil.example deleted the
// id (200), and GET /v1/count with a rebound Host answered.
func TestGatewayClosedToWebPages(t *testing.T) {
	tau := 0.4
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: "2pc", Dim: dim, Tau: &tau, Timeout: config.Duration(10 * time.Second)}, 2))
	op := serve(t, c.Client("client", "p1"), gateway.Options{Dim: dim, Operator: true, Token: []byte(token)})
	x := inproc.Templates(1, dim, 7)[0]
	if code, out := call(t, op, "POST", "/v1/enroll", gateway.EnrollRequest{ID: "alice", Template: x}); code != 200 {
		t.Fatalf("enroll: %d %v", code, out)
	}
	port := op.srv.Listener.Addr().(*net.TCPAddr).Port
	del := `{"id":"alice"}`
	for _, r := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		says                     string
	}{
		// The review's request: a page's fetch() needs no preflight for it.
		{"the review's cross-site delete", "POST", "/v1/delete", del, []string{"Content-Type", "text/plain", "Origin", "http://evil.example", "Authorization", ""}, 403, "Origin"},
		{"text/plain", "POST", "/v1/delete", del, []string{"Content-Type", "text/plain;charset=UTF-8"}, 415, "application/json"},
		{"a form", "POST", "/v1/delete", del, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"multipart", "POST", "/v1/delete", del, []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, "application/json"},
		{"no Content-Type", "POST", "/v1/delete", del, []string{"Content-Type", ""}, 415, "application/json"},
		{"json in UTF-16", "POST", "/v1/delete", del, []string{"Content-Type", "application/json; charset=utf-16"}, 415, "application/json"},
		{"Origin", "POST", "/v1/delete", del, []string{"Origin", "http://evil.example"}, 403, "Origin"},
		{"Origin null", "POST", "/v1/delete", del, []string{"Origin", "null"}, 403, "Origin"},
		{"Origin on a GET", "GET", "/v1/count", "", []string{"Origin", "http://evil.example"}, 403, "Origin"},
		{"Origin on a preflight", "OPTIONS", "/v1/delete", "", []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST"}, 403, "Origin"},
		{"cross-site", "GET", "/v1/count", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "Sec-Fetch-Site: cross-site"},
		{"same-site", "POST", "/v1/delete", del, []string{"Sec-Fetch-Site", "same-site"}, 403, "Sec-Fetch-Site: same-site"},
		{"a rebound Host", "GET", "/v1/count", "", []string{"Host", fmt.Sprintf("rebind.evil.example:%d", port)}, 403, "Host"},
		{"a rebound Host, POST", "POST", "/v1/delete", del, []string{"Host", fmt.Sprintf("rebind.evil.example:%d", port)}, 403, "Host"},
		{"another port", "GET", "/v1/count", "", []string{"Host", fmt.Sprintf("localhost:%d", port+1)}, 403, "Host"},
		{"no port", "GET", "/v1/count", "", []string{"Host", "localhost"}, 403, "Host"},
		{"no token", "POST", "/v1/delete", del, []string{"Authorization", ""}, 401, "bearer token"},
		{"a wrong token", "POST", "/v1/delete", del, []string{"Authorization", "Bearer " + token[:len(token)-1] + "0"}, 401, "wrong"},
		{"a prefix of the token", "GET", "/v1/count", "", []string{"Authorization", "Bearer " + token[:16]}, 401, "wrong"},
		{"the token as Basic", "GET", "/v1/count", "", []string{"Authorization", "Basic " + token}, 401, "bearer token"},
		{"no token, health", "GET", "/v1/health", "", []string{"Authorization", ""}, 401, "bearer token"},
		{"no token, unknown path", "GET", "/v2/x", "", []string{"Authorization", ""}, 401, "bearer token"},
	} {
		code, h, out := op.call(t, r.method, r.path, r.body, r.hdr...)
		if code != r.status || !strings.Contains(fmt.Sprint(out["error"]), r.says) {
			t.Errorf("%s: %d %v; want %d saying %q", r.name, code, out, r.status, r.says)
		}
		if code == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 with WWW-Authenticate %q", r.name, h.Get("WWW-Authenticate"))
		}
		if h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", r.name, h.Get("Access-Control-Allow-Origin"))
		}
	}
	if code, out := call(t, op, "POST", "/v1/identify", gateway.IdentifyRequest{Template: x}); code != 200 || out["id"] != "alice" {
		t.Fatalf("alice after the refused deletions: %d %v", code, out)
	}

	// Gate software's requests pass: the listener's names, JSON with a
	// charset, a browser's own navigation, the scheme in any case.
	for _, r := range []struct {
		name string
		hdr  []string
	}{
		{"localhost", []string{"Host", fmt.Sprintf("localhost:%d", port)}},
		{"LOCALHOST", []string{"Host", fmt.Sprintf("LOCALHOST:%d", port)}},
		{"[::1]", []string{"Host", fmt.Sprintf("[::1]:%d", port)}},
		{"Sec-Fetch-Site none", []string{"Sec-Fetch-Site", "none"}},
		{"Sec-Fetch-Site same-origin", []string{"Sec-Fetch-Site", "same-origin"}},
		{"bearer", []string{"Authorization", "bearer " + token}},
	} {
		if code, _, out := op.call(t, "GET", "/v1/count", nil, r.hdr...); code != 200 || out["count"] != 1.0 {
			t.Errorf("count with %s: %d %v", r.name, code, out)
		}
	}
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON"} {
		if code, _, out := op.call(t, "POST", "/v1/identify", gateway.IdentifyRequest{Template: x}, "Content-Type", ct); code != 200 || out["id"] != "alice" {
			t.Errorf("identify as %s: %d %v", ct, code, out)
		}
	}
	if code, out := call(t, op, "POST", "/v1/delete", gateway.DeleteRequest{ID: "alice"}); code != 200 || out["deleted"] != "alice" {
		t.Fatalf("the operator's deletion: %d %v", code, out)
	}
}

// stub is a Client that answers without a cluster and counts the
// operations that reached it; its servers hold live rows each.
type stub struct {
	calls int
	live  uint32
	asked []string // the servers asked for their health
}

func (s *stub) Identify(context.Context, []float32, int) (*protocol.IdentifyOK, error) {
	s.calls++
	return &protocol.IdentifyOK{}, nil
}
func (s *stub) Enroll(context.Context, []protocol.Item) error { s.calls++; return nil }
func (s *stub) Delete(context.Context, string) error          { s.calls++; return nil }
func (s *stub) Health(_ context.Context, server string) (*protocol.HealthOK, error) {
	s.calls++
	s.asked = append(s.asked, server)
	return &protocol.HealthOK{Name: "p1", Mode: "2pc", Live: s.live}, nil
}
func (s *stub) Entry() string { return "p1" }
func (s *stub) IDs(context.Context, string, int) ([]string, bool, error) {
	s.calls++
	return nil, false, nil
}
func (s *stub) Exists(context.Context, string) (bool, error) { s.calls++; return false, nil }

// TestGatewayUnixSocket: on a Unix socket, which no browser opens, any
// Host passes (curl sends "localhost", the README's recipe "gate") and an
// operator's gateway needs no token; Origin, Sec-Fetch-Site and the
// Content-Type are still checked, for a proxy that would forward a page's
// request.
func TestGatewayUnixSocket(t *testing.T) {
	s := &stub{}
	op := serve(t, s, gateway.Options{Dim: dim, Operator: true, Listen: "unix:"})
	for _, host := range []string{"gate", "localhost", "rebind.evil.example:8480"} {
		if code, _, out := op.call(t, "POST", "/v1/delete", `{"id":"alice"}`, "Host", host); code != 200 || out["deleted"] != "alice" {
			t.Errorf("delete with Host %s: %d %v", host, code, out)
		}
	}
	calls := s.calls
	for name, hdr := range map[string][]string{
		"text/plain":     {"Content-Type", "text/plain"},
		"Origin":         {"Origin", "http://evil.example"},
		"Sec-Fetch-Site": {"Sec-Fetch-Site", "cross-site"},
	} {
		if code, _, out := op.call(t, "POST", "/v1/delete", `{"id":"alice"}`, hdr...); code != 415 && code != 403 {
			t.Errorf("%s on a Unix socket: %d %v", name, code, out)
		}
	}
	if s.calls != calls {
		t.Errorf("refused requests reached the cluster: %d calls", s.calls-calls)
	}

	// With a token, a Unix socket's gateway asks for it too.
	tok := serve(t, &stub{}, gateway.Options{Dim: dim, Operator: true, Listen: "unix:", Token: []byte(token)})
	if code, _, _ := tok.call(t, "GET", "/v1/count", nil); code != 200 {
		t.Errorf("count with the token: %d", code)
	}
	if code, h, _ := tok.call(t, "GET", "/v1/count", nil, "Authorization", ""); code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("count without the token: %d %v", code, h)
	}
}

// TestGatewayOptions: a gateway that would be open is refused: an
// operator's on TCP without a token (the error says what to do), or one
// that does not say where it listens.
func TestGatewayOptions(t *testing.T) {
	_, err := gateway.Handler(&stub{}, gateway.Options{Dim: dim, Operator: true, Listen: "127.0.0.1:8480"})
	if err == nil || !strings.Contains(err.Error(), "--token-file") || !strings.Contains(err.Error(), "unix:") {
		t.Errorf("an operator's gateway on TCP without a token: %v", err)
	}
	for _, o := range []gateway.Options{
		{Dim: dim},
		{Dim: dim, Listen: "unix:"},
		{Dim: dim, Listen: "127.0.0.1"},
		{Dim: dim, Listen: "127.0.0.1:0"},
	} {
		if _, err := gateway.Handler(&stub{}, o); err == nil {
			t.Errorf("Listen %q: no error", o.Listen)
		}
	}
	for _, o := range []gateway.Options{
		{Dim: dim, Listen: "127.0.0.1:8480"},
		{Dim: dim, Operator: true, Listen: "127.0.0.1:8480", Token: []byte(token)},
		{Dim: dim, Operator: true, Listen: "unix:/run/idface/gate.sock"},
	} {
		if _, err := gateway.Handler(&stub{}, o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestReadToken: a token file is one line of visible ASCII of 16 to 4096
// bytes, its newline dropped, not open to every user.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	for content, want := range map[string]string{token: token, token + "\n": token, token + "\r\n": token, token + "\n\n": token} {
		if got, err := gateway.ReadToken(file("ok", content, 0o640)); err != nil || string(got) != want {
			t.Errorf("%q: %q %v", content, got, err)
		}
	}
	for name, f := range map[string]struct {
		content string
		mode    os.FileMode
		says    string
	}{
		"empty":        {"", 0o600, "empty"},
		"a newline":    {"\n", 0o600, "empty"},
		"short":        {"secret\n", 0o600, "too few"},
		"long":         {strings.Repeat("a", 4097), 0o600, "more than 4096"},
		"two lines":    {token + "\n" + token, 0o600, "control character"},
		"a space":      {token + " " + token, 0o600, "space"},
		"not ASCII":    {token + "é", 0o600, "non-ASCII"},
		"world-read":   {token, 0o644, "chmod o-rw"},
		"world-writes": {token, 0o602, "chmod o-rw"},
	} {
		if _, err := gateway.ReadToken(file(name, f.content, f.mode)); err == nil || !strings.Contains(err.Error(), f.says) {
			t.Errorf("%s: %v; want an error saying %q", name, err, f.says)
		}
	}
	if _, err := gateway.ReadToken(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing file: no error")
	}
	if _, err := gateway.ReadToken(dir); err == nil || !strings.Contains(err.Error(), "regular") {
		t.Errorf("a directory: %v", err)
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
	ids := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			// Every operation has its own operationId (client generators
			// name their functions by it) and documents the gateway's
			// answers to a wrong path or method (issue 38 item 5).
			var op struct {
				ID        string                     `json:"operationId"`
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.ID == "" || ids[op.ID] {
				t.Errorf("%s %s: operationId %q, missing or repeated", method, path, op.ID)
			}
			ids[op.ID] = true
			for _, code := range []string{"404", "405"} {
				if op.Responses[code] == nil {
					t.Errorf("%s %s: no %s answer", method, path, code)
				}
			}
		}
	}
	slices.Sort(documented)
	served := slices.Sorted(slices.Values(gateway.Routes()))
	if !slices.Equal(documented, served) {
		t.Fatalf("docs/openapi.json describes %v; the gateway serves %v", documented, served)
	}
}

// TestGatewayHealthWarns (issue 38 item 2): an operator's health answer
// warns once more ids are enrolled than the threshold was calibrated
// for, with the FPIR to expect; within it, on a device's gateway (told
// no count) or without a calibration it carries no warning. A sharded
// entry's coordinator holds no rows: its shards are counted.
func TestGatewayHealthWarns(t *testing.T) {
	cal := &config.Calibration{TargetFPIR: 1e-3, GalleryIDs: 1000}
	for _, c := range []struct {
		name   string
		live   uint32
		o      gateway.Options
		warn   string
		counts float64
	}{
		{"over", 5000, gateway.Options{Operator: true, Calibration: cal}, "5000 ids enrolled, the threshold was calibrated with 1000: expected FPIR about 0.005", 5000},
		{"within", 1000, gateway.Options{Operator: true, Calibration: cal}, "", 1000},
		{"uncalibrated", 5000, gateway.Options{Operator: true}, "", 5000},
		{"device", 5000, gateway.Options{Calibration: cal}, "", -1},
		{"sharded", 1500, gateway.Options{Operator: true, Calibration: cal, Shards: 4}, "6000 ids enrolled", 6000},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &stub{live: c.live}
			c.o.Dim, c.o.Listen = dim, "unix:"
			g := serve(t, s, c.o)
			code, out := call(t, g, "GET", "/v1/health", nil)
			w, _ := out["warning"].(string)
			if code != 200 || out["status"] != "ok" || (c.warn == "") != (w == "") || !strings.Contains(w, c.warn) {
				t.Errorf("health: %d %v; want warning %q", code, out, c.warn)
			}
			if c.o.Shards > 1 && !slices.Contains(s.asked, "p1#3") {
				t.Errorf("a sharded entry's shards were not counted: asked %v", s.asked)
			}
			if c.counts < 0 {
				return
			}
			if code, out := call(t, g, "GET", "/v1/count", nil); code != 200 || out["count"] != c.counts {
				t.Errorf("count: %d %v, want %v", code, out, c.counts)
			}
		})
	}
}
