package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/members"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// fakeEngine answers Health at once and Identify when release is closed.
type fakeEngine struct {
	release chan struct{}
	started chan struct{}
	once    sync.Once
	p       *config.Params
}

func (f *fakeEngine) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth: {Op: "health", From: engine.Anyone, Max: protocol.Small, Handle: func(context.Context, engine.Request) protocol.Msg { return &protocol.HealthOK{Name: "x"} }},
		protocol.TIdentify: {Op: "identify", From: engine.Clients, Max: engine.IdentifyBound(f.p), Long: true, Handle: func(ctx context.Context, r engine.Request) protocol.Msg {
			f.once.Do(func() { close(f.started) })
			select {
			case <-f.release:
			case <-ctx.Done():
				return protocol.Errorf(protocol.CodeUnavailable, "cut off")
			}
			return &protocol.IdentifyOK{}
		}},
		protocol.TEnroll: {Op: "enroll", From: engine.Operators, Max: engine.EnrollBound(f.p), Handle: func(context.Context, engine.Request) protocol.Msg { return &protocol.EnrollOK{} }},
	}
}
func (f *fakeEngine) Run(ctx context.Context) { <-ctx.Done() }
func (f *fakeEngine) Stats() engine.Stats     { return engine.Stats{Rows: 3, Live: 2} }

