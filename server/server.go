// Package server is idface's one server runtime: every server process of
// every mode runs here, with the mode's protocol engine plugged in. The
// runtime owns what is the same everywhere: the serve loop over a
// network.Listener, the identity of each peer, size limits per message type
// and role checked before any allocation, concurrency limits per peer,
// per-request timeouts, Prometheus metrics, and graceful shutdown. Errors
// are returned to the caller (cmd/idface), never os.Exit.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/buildinfo"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Server runs one engine behind one listener.
type Server struct {
	p      *config.Params
	name   string
	eng    engine.Engine
	routes map[protocol.Type]engine.Route
	ln     network.Listener
	log    *slog.Logger
	reg    *prometheus.Registry
	m      *metrics
	lim    config.Limits
	// ceil is the largest request any peer may send at all: a larger one
	// is refused on its length; below it the type's route decides, by
	// role first, so that a request its sender's role may not send is
	// refused as such whatever its size.
	ceil int

	state atomic.Int32 // health: starting, serving, stopping (/healthz)

	mu     sync.Mutex
	active map[string]int // requests in progress per peer
	total  int
	fatal  error
	stop   context.CancelFunc
	closer []func() error // released after Serve (log, dialer)
}

// Options of a server built by New.
type Options struct {
	Registry *prometheus.Registry // the engine's collectors are already in it
	Closers  []func() error       // called once Serve has returned
}

// New wraps an engine; the engine's Env.Fatal must call the returned
// server's Fatal. An engine whose routes lack a bound is refused.
func New(p *config.Params, name string, eng engine.Engine, ln network.Listener, log *slog.Logger, opt Options) (*Server, error) {
	routes := eng.Routes()
	if err := engine.CheckRoutes(routes); err != nil {
		return nil, err
	}
	reg := opt.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := &Server{p: p, name: name, eng: eng, routes: routes, ln: ln, log: log, reg: reg,
		lim: p.Limits(), active: map[string]int{}, closer: opt.Closers}
	s.m = newMetrics(reg, eng)
	if rt, ok := routes[protocol.TIdentify]; ok && rt.Op == opIdentify {
		for _, r := range []string{"accepted", "rejected", "refused"} {
			s.m.identify.WithLabelValues(string(p.Mode()), r) // shown at 0 before the first query
		}
	}
	if p.RevealScores() {
		log.Warn("this cluster reveals scores and candidates below the threshold to its clients: research output only; scores for chosen probes reconstruct templates")
	}
	for _, rt := range s.routes {
		s.ceil = max(s.ceil, rt.Max)
	}
	return s, nil
}

// Routes returns the engine's routes as the server serves them.
func (s *Server) Routes() map[protocol.Type]engine.Route { return maps.Clone(s.routes) }

// Engine is the mode's engine the server runs.
func (s *Server) Engine() engine.Engine { return s.eng }

// Fatal stops the server with err (an engine that cannot continue).
func (s *Server) Fatal(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal == nil {
		s.fatal = err
		s.log.Error("stopping", "err", err)
	}
	if s.stop != nil {
		s.stop()
	}
}

// Addr is where the server listens.
func (s *Server) Addr() string { return s.ln.Addr() }

// Serve answers requests until ctx ends or the engine fails; in-flight
// requests get the shutdown grace to finish. It returns the engine's fatal
// error, if any.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.stop = cancel
	failed := s.fatal != nil
	s.mu.Unlock()
	defer cancel()
	if failed {
		cancel()
	}
	engCtx, engStop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() { s.eng.Run(engCtx) })
	// Requests run on their own context: a shutdown stops accepting and lets
	// the requests in progress finish within the grace period.
	reqCtx, reqStop := context.WithCancel(context.Background())
	lnCtx, lnStop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ln.Serve(lnCtx, func(_ context.Context, st *network.Stream) { s.handle(reqCtx, st) })
	}()
	s.state.Store(serving)
	defer s.state.Store(stopping)
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		s.state.Store(stopping)
		s.log.Info("shutting down", "grace", s.p.Timeouts().Shutdown)
		lnStop()
		t := time.AfterFunc(s.p.Timeouts().Shutdown, func() { reqStop(); s.ln.Close() })
		err = <-done
		t.Stop()
	}
	lnStop()
	reqStop()
	engStop()
	bg.Wait()
	s.ln.Close()
	for _, c := range s.closer {
		err = errors.Join(err, c())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return s.fatal
	}
	return err
}

// acquire takes a request slot for peer, or says which limit is reached.
func (s *Server) acquire(peer string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	perPeer, total := s.lim.StreamsPerPeer, s.lim.Streams
	if peer == s.name && s.p.Shards() > 1 {
		// A member's shards and coordinator present its one certificate:
		// each of them gets a peer's share (a decider's coordinator hears
		// from every shard for every query).
		perPeer *= s.p.Shards()
		total += perPeer - s.lim.StreamsPerPeer
	}
	switch {
	case s.active[peer] >= perPeer:
		return fmt.Errorf("%s has %d requests in progress at %s, the limit; retry shortly", peer, s.active[peer], s.name)
	case s.total >= total:
		return fmt.Errorf("%s is serving %d requests, its limit; retry shortly", s.name, s.total)
	}
	s.active[peer]++
	s.total++
	return nil
}

