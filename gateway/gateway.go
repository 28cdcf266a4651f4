// Package gateway is idface's integration API for gate software in any
// language: HTTP with JSON bodies, served on a Unix socket or a loopback
// address of the gate's host by `idface gateway`, which holds the
// member's key and speaks QUIC to the cluster. Its operations are shaped
// like those national-ID systems use for a 1:N engine: identify, insert
// (enroll), delete, reference count and ping (health). The routes are
// described in docs/openapi.json; a test keeps the two equal.
//
// Whoever can reach the gateway acts as the member whose key it holds, so
// it listens only on a Unix socket (mode 0660: the gate software's group)
// or on loopback, and it is closed to web pages, which a browser on the
// gate's host would otherwise let reach loopback: a request with an
// Origin header or a cross-site Sec-Fetch-Site is refused (403), a POST
// body must be application/json (415: a page cannot send that cross-site
// without a preflight, which the Origin check refuses), and on TCP the
// Host header must name the listener (403: DNS rebinding). A bearer
// token (Options.Token) is optional, and required of an operator's
// gateway on TCP, which any local program could otherwise drive.
//
// What a caller learns is what the member learns: a device the accepted
// id or a rejection (never a score), an operator also the count and the
// enrolled ids (a page at a time, or whether one is enrolled). Nothing
// about a template is logged.
package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/host/input"
	"github.com/idface/idface/internal/codec/strictjson"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Client is what the gateway needs of an idface client (client.Client).
type Client interface {
	Identify(ctx context.Context, tmpl []float32, k int) (*protocol.IdentifyOK, error)
	Enroll(ctx context.Context, items []protocol.Item) error
	Delete(ctx context.Context, id string) error
	Health(ctx context.Context, server string) (*protocol.HealthOK, error)
	// IDs and Exists are an operator's list of the enrolled ids and
	// check of one (client.IDs, client.Exists).
	IDs(ctx context.Context, after string, limit int) ([]string, bool, error)
	Exists(ctx context.Context, id string) (bool, error)
	Entry() string
}

// Options configure a gateway.
type Options struct {
	Dim      int           // the cluster's template dimension
	Operator bool          // the member is an operator (enroll, delete, count, ids, exists)
	Name     string        // the member, for refusals (default "this gateway's member")
	Timeout  time.Duration // one identify; a change may take longer while its servers report progress, this long between reports (default 30 s)
	Log      *slog.Logger  // requests and failures, never templates
	// Listen is where the gateway serves: "unix:PATH", or the HOST:PORT
	// its TCP listener has (the port resolved), whose names are the only
	// Host headers it accepts. On a Unix socket, which no browser can
	// open and whose mode decides who reaches it, Host is not checked
	// (curl sends "localhost", others the URL's name).
	Listen string
	// Token, if set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); ReadToken reads and checks one.
	// Required of an operator's gateway on TCP.
	Token []byte
	// Calibration, when the cluster's threshold was calibrated, makes an
	// operator's health answer warn once more ids are enrolled than it was
	// calibrated for (a device's gateway is told no count).
	Calibration *config.Calibration
	// Shards is the cluster's shard count: a sharded entry's coordinator
	// holds no rows, so its shards are counted (0 or 1: unsharded).
	Shards int
}

// routes are the operations the gateway serves (Routes).
var routes = []string{
	"POST /v1/identify",
	"POST /v1/enroll",
	"POST /v1/delete",
	"GET /v1/count",
	"GET /v1/ids",
	"GET /v1/exists",
	"GET /v1/health",
}

// Routes returns the operations the gateway serves ("METHOD /path"), as
// docs/openapi.json describes them: a copy, so that no caller changes
// what the gateway serves.
func Routes() []string { return slices.Clone(routes) }