func setup(t *testing.T) (*Server, *fakeEngine, *memnet.Network, context.CancelFunc, chan error) {
	lit := config.Literal{Mode: config.Mode2PC, Dim: 64, Timeout: config.Duration(2 * time.Second),
		Parties: []config.Member{members.Member(t, "p1", "m", ""), members.Member(t, "p2", "m", "")},
		Clients: []config.Member{members.Member(t, "op", "", config.RoleOperator), members.Member(t, "dev", "", config.RoleDevice)}}
	p, err := config.New(lit, "")
	if err != nil {
		t.Fatal(err)
	}
	n := memnet.New()
	ln, _ := n.Listen("p1")
	f := &fakeEngine{p: p, release: make(chan struct{}), started: make(chan struct{})}
	s, err := New(p, "p1", f, ln, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, f, n, cancel, done
}

func call(t *testing.T, n *memnet.Network, who network.Peer, frame []byte) (protocol.Msg, error) {
	t.Helper()
	s, err := n.Dialer(who).Open(context.Background(), "p1")
	if err != nil {
		return nil, err
	}
	defer s.Finish()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	s.Write(frame)
	s.CloseWrite()
	return rpc.ReadReply(context.Background(), s, "p1")
}

func frame(m protocol.Msg) []byte {
	b := protocol.Marshal(m)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func code(err error) protocol.Code {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}

func TestDispatchAndLimits(t *testing.T) {
	s, f, n, _, _ := setup(t)
	dev := network.Peer{Name: "dev", Role: network.RoleDevice}
	op := network.Peer{Name: "op", Role: network.RoleOperator}
	if m, err := call(t, n, dev, frame(&protocol.Health{})); err != nil || m.Type() != protocol.THealthOK {
		t.Fatalf("health: %v", err)
	}
	// A device may not enroll; an operator may.
	if _, err := call(t, n, dev, frame(&protocol.Enroll{Items: []protocol.Item{{ID: "a", Template: []float32{1}}}})); code(err) != protocol.CodeForbidden {
		t.Fatalf("device enroll: %v", err)
	}
	if _, err := call(t, n, op, frame(&protocol.Enroll{Items: []protocol.Item{{ID: "a", Template: []float32{1}}}})); err != nil {
		t.Fatal(err)
	}
	// A type no route answers, a party message from a client, garbage, and
	// frames over the bounds.
	for name, fr := range map[string][]byte{
		"decide":     frame(&protocol.Decide{}),
		"unknown":    {0, 0, 0, 2, protocol.Version, 250},
		"garbage":    {0, 0, 0, 3, 9, 9, 9},
		"1 GiB":      binary.BigEndian.AppendUint32(nil, 1<<30),
		"big health": append(binary.BigEndian.AppendUint32(nil, 10000), protocol.Version, byte(protocol.THealth)),
		"big ident":  append(binary.BigEndian.AppendUint32(nil, 100000), protocol.Version, byte(protocol.TIdentify)),
	} {
		if _, err := call(t, n, dev, fr); code(err) != protocol.CodeForbidden && code(err) != protocol.CodeBadRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Requests over the per-peer limit are refused at once; others are
	// still served.
	lim := s.lim.StreamsPerPeer
	var wg sync.WaitGroup
	for range lim {
		wg.Go(func() { call(t, n, dev, frame(&protocol.Identify{TopK: 1, Template: []float32{1}})) })
	}
	<-f.started
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		busy := s.active["dev"]
		s.mu.Unlock()
		if busy == lim {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests in progress", busy, lim)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := call(t, n, dev, frame(&protocol.Health{})); code(err) != protocol.CodeUnavailable || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := call(t, n, op, frame(&protocol.Health{})); err != nil {
		t.Fatalf("another peer was not served: %v", err)
	}
	close(f.release)
	wg.Wait()

	// Metrics count requests by operation.
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`idface_requests_total{code="ok",op="identify"}`, `idface_live_rows 2`, `idface_requests_refused_total{reason="busy"} 1`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// healthz is the server's /healthz: its status code and body.
func healthz(s *Server) (int, string) {
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestShutdownAndFatal(t *testing.T) {
	s, f, n, cancel, done := setup(t)
	dev := network.Peer{Name: "dev", Role: network.RoleDevice}
	for code, body := healthz(s); code != 200 || body != "serving"; code, body = healthz(s) {
		if body != "starting" || code != 503 {
			t.Fatalf("healthz before serving: %d %q", code, body)
		}
		time.Sleep(time.Millisecond) // Serve runs in its own goroutine
	}
	got := make(chan error, 1)
	go func() {
		_, err := call(t, n, dev, frame(&protocol.Identify{TopK: 1, Template: []float32{1}}))
		got <- err
	}()
	<-f.started
	cancel() // SIGTERM: the request in progress may finish
	time.Sleep(50 * time.Millisecond)
	close(f.release)
	if err := <-got; err != nil {
		t.Fatalf("the request in progress was cut off: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil // for the cleanup
	if code, body := healthz(s); code != 503 || body != "stopping" {
		t.Fatalf("healthz after shutdown: %d %q", code, body)
	}

	s2, _, _, _, done2 := setup(t)
	s2.Fatal(errors.New("log broken"))
	if err := <-done2; err == nil || err.Error() != "log broken" {
		t.Fatalf("fatal: %v", err)
	}
	if code, body := healthz(s2); code != 503 || body != "failed" {
		t.Fatalf("healthz after a fatal error: %d %q", code, body)
	}
	done2 <- nil
	_ = s
}

// slowEngine runs a deletion (a change) for as long as its test says, and
// never answers an enrollment (a change stuck in a wait).
type slowEngine struct {
	fakeEngine
	takes time.Duration
}

func (f *slowEngine) Routes() map[protocol.Type]engine.Route {
	r := f.fakeEngine.Routes()
	r[protocol.TDelete] = engine.Route{Op: "delete", From: engine.Operators, Max: protocol.Small, Handle: func(ctx context.Context, _ engine.Request) protocol.Msg {
		select {
		case <-time.After(f.takes):
			return &protocol.DeleteOK{}
		case <-ctx.Done():
			return protocol.Errorf(protocol.CodeUnavailable, "cut off")
		}
	}}
	r[protocol.TEnroll] = engine.Route{Op: "enroll", From: engine.Operators, Max: engine.EnrollBound(f.p), Handle: func(ctx context.Context, _ engine.Request) protocol.Msg {
		<-ctx.Done()
		return protocol.Errorf(protocol.CodeUnavailable, "the change ran past its bound")
	}}
	return r
}

// TestSlowChangeIsNotDown: a change that runs three request timeouts is
// waited for by a patient requester (its server reports progress), not
// by one with a plain deadline; a change stuck in a wait ends at its
// bound (rpc.ChangeBound); a server that reports nothing is given up on
// after one request timeout.
func TestSlowChangeIsNotDown(t *testing.T) {
	const timeout = 2 * time.Second // a report every 333 ms: a host stalled past 1.6 s fails it
	lit := config.Literal{Mode: config.Mode2PC, Dim: 64, Timeout: config.Duration(timeout),
		Parties: []config.Member{members.Member(t, "p1", "m", ""), members.Member(t, "p2", "m", "")},
		Clients: []config.Member{members.Member(t, "op", "", config.RoleOperator)}}
	p, err := config.New(lit, "")
	if err != nil {
		t.Fatal(err)
	}
	n := memnet.New()
	ln, _ := n.Listen("p1")
	f := &slowEngine{fakeEngine: fakeEngine{p: p}, takes: 2 * timeout}
	s, err := New(p, "p1", f, ln, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	d := n.Dialer(network.Peer{Name: "op", Role: network.RoleOperator})

	if _, err := rpc.Call(rpc.Patient(context.Background(), timeout), d, "p1", &protocol.Delete{ID: "a"}); err != nil {
		t.Fatalf("a patient requester gave up on a change that reports progress: %v", err)
	}
	plain, stop := context.WithTimeout(context.Background(), timeout)
	_, err = rpc.Call(plain, d, "p1", &protocol.Delete{ID: "a"})
	stop()
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("a requester with a plain deadline: %v", err)
	}

	t0 := time.Now()
	_, err = rpc.Call(rpc.Patient(context.Background(), timeout), d, "p1", &protocol.Enroll{})
	bound := rpc.ChangeBound(timeout, len(protocol.Marshal(&protocol.Enroll{})))
	if code(err) != protocol.CodeUnavailable || time.Since(t0) < bound {
		t.Fatalf("a change stuck in a wait: %v after %v (its bound is %v)", err, time.Since(t0), bound)
	}

	// A server that reads the request and reports nothing.
	mute, _ := n.Listen("p2")
	go mute.Serve(ctx, func(ctx context.Context, s *network.Stream) {
		s.ReadFrame(1 << 10)
		<-ctx.Done()
	})
	_, err = rpc.Call(rpc.Patient(context.Background(), timeout), d, "p2", &protocol.Delete{ID: "a"})
	if err == nil || !strings.Contains(err.Error(), "nor report progress") {
		t.Fatalf("a silent server: %v", err)
	}
}

// TestRefusalReachesTheWriter (issue 38 item 1): a request the sender's
// role may not send is refused as such whatever its size, and the
// refusal reaches a sender still writing a large request. Before, a
// device's 2 MiB enrollment read as a lost answer ("the peer stopped
// reading"; over QUIC "stream canceled by remote") or as "frame exceeds
// the size limit", and bulk enrollment left it in doubt.
func TestRefusalReachesTheWriter(t *testing.T) {
	_, _, n, _, _ := setup(t)
	dev := network.Peer{Name: "dev", Role: network.RoleDevice}
	items := make([]protocol.Item, 8192) // 2 MiB of templates, twice memnet's window
	for i := range items {
		items[i] = protocol.Item{ID: "x", Template: make([]float32, 64)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := rpc.Call(ctx, n.Dialer(dev), "p1", &protocol.Enroll{Items: items})
	if code(err) != protocol.CodeForbidden || !strings.Contains(err.Error(), "dev (device) may not send Enroll to p1") {
		t.Fatalf("a device's large enrollment: %v; want its refusal", err)
	}
}

// TestRefusalReachesTheWriterOverQUIC is TestRefusalReachesTheWriter on
// the transport of the issue: the server's STOP_SENDING cut the device's
// write ("stream 0 canceled by remote with error code 0") before its
// answer was read.
func TestRefusalReachesTheWriterOverQUIC(t *testing.T) {
	ident := func(name string) (tls.Certificate, string) {
		id, err := quicnet.GenerateIdentity(name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, id.Pin
	}
	srv, srvPin := ident("p1")
	dev, devPin := ident("dev")
	ln, err := quicnet.Listen("127.0.0.1:0", srv, quicnet.Pins{devPin: {Name: "dev", Role: network.RoleDevice}}, quicnet.ListenOptions{Version: protocol.Version}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s0, _, _, _, _ := setup(t) // its configuration and engine
	s, err := New(s0.p, "p1", s0.eng, ln, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	d := quicnet.NewDialer(dev, func(string) (string, []string, bool) { return ln.Addr(), []string{srvPin}, true }, protocol.Version)
	defer d.Close()
	items := make([]protocol.Item, 32768) // 8 MiB: beyond QUIC's flow-control windows
	for i := range items {
		items[i] = protocol.Item{ID: "x", Template: make([]float32, 64)}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	_, err = rpc.Call(cctx, d, "p1", &protocol.Enroll{Items: items})
	if code(err) != protocol.CodeForbidden || !strings.Contains(err.Error(), "dev (device) may not send Enroll to p1") {
		t.Fatalf("a device's large enrollment over QUIC: %v; want its refusal", err)
	}
}
