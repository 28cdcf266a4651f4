// Package gateway is idface's integration API for gate software in any
// language: HTTP with JSON bodies, served on a Unix socket or a loopback
// address of the gate's host by `idface gateway`, which holds the
// member's key and speaks QUIC to the cluster. Its operations are shaped
// like those national-ID systems use for a 1:N engine: identify, insert
// (enroll), delete, reference count and ping (health). The routes are
// described in docs/openapi.json; a test keeps the two equal.
//
// The gateway has no authentication of its own: whoever can reach it acts
// as the member whose key it holds. So it listens only on a Unix socket
// (mode 0660: the gate software's group) or on loopback.
//
// What a caller learns is what the member learns: a device the accepted
// id or a rejection (never a score), an operator also the count. Nothing
// about a template is logged.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/idface/idface/protocol"
)

// Client is what the gateway needs of an idface client (client.Client).
type Client interface {
	Identify(ctx context.Context, tmpl []float32, k int) (*protocol.IdentifyOK, error)
	Enroll(ctx context.Context, items []protocol.Item) error
	Delete(ctx context.Context, id string) error
	Health(ctx context.Context, server string) (*protocol.HealthOK, error)
	Entry() string
}

// Options configure a gateway.
type Options struct {
	Dim      int           // the cluster's template dimension
	Operator bool          // the member is an operator (enroll, delete, count)
	Timeout  time.Duration // one operation (default 30 s)
	Log      *slog.Logger  // requests and failures, never templates
}

// Routes are the operations the gateway serves ("METHOD /path"), as
// docs/openapi.json describes them.
var Routes = []string{
	"POST /v1/identify",
	"POST /v1/enroll",
	"POST /v1/delete",
	"GET /v1/count",
	"GET /v1/health",
}

// Handler serves the gateway's routes through c.
func Handler(c Client, o Options) http.Handler {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	g := &gateway{c: c, o: o}
	mux := http.NewServeMux()
	handlers := map[string]http.HandlerFunc{
		"POST /v1/identify": g.identify,
		"POST /v1/enroll":   g.operator(g.enroll),
		"POST /v1/delete":   g.operator(g.delete),
		"GET /v1/count":     g.operator(g.count),
		"GET /v1/health":    g.health,
	}
	for _, r := range Routes {
		mux.HandleFunc(r, handlers[r])
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, rt := range Routes {
			if method, path, _ := strings.Cut(rt, " "); path == r.URL.Path {
				w.Header().Set("Allow", method)
				fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", path, method, r.Method))
				return
			}
		}
		fail(w, http.StatusNotFound, fmt.Sprintf("no operation %s %s; the gateway serves %v (docs/openapi.json)", r.Method, r.URL.Path, Routes))
	})
	return mux
}

type gateway struct {
	c Client
	o Options
}

// IdentifyRequest is POST /v1/identify's body.
type IdentifyRequest struct {
	Template []float32 `json:"template"`
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
	ID       string    `json:"id"`
	Template []float32 `json:"template"`
}

// DeleteRequest is POST /v1/delete's body.
type DeleteRequest struct {
	ID string `json:"id"`
}

func (g *gateway) identify(w http.ResponseWriter, r *http.Request) {
	var req IdentifyRequest
	if !g.decode(w, r, &req) || !g.template(w, req.Template) {
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
	if !g.decode(w, r, &req) || !g.id(w, req.ID) || !g.template(w, req.Template) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	if err := g.c.Enroll(ctx, []protocol.Item{{ID: req.ID, Template: req.Template}}); err != nil {
		g.failed(w, "enroll", err)
		return
	}
	reply(w, http.StatusOK, map[string]string{"enrolled": req.ID})
}

func (g *gateway) delete(w http.ResponseWriter, r *http.Request) {
	var req DeleteRequest
	if !g.decode(w, r, &req) {
		return
	}
	if req.ID == "" {
		fail(w, http.StatusBadRequest, "give the id to delete")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	if err := g.c.Delete(ctx, req.ID); err != nil {
		g.failed(w, "delete", err)
		return
	}
	reply(w, http.StatusOK, map[string]string{"deleted": req.ID})
}

func (g *gateway) count(w http.ResponseWriter, r *http.Request) {
	h, err := g.entryHealth(r)
	if err != nil {
		g.failed(w, "count", err)
		return
	}
	reply(w, http.StatusOK, map[string]uint32{"count": h.Live})
}

func (g *gateway) health(w http.ResponseWriter, r *http.Request) {
	h, err := g.entryHealth(r)
	if err != nil {
		g.o.Log.Warn("health: the entry does not answer", "entry", g.c.Entry(), "err", err)
		reply(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "entry": g.c.Entry(), "error": err.Error()})
		return
	}
	reply(w, http.StatusOK, map[string]string{"status": "ok", "entry": h.Name, "mode": h.Mode})
}

// entryHealth asks the entry server for its health (with the count, for
// an operator).
func (g *gateway) entryHealth(r *http.Request) (*protocol.HealthOK, error) {
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	return g.c.Health(ctx, g.c.Entry())
}

// operator refuses a device's call of an operator's operation.
func (g *gateway) operator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !g.o.Operator {
			fail(w, http.StatusForbidden, "this gateway holds a device's key: only an operator's gateway enrolls, deletes and counts")
			return
		}
		h(w, r)
	}
}

// maxBody bounds a request: a template of Dim floats written in full
// (at most 26 characters each with the comma) and an id.
func (g *gateway) maxBody() int64 { return int64(g.o.Dim)*26 + 4096 }

// decode reads a JSON body of at most maxBody bytes into v, refusing
// unknown fields and trailing data.
func (g *gateway) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, g.maxBody()))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
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
func (g *gateway) template(w http.ResponseWriter, t []float32) bool {
	if len(t) != g.o.Dim {
		fail(w, http.StatusBadRequest, fmt.Sprintf("a template of %d numbers; this cluster's have %d", len(t), g.o.Dim))
		return false
	}
	norm := 0.0
	for i, v := range t {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			fail(w, http.StatusBadRequest, fmt.Sprintf("template value %d is not a finite number", i))
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

// id checks an id to enroll, in the user's terms.
func (g *gateway) id(w http.ResponseWriter, id string) bool {
	if err := protocol.CheckID(id); err != nil {
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