// Handler serves the gateway's routes through c. It refuses options that
// would leave the gateway open: no Listen, or an operator's gateway on
// TCP without a token.
func Handler(c Client, o Options) (http.Handler, error) {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	g := &gateway{c: c, o: o}
	if len(o.Token) > 0 {
		h := sha256.Sum256(o.Token)
		g.token = h[:]
	}
	switch path, unix := strings.CutPrefix(o.Listen, "unix:"); {
	case o.Listen == "":
		return nil, errors.New("gateway: Options.Listen is empty: give unix:PATH or the listener's TCP HOST:PORT, whose names are the Host headers to accept")
	case unix && path == "":
		return nil, errors.New("gateway: Options.Listen unix: needs the socket's path")
	case !unix:
		hosts, err := listenHosts(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("gateway: Options.Listen %q: %v: give the listener's HOST:PORT", o.Listen, err)
		}
		if o.Operator && g.token == nil {
			return nil, fmt.Errorf("an operator's gateway on TCP (%s) would enroll and delete for any program or user of this host that reaches the port: "+
				"give it a bearer token, --token-file FILE with one line of at least %d characters (e.g. (umask 027; openssl rand -hex 32 > FILE)) that callers send as 'Authorization: Bearer TOKEN', "+
				"or serve a Unix socket (--listen unix:PATH), whose mode 0660 decides who reaches it", o.Listen, minToken)
		}
		g.hosts = hosts
	}
	mux := http.NewServeMux()
	handlers := map[string]http.HandlerFunc{
		"POST /v1/identify": g.identify,
		"POST /v1/enroll":   g.operator("send Enroll", g.enroll),
		"POST /v1/delete":   g.operator("send Delete", g.delete),
		"GET /v1/count":     g.operator("ask for the count", g.count),
		"GET /v1/ids":       g.operator("list the enrolled ids", g.ids),
		"GET /v1/exists":    g.operator("ask whether an id is enrolled", g.exists),
		"GET /v1/health":    g.health,
	}
	for _, r := range routes {
		mux.HandleFunc(r, handlers[r])
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range routes {
			if method, path, _ := strings.Cut(rt, " "); path == r.URL.Path {
				w.Header().Set("Allow", method)
				fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", path, method, r.Method))
				return
			}
		}
		fail(w, http.StatusNotFound, fmt.Sprintf("no operation %s %s; the gateway serves %v (docs/openapi.json)", r.Method, r.URL.Path, routes))
	})
	return g.guard(mux), nil
}

type gateway struct {
	c     Client
	o     Options
	hosts map[string]bool // the Host headers accepted; nil: any (a Unix socket)
	token []byte          // SHA-256 of the bearer token; nil: none
}

// listenHosts returns the Host headers a gateway listening on TCP addr
// accepts (lower case): addr itself and, on loopback, localhost,
// 127.0.0.1 and [::1] with its port; without the port too on port 80.
func listenHosts(addr string) (map[string]bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" || port == "" || port == "0" {
		return nil, errors.New("not the address a listener has")
	}
	names := []string{strings.ToLower(host)}
	if ip := net.ParseIP(host); strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback() {
		names = append(names, "localhost", "127.0.0.1", "::1")
	}
	hosts := map[string]bool{}
	for _, n := range names {
		hp := net.JoinHostPort(n, port)
		hosts[hp] = true
		if port == "80" {
			hosts[strings.TrimSuffix(hp, ":80")] = true
		}
	}
	return hosts, nil
}