func (s *Server) release(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active[peer]--; s.active[peer] == 0 {
		delete(s.active, peer)
	}
	s.total--
}

// unread is the refusal of a request that could not be read: a sender
// the route does not allow, a frame over its bound, or bytes that are no
// frame.
func (s *Server) unread(err error) *protocol.Error {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		s.m.refused.WithLabelValues("forbidden").Inc()
		return pe
	case errors.Is(err, network.ErrFrameTooLarge):
		s.m.refused.WithLabelValues("too_large").Inc()
		return protocol.Errorf(protocol.CodeBadRequest, "request: %v", err)
	}
	return protocol.Errorf(protocol.CodeBadRequest, "reading the request: %v", err)
}

// scrubHealth fills in which configuration this server runs, for
// everyone, and takes out what a requester of role may not see: row maps
// go to servers only, whatever the engine put in (engine.Env.Health), and
// the degraded limit to operators only.
func (s *Server) scrubHealth(h *protocol.HealthOK, role network.Role) {
	hash := s.p.Hash()
	h.ConfigSerial = uint32(s.p.Serial())
	copy(h.ConfigHash[:], hash[:])
	switch role {
	case network.RoleOperator:
		h.Digest = nil
	case network.RoleDevice:
		h.Digest, h.InDoubt, h.Peers, h.Empty, h.Live, h.DegradedLimit = nil, 0, nil, false, 0, 0
	default:
		h.DegradedLimit = 0 // an operator's
	}
}

// handle serves one request stream.
func (s *Server) handle(ctx context.Context, st *network.Stream) {
	peer := st.Peer()
	reply := func(m protocol.Msg) {
		if err := st.WriteFrame(protocol.Marshal(m)); err != nil {
			s.log.Debug("reply not delivered", "to", peer.Name, "err", err)
		}
	}
	if err := s.acquire(peer.Name); err != nil {
		s.m.refused.WithLabelValues("busy").Inc()
		reply(protocol.Errorf(protocol.CodeUnavailable, "%v", err))
		return
	}
	defer s.release(peer.Name)
	start := time.Now()
	tm := s.p.Timeouts()
	st.SetDeadline(start.Add(tm.Request))
	var route engine.Route
	b, err := st.ReadFrameLimit(s.ceil, func(head []byte, n int) (int, error) {
		if len(head) < 2 || head[0] != protocol.Version {
			return 2, nil // Decode explains
		}
		t := protocol.Type(head[1])
		r, ok := s.routes[t]
		if !ok || !r.From.Has(peer.Role) {
			return 0, protocol.Errorf(protocol.CodeForbidden, "%s (%s) may not send %v to %s", peer.Name, peer.Role, t, s.name)
		}
		route = r
		if !r.Query && n <= r.Max {
			// A change's request (a batch of shares: tens of MB) is read
			// within the bound its handling gets for its size, not one
			// request's timeout: a loaded host reads it slowly.
			st.SetDeadline(start.Add(rpc.ChangeBound(tm.Request, n)))
		}
		return r.Max, nil
	})
	if err != nil {
		reply(s.unread(err))
		return
	}
	m, err := protocol.Decode(b)
	if err != nil {
		s.m.refused.WithLabelValues("malformed").Inc()
		e := protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		s.m.countIdentify(route.Op, s.p.Mode(), e)
		reply(e)
		return
	}
	limit := tm.Request
	if route.Long {
		limit = tm.Identify // an identification and its parts at the other servers
	}
	if !route.Query {
		// A change runs to its end, however slow its host or its peers,
		// within a bound that grows with its size; its requests to
		// other servers wait while those report progress, and it reports
		// its own (protocol.Working) to its requester.
		limit = rpc.ChangeBound(tm.Request, len(b))
	}
	st.SetDeadline(start.Add(limit))
	rctx, cancel := context.WithDeadline(ctx, start.Add(limit))
	defer cancel()
	stopWorking := func() {}
	if !route.Query {
		rctx = rpc.Patient(rctx, tm.Request)
		stopWorking = working(rctx, st, tm.Progress)
	}
	// A requester that gives up on a query (it stops reading: a timeout, a
	// cancelled query, a coordinator that stopped waiting) ends the
	// handler's context: the work it would have done for nobody stops,
	// downstream requests too. Changes run to their end (engine.Route.
	// Query). Handlers never close their own writing: the reply below is
	// written once the handler returns.
	if gone := st.Abandoned(); gone != nil && route.Query {
		go func() { // ends with rctx, at the latest when the handler returns
			select {
			case <-gone:
				cancel()
			case <-rctx.Done():
			}
		}()
	}
	resp := s.call(rctx, route.Handle, engine.Request{From: peer, Msg: m, Stream: st}, route.Op)
	stopWorking() // before the reply: one writer at a time
	if h, ok := resp.(*protocol.HealthOK); ok {
		s.scrubHealth(h, peer.Role)
	}
	code := "ok"
	if resp != nil {
		if e, ok := resp.(*protocol.Error); ok {
			code = codeLabel(e.Code)
		}
		s.m.countIdentify(route.Op, s.p.Mode(), resp)
		reply(resp)
	}
	s.m.observe(route.Op, code, time.Since(start), st)
}

