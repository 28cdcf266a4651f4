package rpc_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// long bounds a test's wait for what must happen; nothing here depends on
// it being short.
const long = time.Minute

// serve runs h as server "srv" on a fresh memnet (stopped at the test's
// end, after its streams) and returns a client's dialer to it. h gets the
// decoded request.
func serve(t *testing.T, h func(s *network.Stream, req protocol.Msg)) network.Dialer {
	t.Helper()
	n := memnet.New()
	ln, err := n.Listen("srv")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ln.Serve(ctx, func(_ context.Context, s *network.Stream) {
			b, err := s.ReadFrame(rpc.MaxReply)
			if err != nil {
				return
			}
			req, err := protocol.Decode(b)
			if err != nil {
				t.Errorf("the server read no request: %v", err)
				return
			}
			h(s, req)
		})
	}()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })
	return n.Dialer(network.Peer{Name: "cli", Role: network.RoleOperator})
}

// reply answers m; a requester that gave up fails the write, which its
// own checks see.
func reply(s *network.Stream, m protocol.Msg) { s.WriteFrame(protocol.Marshal(m)) }

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// TestCall: a request and its reply, both decoded; the stream's bytes both
// ways (Ask); an Error reply as a *protocol.Error with its code.
func TestCall(t *testing.T) {
	d := serve(t, func(s *network.Stream, req protocol.Msg) {
		switch m := req.(type) {
		case *protocol.Health:
			ok := &protocol.HealthOK{Name: "srv", Mode: "2pc"}
			if m.Peers { // the request itself reached the server
				ok.InDoubt = 1
			}
			reply(s, ok)
		default:
			reply(s, protocol.Errorf(protocol.CodeUnknownID, "no row %q", "x"))
		}
	})
	resp, err := rpc.Call(ctx(t, long), d, "srv", &protocol.Health{Peers: true})
	if ok, _ := resp.(*protocol.HealthOK); err != nil || ok == nil || ok.Name != "srv" || ok.InDoubt != 1 {
		t.Fatalf("Call: %#v %v", resp, err)
	}
	resp, n, err := rpc.Ask(ctx(t, long), d, "srv", &protocol.Health{})
	if ok, _ := resp.(*protocol.HealthOK); err != nil || ok == nil || ok.InDoubt != 0 {
		t.Fatalf("Ask: %#v %v", resp, err)
	}
	if want := 2*4 + len(protocol.Marshal(&protocol.Health{})) + len(protocol.Marshal(resp)); n != uint64(want) {
		t.Fatalf("Ask counted %d bytes, want %d (two frames)", n, want)
	}
	resp, err = rpc.Call(ctx(t, long), d, "srv", &protocol.Delete{ID: "x"})
	var pe *protocol.Error
	if resp != nil || !errors.As(err, &pe) || pe.Code != protocol.CodeUnknownID || pe.Msg != `no row "x"` {
		t.Fatalf("an Error reply: %#v %v", resp, err)
	}
}

// TestBadReplies: a reply that does not decode, one over MaxReply and a
// stream closed without a reply are errors naming the server, not a
// panic or a wait.
func TestBadReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func(s *network.Stream)
		says string
	}{
		{"undecodable", func(s *network.Stream) { s.WriteFrame([]byte{0xff, 0xff, 1}) }, "from srv: "},
		{"over MaxReply", func(s *network.Stream) {
			var h [4]byte
			binary.BigEndian.PutUint32(h[:], rpc.MaxReply+1)
			s.Write(h[:])
		}, "frame exceeds"},
		{"no reply", func(*network.Stream) {}, "reading from srv: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := serve(t, func(s *network.Stream, _ protocol.Msg) { tc.h(s) })
			resp, err := rpc.Call(ctx(t, long), d, "srv", &protocol.Health{})
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %#v %v, want an error saying %q", resp, err, tc.says)
			}
		})
	}
}

// TestWorking: reports of progress (protocol.Working) are not the reply;
// under Patient each one gives the server patience again, so a change
// that reports for longer than patience is waited for, while one silent
// for patience is given up on, saying so.
func TestWorking(t *testing.T) {
	const patience = 2 * time.Second
	// Reports every 100 ms for 1.5 patience: only extensions keep the
	// wait open (a stall of the whole process of most of patience would
	// fail it).
	const every, reports = 100 * time.Millisecond, 30
	d := serve(t, func(s *network.Stream, req protocol.Msg) {
		n := reports
		if _, ok := req.(*protocol.Health); ok {
			n = 2 // a plain Call skips reports too
		}
		for range n {
			reply(s, &protocol.Working{})
			time.Sleep(every)
		}
		reply(s, &protocol.HealthOK{Name: "srv"})
	})
	if resp, err := rpc.Call(ctx(t, long), d, "srv", &protocol.Health{}); err != nil || resp.Type() != protocol.THealthOK {
		t.Fatalf("a reply after two reports: %v %v", resp, err)
	}
	t0 := time.Now()
	resp, err := rpc.Call(rpc.Patient(context.Background(), patience), d, "srv", &protocol.Delete{ID: "x"})
	if err != nil || resp.Type() != protocol.THealthOK {
		t.Fatalf("a patient wait through %d reports: %v %v", reports, resp, err)
	}
	if waited := time.Since(t0); waited < patience {
		t.Fatalf("waited %v, less than patience: the test proves nothing", waited)
	}
}

