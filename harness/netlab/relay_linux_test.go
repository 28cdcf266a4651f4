package netlab

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// TestRelayForwardsCoalescedRuns sends a run of datagrams in one
// UDP_SEGMENT send, as quic-go does: the relay takes it in as a run and
// passes it on as one, and the sink, which does not coalesce, receives
// the same datagrams in the same order.
func TestRelayForwardsCoalescedRuns(t *testing.T) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	r := newTestRelay(t, sink.LocalAddr().(*net.UDPAddr).AddrPort(), RelayOptions{Delay: time.Millisecond})
	src, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const seg, n = 1200, 10
	run := make([]byte, 0, seg*n)
	for i := range n - 1 {
		run = append(run, bytes.Repeat([]byte{byte(i)}, seg)...)
	}
	run = append(run, []byte("a short last datagram")...)
	if err := writeRun(src, run, seg, r.Addr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	for i := range n {
		sink.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, _, err := sink.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		want := run[i*seg : min(len(run), (i+1)*seg)]
		if !bytes.Equal(buf[:k], want) {
			t.Fatalf("datagram %d: %d bytes starting %x, want %d starting %x", i, k, buf[:min(k, 4)], len(want), want[:4])
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Packets < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := r.Stats(); s.Packets != n || s.Bytes != uint64(len(run)) {
		t.Fatalf("stats %+v: want %d datagrams, %d bytes", s, n, len(run))
	}
}