// guard refuses what the routes must never see: a wrong Host (DNS
// rebinding), a web page's request, a missing or wrong token.
func (g *gateway) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.hosts != nil && !g.hosts[strings.ToLower(r.Host)] {
			g.o.Log.Warn("refused a request for another host (DNS rebinding?)", "host", r.Host, "listen", g.o.Listen)
			fail(w, http.StatusForbidden, fmt.Sprintf("Host %q is not this gateway's address: send the request to http://%s/", r.Host, g.o.Listen))
			return
		}
		if origin, ok := r.Header["Origin"]; ok {
			g.o.Log.Warn("refused a request from a web page", "origin", origin)
			fail(w, http.StatusForbidden, "a request with an Origin header, which browsers send for web pages: the gateway serves gate software, not web pages; send no Origin")
			return
		}
		for _, site := range r.Header.Values("Sec-Fetch-Site") {
			if site != "none" && site != "same-origin" {
				g.o.Log.Warn("refused a request from a web page", "sec-fetch-site", site)
				fail(w, http.StatusForbidden, fmt.Sprintf("a request a browser marks Sec-Fetch-Site: %s (a web page's): the gateway serves gate software, not web pages", site))
				return
			}
		}
		if g.token != nil {
			scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="idface gateway"`)
				fail(w, http.StatusUnauthorized, "this gateway takes a bearer token: send 'Authorization: Bearer TOKEN', TOKEN the line in the gateway's --token-file")
				return
			}
			// Hashes of equal length: the comparison's time tells nothing,
			// not even the token's length.
			if h := sha256.Sum256([]byte(strings.TrimSpace(tok))); subtle.ConstantTimeCompare(h[:], g.token) != 1 {
				g.o.Log.Warn("refused a wrong bearer token")
				w.Header().Set("WWW-Authenticate", `Bearer realm="idface gateway", error="invalid_token"`)
				fail(w, http.StatusUnauthorized, "a wrong bearer token: send the line in the gateway's --token-file")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// The bounds of a bearer token, in bytes.
const minToken, maxToken = 16, 4096

// ReadToken reads a bearer token from path: one line of visible ASCII of
// 16 to 4096 bytes (a trailing newline is dropped), in a regular file
// that not every user of the host can read or write.
func ReadToken(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("the token file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o006 != 0 {
		return nil, fmt.Errorf("the token file %s is open to every user of the host (mode %v): 'chmod o-rw %s' (the gate software reads it through its group)", path, fi.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxToken+3))
	if err != nil {
		return nil, fmt.Errorf("the token file: %w", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("the token file %s is empty: write a secret into it, e.g. (umask 027; openssl rand -hex 32 > %s)", path, path)
	case len(b) > maxToken:
		return nil, fmt.Errorf("the token file %s holds more than %d bytes: a token is one line", path, maxToken)
	case len(b) < minToken:
		return nil, fmt.Errorf("the token file %s holds %d characters, too few to guess at: write at least %d, e.g. (umask 027; openssl rand -hex 32 > %s)", path, len(b), minToken, path)
	}
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return nil, fmt.Errorf("the token file %s holds a space, a control character or non-ASCII: a token is one line of visible ASCII (a header value), e.g. openssl rand -hex 32", path)
		}
	}
	return b, nil
}

// Template is a request's face template. Into a []float32 encoding/json
// reads a null as 0, and such a template would be enrolled; Template
// refuses a null or any other non-number, naming the element
// (strictjson.Array). The gateway reads its bodies with strictjson
// itself; this is for Go programs that decode a request.
type Template []float32

// UnmarshalJSON reads an array of numbers, each read as a float32 (one
// beyond its range as an infinity, which the gateway refuses).
func (t *Template) UnmarshalJSON(b []byte) error {
	v, err := strictjson.Array(b, "template", Template{})
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// IdentifyRequest is POST /v1/identify's body.
type IdentifyRequest struct {
	Template Template `json:"template"`
}

// The fields of each request body, as strictjson reads them: each key
// exactly as its json tag, once.
func (q *IdentifyRequest) fields() []strictjson.Field {
	return []strictjson.Field{{Key: "template", Into: (*[]float32)(&q.Template), Required: true}}
}

// IdentifyResponse is its answer: "accepted" with the id, or "rejected".
// Degraded: a server was down and the answer skipped the checks it takes
// part in (replicated mode).
type IdentifyResponse struct {
	Decision string `json:"decision"`
	ID       string `json:"id,omitempty"`
	Degraded bool   `json:"degraded,omitempty"`
}

// EnrollRequest is POST /v1/enroll's body.
type EnrollRequest struct {
	ID       string   `json:"id"`
	Template Template `json:"template"`
	// Dedupe: search the gallery first, and enroll nothing when the
	// template matches an enrolled person (409, naming the id it
	// matched; no score).
	Dedupe bool `json:"dedupe,omitempty"`
	// EnrollRefused, with Dedupe, in a cluster that hides probes: a
	// search refused by this client's verdict for a failed check of its
	// hidden probe (a share holder deviates) enrolls the template
	// anyway, unchecked (the answer says "unchecked": true), so that no
	// holder learns the check's outcome from whether an enrollment
	// follows; without it such a search fails the enrollment.
	EnrollRefused bool `json:"enroll_refused,omitempty"`
}

func (q *EnrollRequest) fields() []strictjson.Field {
	return []strictjson.Field{
		{Key: "id", Into: &q.ID, Required: true},
		{Key: "template", Into: (*[]float32)(&q.Template), Required: true},
		{Key: "dedupe", Into: &q.Dedupe},
		{Key: "enroll_refused", Into: &q.EnrollRefused},
	}
}

// DeleteRequest is POST /v1/delete's body.
type DeleteRequest struct {
	ID string `json:"id"`
}

func (q *DeleteRequest) fields() []strictjson.Field {
	return []strictjson.Field{{Key: "id", Into: &q.ID, Required: true}}
}

func (g *gateway) identify(w http.ResponseWriter, r *http.Request) {
	var req IdentifyRequest
	if !g.decode(w, r, req.fields()) || !g.template(w, req.Template) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	ans, err := g.c.Identify(ctx, req.Template, 1)
	if err != nil {
		g.failed(w, "identify", err)
		return
	}
	res := IdentifyResponse{Decision: "rejected", Degraded: ans.Degraded}
	if ans.Accepted && len(ans.Candidates) > 0 {
		res.Decision, res.ID = "accepted", ans.Candidates[0].ID
	}
	reply(w, http.StatusOK, res)
}

func (g *gateway) enroll(w http.ResponseWriter, r *http.Request) {
	var req EnrollRequest
	if !g.decode(w, r, req.fields()) || !g.id(w, req.ID) || !g.template(w, req.Template) {
		return
	}
	if req.EnrollRefused && !req.Dedupe {
		reply(w, http.StatusBadRequest, map[string]string{"error": "enroll_refused goes with dedupe"})
		return
	}
	unchecked := false
	if req.Dedupe {
		ictx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
		a, err := g.c.Identify(ictx, req.Template, 1)
		cancel()
		switch {
		case err != nil && req.EnrollRefused && protocol.IsRefusedHidden(err):
			unchecked = true
			g.o.Log.Warn("enrolling unchecked: its search was refused for a failed check (a share holder is faulty or compromised)", "id", req.ID)
		case err != nil:
			g.failed(w, "enroll", fmt.Errorf("searching the gallery before enrolling: %w", err))
			return
		case a.Accepted && len(a.Candidates) > 0:
			g.o.Log.Info("enrollment refused as a duplicate", "id", req.ID, "matched", a.Candidates[0].ID)
			reply(w, http.StatusConflict, map[string]string{
				"error":        fmt.Sprintf("%q not enrolled: the template matches the enrolled id %q (the same person, at this cluster's threshold)", req.ID, a.Candidates[0].ID),
				"duplicate_of": a.Candidates[0].ID})
			return
		}
	}
	// A change waits while the servers report progress (rpc.Patient).
	ctx := rpc.Patient(r.Context(), g.o.Timeout)
	if err := g.c.Enroll(ctx, []protocol.Item{{ID: req.ID, Template: req.Template}}); err != nil {
		g.failed(w, "enroll", err)
		return
	}
	if unchecked {
		reply(w, http.StatusOK, map[string]any{"enrolled": req.ID, "unchecked": true})
		return
	}
	reply(w, http.StatusOK, map[string]string{"enrolled": req.ID})
}

func (g *gateway) delete(w http.ResponseWriter, r *http.Request) {
	var req DeleteRequest
	if !g.decode(w, r, req.fields()) || !g.id(w, req.ID) {
		return
	}
	// A change waits while the servers report progress (rpc.Patient).
	ctx := rpc.Patient(r.Context(), g.o.Timeout)
	if err := g.c.Delete(ctx, req.ID); err != nil {
		g.failed(w, "delete", err)
		return
	}
	reply(w, http.StatusOK, map[string]string{"deleted": req.ID})
}

func (g *gateway) count(w http.ResponseWriter, r *http.Request) {
	h, err := g.entryHealth(r)
	var n int
	if err == nil {
		n, err = g.live(r, h)
	}
	if err != nil {
		g.failed(w, "count", err)
		return
	}
	reply(w, http.StatusOK, map[string]int{"count": n})
}

func (g *gateway) health(w http.ResponseWriter, r *http.Request) {
	h, err := g.entryHealth(r)
	if err != nil {
		g.o.Log.Warn("health: the entry does not answer", "entry", g.c.Entry(), "err", err)
		reply(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "entry": g.c.Entry(), "error": err.Error()})
		return
	}
	out := map[string]string{"status": "ok", "entry": h.Name, "mode": h.Mode}
	if g.o.Operator && g.o.Calibration != nil {
		// The entry answers, so health is ok; a count that fails only
		// leaves the warning out.
		if n, err := g.live(r, h); err != nil {
			g.o.Log.Warn("health: the ids enrolled could not be counted", "entry", g.c.Entry(), "err", err)
		} else if msg := g.o.Calibration.Warning(n); msg != "" {
			out["warning"] = msg
		}
	}
	reply(w, http.StatusOK, out)
}

// live is the number of ids enrolled, from the entry's health h (an
// operator's), or in a sharded cluster from the entry's shards.
func (g *gateway) live(r *http.Request, h *protocol.HealthOK) (int, error) {
	if g.o.Shards <= 1 {
		return int(h.Live), nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	n := 0
	for s := range g.o.Shards {
		sh, err := g.c.Health(ctx, config.ShardName(g.c.Entry(), s))
		if err != nil {
			return 0, err
		}
		n += int(sh.Live)
	}
	return n, nil
}

// entryHealth asks the entry server for its health (with the count, for
// an operator).
func (g *gateway) entryHealth(r *http.Request) (*protocol.HealthOK, error) {
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	return g.c.Health(ctx, g.c.Entry())
}

// operator refuses a device's call of an operator's operation (what it
// may not do), saying who may not.
func (g *gateway) operator(what string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !g.o.Operator {
			name := g.o.Name
			if name == "" {
				name = "this gateway's member"
			}
			fail(w, http.StatusForbidden, fmt.Sprintf("%s (device) may not %s: this gateway holds a device's key; only an operator's gateway enrolls, deletes, counts and lists ids", name, what))
			return
		}
		h(w, r)
	}
}

// maxBody bounds a request: a template of Dim floats written in full
// (at most 26 characters each with the comma) and an id.
func (g *gateway) maxBody() int64 { return int64(g.o.Dim)*26 + 4096 }

// decode reads a JSON body of at most maxBody bytes into fields,
// refusing another Content-Type (a web page's simple request: text/plain,
// a form) and what strictjson refuses: a null, a field given twice (also
// in another case), an unknown field, data after the object. A refusal
// names the field or the element.
func (g *gateway) decode(w http.ResponseWriter, r *http.Request, fields []strictjson.Field) bool {
	ct := r.Header.Get("Content-Type")
	if mt, params, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" || params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8") {
		fail(w, http.StatusUnsupportedMediaType, fmt.Sprintf("a body of Content-Type %q: send JSON as Content-Type: application/json (curl: -H 'Content-Type: application/json')", ct))
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.maxBody()))
	if err == nil {
		err = strictjson.Object(body, fields)
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("a body of more than %d bytes: a template has %d numbers", tooBig.Limit, g.o.Dim))
		return false
	case err != nil:
		fail(w, http.StatusBadRequest, fmt.Sprintf("the body is not the JSON this operation takes: %v", err))
		return false
	}
	return true
}

// template checks a template's length and values.
func (g *gateway) template(w http.ResponseWriter, t Template) bool {
	if len(t) == 0 {
		fail(w, http.StatusBadRequest, fmt.Sprintf("template is empty: give an array of %d numbers", g.o.Dim))
		return false
	}
	if len(t) != g.o.Dim {
		fail(w, http.StatusBadRequest, fmt.Sprintf("template has %d numbers; this cluster's templates have %d", len(t), g.o.Dim))
		return false
	}
	norm := 0.0
	for i, v := range t {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			// JSON has neither: a number beyond float32's range.
			fail(w, http.StatusBadRequest, fmt.Sprintf("template[%d] is beyond a float32's range (about ±3.4e38): send a finite number", i))
			return false
		}
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		fail(w, http.StatusBadRequest, "an all-zero template has no direction to compare")
		return false
	}
	return true
}

// id checks an id to enroll or delete as every reader of ids does
// (input.CheckID): as written, never trimmed, so that the id a proxy or
// a log in front of the gateway sees is the id acted on.
func (g *gateway) id(w http.ResponseWriter, id string) bool {
	if err := input.CheckID(id); err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("id: %v", err))
		return false
	}
	return true
}

// failed answers an operation the cluster did not carry out, with the
// status its error calls for.
func (g *gateway) failed(w http.ResponseWriter, op string, err error) {
	status := http.StatusBadGateway
	var pe *protocol.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case protocol.CodeBadRequest:
			status = http.StatusBadRequest
		case protocol.CodeForbidden:
			status = http.StatusForbidden
		case protocol.CodeDuplicate:
			status = http.StatusConflict
		case protocol.CodeUnknownID:
			status = http.StatusNotFound
		case protocol.CodeUnavailable:
			status = http.StatusServiceUnavailable
		}
	}
	g.o.Log.Warn(op+" failed", "status", status, "err", err)
	fail(w, status, fmt.Sprintf("%s: %v", op, err))
}

func fail(w http.ResponseWriter, status int, msg string) {
	reply(w, status, map[string]string{"error": msg})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
