package network_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
)

// pair returns a client stream whose server side is handed to h.
func pair(t *testing.T, h network.Handler) *network.Stream {
	t.Helper()
	n := memnet.New()
	l, _ := n.Listen("srv")
	go l.Serve(context.Background(), h)
	t.Cleanup(func() { l.Close() })
	s, err := n.Dialer(network.Peer{Name: "c"}).Open(context.Background(), "srv")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReadFrameLimit(t *testing.T) {
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	limit := func(head []byte, _ int) (int, error) {
		if len(head) == 2 && head[1] == 9 {
			return 0, errors.New("type 9 refused")
		}
		return 100, nil
	}
	read := func(raw []byte, close bool) result {
		s := pair(t, func(ctx context.Context, s *network.Stream) {
			s.SetDeadline(time.Now().Add(time.Second))
			b, err := s.ReadFrameLimit(1000, limit)
			got <- result{b, err}
		})
		s.Write(raw)
		if close {
			s.CloseWrite()
		}
		return <-got
	}
	frame := func(n int, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(n)), body...)
	}
	if r := read(frame(3, []byte{1, 2, 3}), false); r.err != nil || string(r.b) != "\x01\x02\x03" {
		t.Fatalf("%v", r)
	}
	// Over the ceiling: refused from the length alone, before any body.
	if r := read(frame(1<<30, nil), false); !errors.Is(r.err, network.ErrFrameTooLarge) {
		t.Fatalf("1 GiB frame: %v", r.err)
	}
	// Over the type's bound.
	if r := read(frame(500, []byte{1, 2}), false); !errors.Is(r.err, network.ErrFrameTooLarge) {
		t.Fatalf("500 bytes of a 100-byte type: %v", r.err)
	}
	if r := read(frame(5, []byte{1, 9}), false); r.err == nil || r.err.Error() != "type 9 refused" {
		t.Fatalf("refused type: %v", r.err)
	}
	// A frame that announces more than it sends.
	if r := read(frame(50, []byte{1, 2, 3}), true); r.err == nil {
		t.Fatal("truncated frame accepted")
	}
}

// A frame announced at the ceiling grows as bytes arrive.
func TestFrameGrows(t *testing.T) {
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i)
	}
	got := make(chan []byte, 1)
	s := pair(t, func(ctx context.Context, s *network.Stream) {
		b, _ := s.ReadFrame(1 << 20)
		got <- b
	})
	s.WriteFrame(body)
	if b := <-got; len(b) != len(body) || b[len(b)-1] != body[len(body)-1] {
		t.Fatalf("%d bytes", len(b))
	}
}