// TestSilent: a server that reads the request and never answers is given
// up on at ctx's deadline, or after patience without a report of
// progress; Ask stops waiting when ctx is cancelled.
func TestSilent(t *testing.T) {
	var arrived atomic.Int32
	got := make(chan struct{}, 4)
	d := serve(t, func(s *network.Stream, _ protocol.Msg) {
		arrived.Add(1)
		got <- struct{}{}
		<-s.Abandoned() // the requester gave up
	})
	// Short waits: each must end, however slow the machine.
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := rpc.Call(c, d, "srv", &protocol.Health{}); err == nil || !strings.Contains(err.Error(), "srv did not answer in time") {
		t.Fatalf("a deadline: %v", err)
	}
	_, err := rpc.Call(rpc.Patient(context.Background(), 200*time.Millisecond), d, "srv", &protocol.Health{})
	if err == nil || !strings.Contains(err.Error(), "nor report progress within 200ms") {
		t.Fatalf("patience: %v", err)
	}
	c, cancel = context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { _, _, err := rpc.Ask(c, d, "srv", &protocol.Health{}); res <- err }()
	<-got
	<-got
	<-got // the third request is at the server
	cancel()
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("a cancelled Ask answered")
		}
	case <-time.After(long):
		t.Fatal("Ask went on waiting after its context was cancelled")
	}
	if n := arrived.Load(); n != 3 {
		t.Fatalf("%d requests arrived, want 3 (one each)", n)
	}
}

// TestReadReply: on a stream of its own, ReadReply returns the reply, an
// Error reply as a *protocol.Error, and fails on a stream already closed
// for reading.
func TestReadReply(t *testing.T) {
	d := serve(t, func(s *network.Stream, req protocol.Msg) {
		if _, ok := req.(*protocol.Health); ok {
			reply(s, &protocol.HealthOK{Name: "srv"})
			return
		}
		reply(s, protocol.Errorf(protocol.CodeBadRequest, "no"))
	})
	open := func(req protocol.Msg) *network.Stream {
		s, err := d.Open(ctx(t, long), "srv")
		if err != nil {
			t.Fatal(err)
		}
		s.SetDeadline(time.Now().Add(long))
		if err := s.WriteFrame(protocol.Marshal(req)); err != nil {
			t.Fatal(err)
		}
		s.CloseWrite()
		return s
	}
	s := open(&protocol.Health{})
	if resp, err := rpc.ReadReply(ctx(t, long), s, "srv"); err != nil || resp.Type() != protocol.THealthOK {
		t.Fatalf("ReadReply: %v %v", resp, err)
	}
	// The stream has ended: no second reply.
	if resp, err := rpc.ReadReply(ctx(t, long), s, "srv"); err == nil || !strings.Contains(err.Error(), "reading from srv") {
		t.Fatalf("a second reply on an ended stream: %v %v", resp, err)
	}
	s.Finish()
	s = open(&protocol.Delete{})
	var pe *protocol.Error
	if _, err := rpc.ReadReply(ctx(t, long), s, "srv"); !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		t.Fatalf("an Error reply: %v", err)
	}
	s.Finish()
	s = open(&protocol.Health{})
	s.Finish() // closed for reading before the reply is read
	if resp, err := rpc.ReadReply(ctx(t, long), s, "srv"); err == nil || strings.Contains(err.Error(), "in time") {
		t.Fatalf("ReadReply on a closed stream: %v %v", resp, err)
	}
}

// restarting is a dialer whose first stream fails as one to a server that
// restarted since its connection was made (network.ErrPeerRestarted).
type restarting struct {
	network.Dialer
	opened atomic.Int32
}

func (r *restarting) Open(ctx context.Context, to string) (*network.Stream, error) {
	if r.opened.Add(1) == 1 {
		return network.NewStream(restartedRaw{}, network.Peer{Name: to}), nil
	}
	return r.Dialer.Open(ctx, to)
}

type restartedRaw struct{}

func (restartedRaw) Read([]byte) (int, error)    { return 0, network.ErrPeerRestarted }
func (restartedRaw) Write([]byte) (int, error)   { return 0, network.ErrPeerRestarted }
func (restartedRaw) CloseWrite() error           { return nil }
func (restartedRaw) CancelRead()                 {}
func (restartedRaw) SetDeadline(time.Time) error { return nil }

// TestRestarted: a request that a restarted server never processed is
// sent once more by Call and Ask, never by AskOnce.
func TestRestarted(t *testing.T) {
	d := serve(t, func(s *network.Stream, _ protocol.Msg) { reply(s, &protocol.HealthOK{Name: "srv"}) })
	r := &restarting{Dialer: d}
	if resp, err := rpc.Call(ctx(t, long), r, "srv", &protocol.Health{}); err != nil || resp.Type() != protocol.THealthOK || r.opened.Load() != 2 {
		t.Fatalf("Call after a restart: %v %v, %d streams", resp, err, r.opened.Load())
	}
	r = &restarting{Dialer: d}
	if resp, _, err := rpc.Ask(ctx(t, long), r, "srv", &protocol.Health{}); err != nil || resp.Type() != protocol.THealthOK {
		t.Fatalf("Ask after a restart: %v %v", resp, err)
	}
	r = &restarting{Dialer: d}
	if _, _, err := rpc.AskOnce(ctx(t, long), r, "srv", &protocol.Health{}); !errors.Is(err, network.ErrPeerRestarted) || r.opened.Load() != 1 {
		t.Fatalf("AskOnce after a restart: %v, %d streams", err, r.opened.Load())
	}
}

// TestChangeBound: a change's bound grows with its request, a request
// timeout per 256 KiB beyond 8.
func TestChangeBound(t *testing.T) {
	for _, tc := range []struct {
		bytes int
		want  time.Duration
	}{{0, 8 * time.Second}, {256<<10 - 1, 8 * time.Second}, {256 << 10, 9 * time.Second}, {10 << 20, 48 * time.Second}} {
		if got := rpc.ChangeBound(time.Second, tc.bytes); got != tc.want {
			t.Errorf("ChangeBound(1s, %d) = %v, want %v", tc.bytes, got, tc.want)
		}
	}
}
