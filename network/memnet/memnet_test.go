package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/idface/idface/network"
)

// echoServer answers each frame with the peer's name and the frame.
func echoServer(t *testing.T, n *Network, name string) *Listener {
	t.Helper()
	l, err := n.Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go l.Serve(ctx, func(ctx context.Context, s *network.Stream) {
		for {
			b, err := s.ReadFrame(32 << 20)
			if err != nil {
				return
			}
			if s.WriteFrame(append([]byte(s.Peer().Name+":"), b...)) != nil {
				return
			}
		}
	})
	return l
}

func TestRoundTripAndFlowControl(t *testing.T) {
	n := New()
	echoServer(t, n, "srv")
	d := n.Dialer(network.Peer{Name: "cli", Role: network.RoleOperator})
	s, err := d.Open(context.Background(), "srv")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{7}, 5*Window+3) // several windows: the writer blocks and resumes
	go s.WriteFrame(big)
	got, err := s.ReadFrame(10 * Window)
	if err != nil || !bytes.Equal(got, append([]byte("cli:"), big...)) {
		t.Fatalf("echo of %d bytes: %d, %v", len(big), len(got), err)
	}
	if s.Sent() != int64(4+len(big)) || s.Received() != int64(4+4+len(big)) {
		t.Fatalf("counted %d/%d", s.Sent(), s.Received())
	}
	s.CloseWrite()
	if _, err := s.ReadFrame(10); err != io.EOF {
		t.Fatalf("after close: %v", err)
	}
	if _, err := d.Open(context.Background(), "nobody"); err == nil {
		t.Fatal("opened a stream to an unknown server")
	}
}

func TestFaults(t *testing.T) {
	n := New()
	l := echoServer(t, n, "srv")
	d := n.Dialer(network.Peer{Name: "cli", Role: network.RoleOperator})
	ctx := context.Background()

	n.SetFault("cli", "srv", Fault{Refuse: true})
	if _, err := d.Open(ctx, "srv"); err == nil {
		t.Fatal("refused link opened")
	}
	n.SetFault("cli", "srv", Fault{})

	n.SetFault("srv", "cli", Fault{Silent: true})
	s, _ := d.Open(ctx, "srv")
	s.SetDeadline(time.Now().Add(100 * time.Millisecond))
	s.WriteFrame([]byte("x"))
	if _, err := s.ReadFrame(100); !errors.Is(err, os.ErrDeadlineExceeded) || !network.IsTimeout(err) {
		t.Fatalf("silent server: %v", err)
	}
	n.SetFault("srv", "cli", Fault{Delay: 50 * time.Millisecond})
	s, _ = d.Open(ctx, "srv")
	t0 := time.Now()
	s.WriteFrame([]byte("x"))
	if _, err := s.ReadFrame(100); err != nil || time.Since(t0) < 50*time.Millisecond {
		t.Fatalf("delayed answer after %v: %v", time.Since(t0), err)
	}
	n.SetFault("srv", "cli", Fault{Corrupt: func(b []byte) { b[len(b)-1] ^= 1 }})
	s, _ = d.Open(ctx, "srv")
	s.WriteFrame([]byte("x"))
	if b, _ := s.ReadFrame(100); string(b) != "cli:y" {
		t.Fatalf("corrupted answer %q", b)
	}
	n.SetFault("srv", "cli", Fault{ResetAfter: 3})
	s, _ = d.Open(ctx, "srv")
	s.WriteFrame([]byte("x"))
	if _, err := s.ReadFrame(100); err == nil {
		t.Fatal("reset stream delivered a frame")
	}
	n.SetFault("srv", "cli", Fault{})

	// Closing the listener breaks open streams and refuses new ones.
	s, _ = d.Open(ctx, "srv")
	l.Close()
	if _, err := s.ReadFrame(100); err == nil {
		t.Fatal("read from a crashed server")
	}
	if _, err := d.Open(ctx, "srv"); err == nil {
		t.Fatal("opened a stream to a crashed server")
	}
}

func TestCancelReadStopsTheWriter(t *testing.T) {
	n := New()
	l, _ := n.Listen("srv")
	done := make(chan error, 1)
	go l.Serve(context.Background(), func(ctx context.Context, s *network.Stream) {
		s.Finish()
		done <- nil
	})
	defer l.Close()
	s, _ := n.Dialer(network.Peer{Name: "c"}).Open(context.Background(), "srv")
	<-done
	if _, err := s.Write(make([]byte, 3*Window)); err == nil {
		t.Fatal("wrote into a stream nobody reads")
	}
}

// TestAbandoned: a server's stream tells when the requester stops
// reading (Finish), not before.
func TestAbandoned(t *testing.T) {
	n := New()
	l, _ := n.Listen("srv")
	got := make(chan *network.Stream, 1)
	go l.Serve(context.Background(), func(ctx context.Context, s *network.Stream) {
		got <- s
		<-s.Abandoned()
	})
	defer l.Close()
	c, _ := n.Dialer(network.Peer{Name: "c"}).Open(context.Background(), "srv")
	c.WriteFrame([]byte("request"))
	c.CloseWrite()
	s := <-got
	select {
	case <-s.Abandoned():
		t.Fatal("abandoned while the requester still reads")
	case <-time.After(50 * time.Millisecond):
	}
	c.Finish()
	select {
	case <-s.Abandoned():
	case <-time.After(5 * time.Second):
		t.Fatal("the requester stopped reading; not told")
	}
}
