package quicnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/network"
)

// wire is the wire version these tests speak (quicnet takes it from its
// caller: idface's is protocol.Version).
const wire = 1

// dir is a one-server directory.
func dir(name, addr string, pins ...string) Directory {
	return func(n string) (string, []string, bool) { return addr, pins, n == name }
}

func ident(t testing.TB, name string) (tls.Certificate, string) {
	t.Helper()
	id, err := GenerateIdentity(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c, id.Pin
}

// echo starts a listener that answers every frame with the same frame.
func echo(t testing.TB, cert tls.Certificate, pins Pins) *Listener {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", cert, pins, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go ln.Serve(ctx, func(ctx context.Context, s *network.Stream) {
		for {
			b, err := s.ReadFrame(1 << 20)
			if err != nil {
				return
			}
			if s.WriteFrame(append([]byte(s.Peer().Name+":"), b...)) != nil {
				return
			}
		}
	})
	t.Cleanup(func() { cancel(); ln.Close() })
	return ln
}

func TestMutualTLSPinned(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "client")
	stranger, _ := ident(t, "mallory")
	ln := echo(t, srv, Pins{cliPin: {Name: "client", Role: network.RoleOperator}})
	addr := ln.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	d := NewDialer(cli, dir("p1", addr, srvPin), wire)
	defer d.Close()
	s, err := d.Open(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFrame([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadFrame(100)
	if err != nil || string(got) != "client:hello" {
		t.Fatalf("got %q, %v", got, err)
	}
	if s.Sent() != 9 || s.Received() != 16 {
		t.Fatalf("counted %d sent, %d received; want 9, 16", s.Sent(), s.Received())
	}

	// A client whose certificate is not pinned is refused.
	bad := NewDialer(stranger, dir("p1", addr, srvPin), wire)
	defer bad.Close()
	if s, err := bad.Open(ctx, "p1"); err == nil {
		s.WriteFrame([]byte("x"))
		if _, err := s.ReadFrame(100); err == nil {
			t.Fatal("unpinned client was served")
		}
	}
	// A server that does not present the pinned certificate is refused.
	if _, err := NewDialer(cli, dir("p1", addr, "sha256:00"), wire).Open(ctx, "p1"); err == nil {
		t.Fatal("server with the wrong pin accepted")
	}
}

// TestVersion: the ALPN carries the wire version its caller gives, so a
// dialer of another version is refused at the handshake; no version is
// refused before any packet is sent.
func TestVersion(t *testing.T) {
	if got := ALPN(6); got != "idface/6" {
		t.Fatalf("ALPN(6) = %q", got)
	}
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "client")
	ln := echo(t, srv, Pins{cliPin: {Name: "client", Role: network.RoleOperator}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	same := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire)
	defer same.Close()
	if _, err := same.Open(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	other := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire+1)
	defer other.Close()
	if _, err := other.Open(ctx, "p1"); err == nil {
		t.Fatal("a dialer of another wire version was served")
	}
	if _, err := NewDialer(cli, dir("p1", ln.Addr(), srvPin), 0).Open(ctx, "p1"); err == nil || !strings.Contains(err.Error(), "no wire version") {
		t.Fatalf("a dialer without a version: %v", err)
	}
	if _, err := Listen("127.0.0.1:0", srv, nil, ListenOptions{}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "no wire version") {
		t.Fatalf("a listener without a version: %v", err)
	}
}

// A server that rotates its key is reached under either pin while the
// directory lists both, and refused under the old one once it is dropped.
func TestDialEitherPinDuringRotation(t *testing.T) {
	old, oldPin := ident(t, "p1")
	next, nextPin := ident(t, "p1")
	cli, cliPin := ident(t, "client")
	pins := Pins{cliPin: {Name: "client", Role: network.RoleOperator}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name    string
		srv     tls.Certificate
		dirPins []string
		ok      bool
	}{
		{"old-key/both-pins", old, []string{oldPin, nextPin}, true},
		{"next-key/both-pins", next, []string{oldPin, nextPin}, true},
		{"next-key/next-pin", next, []string{nextPin}, true},
		{"old-key/next-pin", old, []string{nextPin}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := echo(t, tc.srv, pins)
			d := NewDialer(cli, dir("p1", ln.Addr(), tc.dirPins...), wire)
			defer d.Close()
			s, err := d.Open(ctx, "p1")
			if err != nil {
				if tc.ok {
					t.Fatal(err)
				}
				return
			}
			if !tc.ok {
				t.Fatal("a server presenting an unlisted certificate was accepted")
			}
			if err := s.WriteFrame([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReadFrame(100); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFrameLimitAndDownParty(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	ln := echo(t, srv, Pins{cliPin: {Name: "c", Role: network.RoleOperator}})
	ctx := context.Background()
	d := NewDialer(cli, func(name string) (string, []string, bool) {
		if name == "p9" { // nothing listens here
			return "127.0.0.1:9", []string{srvPin}, true
		}
		return ln.Addr(), []string{srvPin}, name == "p1"
	}, wire)
	defer d.Close()
	s, err := d.Open(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	s.WriteFrame(make([]byte, 200))
	if _, err := s.ReadFrame(100); !errors.Is(err, network.ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	// Nothing listens here: a clear error within the handshake timeout.
	start := time.Now()
	_, err = d.Open(ctx, "p9")
	if err == nil || time.Since(start) > handshakeTimeout+5*time.Second {
		t.Fatalf("dialing a dead party: %v after %v", err, time.Since(start))
	}
}

// BenchmarkTransfer moves 16 MiB per op over one stream on loopback: the
// floor any identify that moves as many bytes is measured against.
func BenchmarkTransfer(b *testing.B) {
	srv, srvPin := ident(b, "p1")
	cli, cliPin := ident(b, "c")
	ln, _ := Listen("127.0.0.1:0", srv, Pins{cliPin: {Name: "c", Role: network.RoleOperator}}, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
	defer ln.Close()
	const size = 16 << 20
	payload := make([]uint64, size/8)
	go ln.Serve(context.Background(), func(ctx context.Context, s *network.Stream) {
		if _, err := s.ReadFrame(16); err != nil {
			return
		}
		s.WriteWords(payload)
	})
	d := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire)
	defer d.Close()
	buf := make([]uint64, size/8)
	b.SetBytes(size)
	for b.Loop() {
		s, err := d.Open(context.Background(), "p1")
		if err != nil {
			b.Fatal(err)
		}
		s.WriteFrame([]byte("go"))
		if err := s.ReadWords(buf); err != nil && err != io.EOF {
			b.Fatal(err)
		}
	}
}

// TestConnectionsKeyedByIdentity: a dialer keeps a connection per server
// identity, not per address, so a server whose pin changes in the
// directory (a rotated key, or an impostor at the same address) is never
// reached through the old connection.
func TestConnectionsKeyedByIdentity(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	ln := echo(t, srv, Pins{cliPin: {Name: "c", Role: network.RoleOperator}})
	pin := srvPin
	d := NewDialer(cli, func(n string) (string, []string, bool) { return ln.Addr(), []string{pin}, n == "p1" }, wire)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := d.Open(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	s.WriteFrame([]byte("x"))
	if _, err := s.ReadFrame(100); err != nil {
		t.Fatal(err)
	}
	_, other := ident(t, "p1")
	pin = other // the directory now pins another certificate at the same address
	if _, err := d.Open(ctx, "p1"); err == nil {
		t.Fatal("the old connection served a server with another pin")
	}
}

// TestConnectionsPerPin: one certificate may hold a bounded number of
// connections; the next is refused with a clear error.
func TestConnectionsPerPin(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	ln, err := Listen("127.0.0.1:0", srv, Pins{cliPin: {Name: "c", Role: network.RoleOperator}}, ListenOptions{Version: wire, ConnsPerPin: 2}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go ln.Serve(context.Background(), func(ctx context.Context, s *network.Stream) { s.ReadFrame(10) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for range 3 {
		d := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire) // a new dialer: a new connection
		defer d.Close()
		s, err := d.Open(ctx, "p1")
		if err == nil {
			err = s.WriteFrame([]byte("x"))
			if err == nil {
				_, err = s.ReadFrame(10)
			}
		}
		errs = append(errs, err)
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "more than 2 connections") {
		t.Fatalf("third connection: %v", errs)
	}
}

// TestStoppedServerTellsItsPeers: a server that stops closes its
// connections with a message, so a dialer's next request reaches the
// restarted server at once instead of failing on the dead connection (or
// waiting out the idle timeout). A stream's own failure (a deadline) does
// not cost the other streams their connection.
func TestStoppedServerTellsItsPeers(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	pins := Pins{cliPin: {Name: "c", Role: network.RoleOperator}}
	serve := func(addr string) *Listener {
		ln, err := Listen(addr, srv, pins, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		go ln.Serve(context.Background(), func(ctx context.Context, s *network.Stream) {
			if b, err := s.ReadFrame(1 << 10); err == nil && string(b) != "hang" {
				s.WriteFrame(b)
			}
			<-ctx.Done()
		})
		return ln
	}
	ln := serve("127.0.0.1:0")
	addr := ln.Addr()
	d := NewDialer(cli, dir("p1", addr, srvPin), wire)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(msg string) error { return callOnce(ctx, d, msg, time.Second) }
	if err := call("a"); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	first := len(d.conns)
	d.mu.Unlock()
	if err := call("hang"); !network.IsTimeout(err) {
		t.Fatalf("a hanging request: %v", err)
	}
	if err := call("b"); err != nil {
		t.Fatalf("after one stream's deadline: %v", err)
	}
	d.mu.Lock()
	if len(d.conns) != first {
		t.Fatal("a stream's deadline dropped the connection")
	}
	d.mu.Unlock()

	ln.Close()
	ln = serve(addr)
	defer ln.Close()
	time.Sleep(50 * time.Millisecond) // the close reaches the dialer
	start := time.Now()
	if err := call("c"); err != nil || time.Since(start) > time.Second {
		t.Fatalf("the restarted server: %v after %v", err, time.Since(start))
	}
}

// TestBulkStreamsHaveTheirOwnConnection: streams opened with a Bulk
// context (a helper's blocks) travel on a connection of their own to the
// same server, so enrollment traffic does not shape their congestion
// window.
func TestBulkStreamsHaveTheirOwnConnection(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	ln := echo(t, srv, Pins{cliPin: {Name: "c", Role: network.RoleOperator}})
	d := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []context.Context{ctx, network.Bulk(ctx), ctx, network.Bulk(ctx)} {
		s, err := d.Open(c, "p1")
		if err != nil {
			t.Fatal(err)
		}
		s.WriteFrame([]byte("x"))
		if _, err := s.ReadFrame(100); err != nil {
			t.Fatal(err)
		}
		s.Finish()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) != 2 {
		t.Fatalf("%d connections for plain and bulk streams to one server, want 2", len(d.conns))
	}
}

// TestDrainRefusesNewRequests: once Serve's context ends, a request in
// progress finishes, while a new request on the same connection is
// refused at once (it does not wait for a handler that never comes), and
// the dialer forgets the draining connection.
func TestDrainRefusesNewRequests(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	ln, err := Listen("127.0.0.1:0", srv, Pins{cliPin: {Name: "c", Role: network.RoleOperator}}, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	started, release := make(chan struct{}), make(chan struct{})
	sctx, drain := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ln.Serve(sctx, func(ctx context.Context, s *network.Stream) {
			b, err := s.ReadFrame(1 << 10)
			if err != nil {
				return
			}
			if string(b) == "slow" {
				close(started)
				<-release
			}
			s.WriteFrame(b)
		})
	}()
	d := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(msg string) error { return callOnce(ctx, d, msg, 5*time.Second) }
	slow := make(chan error, 1)
	go func() { slow <- call("slow") }()
	<-started
	drain()
	time.Sleep(50 * time.Millisecond) // Serve sees its context end
	start := time.Now()
	err = call("new")
	if err == nil || !strings.Contains(err.Error(), "p1 is stopping") {
		t.Fatalf("a new request to a draining server: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the refusal took %v", el)
	}
	d.mu.Lock()
	if len(d.conns) != 0 {
		t.Error("the dialer kept the draining connection")
	}
	d.mu.Unlock()
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with a request in progress", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("the request in progress: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// callOnce sends msg to p1 on a stream of its own and reads the answer,
// which must repeat it, within timeout.
func callOnce(ctx context.Context, d *Dialer, msg string, timeout time.Duration) error {
	s, err := d.Open(ctx, "p1")
	if err != nil {
		return err
	}
	defer s.Finish()
	s.SetDeadline(time.Now().Add(timeout))
	if err := s.WriteFrame([]byte(msg)); err != nil {
		return err
	}
	b, err := s.ReadFrame(1 << 10)
	if err == nil && string(b) != msg {
		err = fmt.Errorf("answered %q", b)
	}
	return err
}

// TestCrashedServerRestarted: a server that crashes tells no peer; once
// it runs again at the same address, a request on the old connection gets
// its stateless reset, reported as network.ErrPeerRestarted, and the next
// request dials again and is answered.
func TestCrashedServerRestarted(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "c")
	pins := Pins{cliPin: {Name: "c", Role: network.RoleOperator}}
	ln := echo(t, srv, pins)
	addr := ln.Addr()
	d := NewDialer(cli, dir("p1", addr, srvPin), wire)
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := func(msg string) error {
		s, err := d.Open(ctx, "p1")
		if err != nil {
			return err
		}
		defer s.Finish()
		s.SetDeadline(time.Now().Add(2 * time.Second))
		if err := s.WriteFrame([]byte(strings.Repeat(msg, 64))); err != nil { // large enough to draw a reset
			return err
		}
		b, err := s.ReadFrame(1 << 12)
		if err == nil && !strings.HasSuffix(string(b), msg) {
			err = fmt.Errorf("answered %q", b)
		}
		return err
	}
	if err := want("a"); err != nil {
		t.Fatal(err)
	}
	ln.udp.Close() // a crash: no connection close reaches the dialer
	ln.Close()
	ln2, err := Listen(addr, srv, pins, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	go ln2.Serve(ctx, func(ctx context.Context, s *network.Stream) {
		if b, err := s.ReadFrame(1 << 12); err == nil {
			s.WriteFrame(b)
		}
	})
	if err := want("b"); !errors.Is(err, network.ErrPeerRestarted) {
		t.Fatalf("a request on the crashed server's connection: %v", err)
	}
	if err := want("c"); err != nil {
		t.Fatalf("the next request: %v", err)
	}
}

// TestAbandoned: a server's stream tells when the requester stops reading
// (Finish: STOP_SENDING), not when it only ends its request.
func TestAbandoned(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "client")
	ln, err := Listen("127.0.0.1:0", srv, Pins{cliPin: {Name: "client", Role: network.RoleOperator}}, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *network.Stream, 1)
	sctx, stop := context.WithCancel(context.Background())
	go ln.Serve(sctx, func(ctx context.Context, s *network.Stream) {
		if _, err := s.ReadFrame(100); err != nil {
			return
		}
		got <- s
		<-s.Abandoned()
	})
	t.Cleanup(func() { stop(); ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire)
	defer d.Close()
	c, err := d.Open(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	c.WriteFrame([]byte("request"))
	c.CloseWrite()
	s := <-got
	select {
	case <-s.Abandoned():
		t.Fatal("abandoned while the requester still reads")
	case <-time.After(100 * time.Millisecond):
	}
	c.Finish()
	select {
	case <-s.Abandoned():
	case <-ctx.Done():
		t.Fatal("the requester stopped reading; not told")
	}
}

// TestCancelledOpenKeepsTheConnection: a request whose context ended
// before its stream opened fails alone; the connection and the other
// requests on it go on (it was closed with code 0, so that another
// shard's cancelled request failed a healthy one with "Application error
// 0x0 (local)" and counted its helper down).
func TestCancelledOpenKeepsTheConnection(t *testing.T) {
	srv, srvPin := ident(t, "p1")
	cli, cliPin := ident(t, "client")
	ln, err := Listen("127.0.0.1:0", srv, Pins{cliPin: {Name: "client", Role: network.RoleOperator}}, ListenOptions{Version: wire}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	sctx, stop := context.WithCancel(context.Background())
	go ln.Serve(sctx, func(ctx context.Context, s *network.Stream) {
		b, err := s.ReadFrame(100)
		if err != nil {
			return
		}
		<-release
		s.WriteFrame(b)
		s.CloseWrite()
	})
	t.Cleanup(func() { stop(); ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := NewDialer(cli, dir("p1", ln.Addr(), srvPin), wire)
	defer d.Close()
	long, err := d.Open(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if err := long.WriteFrame([]byte("waiting")); err != nil {
		t.Fatal(err)
	}
	gone, giveUp := context.WithCancel(ctx)
	giveUp()
	if _, err := d.Open(gone, "p1"); err == nil {
		t.Fatal("a stream opened for a request that had given up")
	}
	close(release)
	b, err := long.ReadFrame(100)
	if err != nil || string(b) != "waiting" {
		t.Fatalf("the other request on the connection: %q, %v", b, err)
	}
}