// Health states for /healthz.
const (
	starting int32 = iota
	serving
	stopping
)

// MetricsHandler serves the Prometheus registry at /metrics and the
// server's health at /healthz: 200 "serving" while it takes requests, 503
// while it starts, stops or has failed (Kubernetes' probes, docs/DEPLOY.md).
// Health says nothing about rows or peers: 'idface cluster status' does.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		state := "starting"
		switch s.state.Load() {
		case serving:
			state = "serving"
		case stopping:
			state = "stopping"
		}
		s.mu.Lock()
		if s.fatal != nil {
			state = "failed"
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if state != "serving" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, state)
	})
	return mux
}

// metrics are the runtime's collectors: requests, latency and bytes per
// operation, refusals, and the engine's row gauges. They count requests
// and bytes, never anything about a template.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	refused  *prometheus.CounterVec
	identify *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, eng engine.Engine) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_requests_total", Help: "Requests answered, by operation and result."}, []string{"op", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idface_request_seconds", Help: "Time to answer a request, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"op"}),
		bytesIn:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_request_bytes_received_total", Help: "Application bytes received on request streams, by operation."}, []string{"op"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_request_bytes_sent_total", Help: "Application bytes sent on request streams, by operation."}, []string{"op"}),
		refused:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_requests_refused_total", Help: "Requests refused before the engine saw them, by reason."}, []string{"reason"}),
		identify: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_identify_total",
			Help: "Identifications this server answered to clients (it is their entry), by mode and result: accepted (an id), rejected (none), refused (an error instead of an answer)."}, []string{"mode", "result"}),
	}
	in := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "idface_build_info", Help: "Always 1; the labels are the build of this server's binary (idface version).",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Revision, "goversion": in.GoVersion}})
	build.Set(1)
	gauge := func(name, help string, f func(engine.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(eng.Stats())) })
	}
	reg.MustRegister(m.requests, m.latency, m.bytesIn, m.bytesOut, m.refused, m.identify, build,
		gauge("idface_rows", "Row slots, live or not.", func(s engine.Stats) int { return s.Rows }),
		gauge("idface_live_rows", "Rows that take part in identification.", func(s engine.Stats) int { return s.Live }),
		gauge("idface_unsettled", "Transactions undecided here or decisions not yet acknowledged.", func(s engine.Stats) int { return s.Unsettled }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// opIdentify is the operation of a client's identification, the one
// idface_identify_total counts.
const opIdentify = "identify"

// countIdentify counts the answer to a client's identification.
func (m *metrics) countIdentify(op string, mode config.Mode, resp protocol.Msg) {
	if op != opIdentify {
		return
	}
	result := "refused"
	if ok, answered := resp.(*protocol.IdentifyOK); answered {
		result = "rejected"
		if ok.Accepted {
			result = "accepted"
		}
	}
	m.identify.WithLabelValues(string(mode), result).Inc()
}

// codeLabel is an error code as a metric label value: no spaces.
func codeLabel(c protocol.Code) string {
	return strings.ReplaceAll(c.String(), " ", "_")
}

func (m *metrics) observe(op, code string, d time.Duration, st *network.Stream) {
	m.requests.WithLabelValues(op, code).Inc()
	m.latency.WithLabelValues(op).Observe(d.Seconds())
	m.bytesIn.WithLabelValues(op).Add(float64(st.Received()))
	m.bytesOut.WithLabelValues(op).Add(float64(st.Sent()))
}

// call runs a handler; a panic (a bug: nothing from outside may cause one)
// fails that request only, logged with its stack, instead of the server.
func (s *Server) call(ctx context.Context, h engine.Handler, r engine.Request, op string) (resp protocol.Msg) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("a request's handler panicked; the request is refused and the server goes on (a bug: please report it with this log)", "op", op, "from", r.From.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp = protocol.Errorf(protocol.CodeInternal, "%s failed inside the server (a bug, logged there)", op)
		}
	}()
	return h(ctx, r)
}

// working reports progress on a change's stream every interval until the
// returned stop is called (and has returned) or ctx ends: the requester
// waits while this server works (rpc.Patient).
func working(ctx context.Context, st *network.Stream, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		frame := protocol.Marshal(&protocol.Working{})
		for {
			select {
			case <-t.C:
				if st.WriteFrame(frame) != nil {
					return // the requester is gone; the change runs on
				}
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
