package netlab

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// echo starts a UDP echo server on loopback that prefixes every reply with
// nothing and records the addresses it heard from.
func echo(t testing.TB) (netip.AddrPort, func() map[netip.AddrPort]int) {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var mu sync.Mutex
	seen := map[netip.AddrPort]int{}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mu.Lock()
			seen[from]++
			mu.Unlock()
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort(), func() map[netip.AddrPort]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[netip.AddrPort]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

func newTestRelay(t testing.TB, target netip.AddrPort, o RelayOptions) *Relay {
	t.Helper()
	r, err := ListenRelay("127.0.0.1:0", target, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func dial(t testing.TB, to netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRelayDelaysBothWays sends datagrams from two clients through a relay
// to an echo server: every client gets only its own replies, in order, one
// round trip of twice the delay later, and the target sees the relay's
// address rather than the clients'.
func TestRelayDelaysBothWays(t *testing.T) {
	target, seen := echo(t)
	const delay = 15 * time.Millisecond
	r := newTestRelay(t, target, RelayOptions{Delay: delay})
	clients := []*net.UDPConn{dial(t, r.Addr()), dial(t, r.Addr())}
	const n = 10
	var wg sync.WaitGroup
	for ci, c := range clients {
		wg.Go(func() {
			buf := make([]byte, 64)
			for i := range n {
				msg := binary.BigEndian.AppendUint32([]byte{byte(ci)}, uint32(i))
				t0 := time.Now()
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				k, err := c.Read(buf)
				rtt := time.Since(t0)
				if err != nil {
					t.Errorf("client %d, datagram %d: %v", ci, i, err)
					return
				}
				if k != 5 || buf[0] != byte(ci) || binary.BigEndian.Uint32(buf[1:5]) != uint32(i) {
					t.Errorf("client %d got %x, want its datagram %d", ci, buf[:k], i)
				}
				// The lower bound is exact; the upper one allows a shared,
				// race-instrumented machine its scheduling delays.
				if rtt < 2*delay || rtt > 2*delay+50*time.Millisecond {
					t.Errorf("client %d, datagram %d: round trip %v, want about %v", ci, i, rtt, 2*delay)
				}
			}
		})
	}
	wg.Wait()
	from := seen()
	if len(from) != 2 {
		t.Fatalf("the target heard from %v, want two relay sockets", from)
	}
	for a, k := range from {
		if k != n {
			t.Errorf("the target got %d datagrams from %v, want %d", k, a, n)
		}
		for _, c := range clients {
			if a == c.LocalAddr().(*net.UDPAddr).AddrPort() {
				t.Errorf("the target saw the client's own address %v", a)
			}
		}
	}
	// The last reply is counted just after it is sent: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Packets < 4*n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := r.Stats(); s.Packets != 4*n || s.Clients != 2 || s.Drops != 0 {
		t.Errorf("stats %+v, want %d packets, 2 clients, no drops", s, 4*n)
	}
}

// TestRelayKeepsOrderAndSpacing sends a burst and then spaced datagrams:
// all arrive in order, and each is held for the delay from when it was
// sent (the relay does not release it early with the one before).
func TestRelayKeepsOrderAndSpacing(t *testing.T) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	setBuffers(sink)
	const delay = 10 * time.Millisecond
	r := newTestRelay(t, sink.LocalAddr().(*net.UDPAddr).AddrPort(), RelayOptions{Delay: delay})
	c := dial(t, r.Addr())

	const burst, spaced = 1000, 5
	const gap = 20 * time.Millisecond
	sentAt := make([]time.Time, burst+spaced)
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		msg := make([]byte, 1300)
		for i := range burst + spaced {
			if i >= burst {
				time.Sleep(gap)
			}
			binary.BigEndian.PutUint32(msg, uint32(i))
			sentAt[i] = time.Now()
			c.Write(msg)
		}
	}()
	buf := make([]byte, 2000)
	last := -1
	var arrivals []time.Time
	got := 0
	for {
		sink.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, _, err := sink.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		i := int(binary.BigEndian.Uint32(buf[:k]))
		if i <= last {
			t.Fatalf("datagram %d arrived after %d", i, last)
		}
		last = i
		got++
		if i >= burst {
			arrivals = append(arrivals, time.Now())
		}
		if i == burst+spaced-1 {
			break
		}
	}
	// Without root the socket buffers stay small and loopback may drop
	// part of the burst; the spaced datagrams must all arrive.
	if got < burst/10 || len(arrivals) != spaced {
		t.Fatalf("%d of %d datagrams arrived, %d of the %d spaced ones", got, burst+spaced, len(arrivals), spaced)
	}
	// Each spaced datagram is held for the delay from when it was sent,
	// not released early with the one before it (which would close the
	// gaps). A loaded machine only makes arrivals later, so only the
	// lower bound is checked: the gaps as measured at the reader depend
	// on its scheduling.
	<-sending
	for i, at := range arrivals {
		if d := at.Sub(sentAt[burst+i]); d < delay {
			t.Errorf("spaced datagram %d arrived %v after it was sent, less than the delay %v (the gaps before it: %v)", i, d, delay, gap)
		}
	}
}

// TestRelayDropsWhenFull fills a tiny queue: the overflow is dropped and
// counted, the rest delivered.
func TestRelayDropsWhenFull(t *testing.T) {
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	r := newTestRelay(t, sink.LocalAddr().(*net.UDPAddr).AddrPort(), RelayOptions{Delay: 200 * time.Millisecond, MaxQueue: 10 * 1000})
	c := dial(t, r.Addr())
	msg := make([]byte, 1000)
	for range 30 {
		c.Write(msg)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Drops+r.Stats().Packets < 30 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := r.Stats(); s.Packets != 10 || s.Drops != 20 {
		t.Fatalf("stats %+v: want 10 forwarded and 20 dropped", s)
	}
}

// TestRelayForgetsIdleClients checks that an idle mapping is closed.
func TestRelayForgetsIdleClients(t *testing.T) {
	target, _ := echo(t)
	r := newTestRelay(t, target, RelayOptions{IdleTimeout: 50 * time.Millisecond})
	c := dial(t, r.Addr())
	c.Write([]byte("x"))
	buf := make([]byte, 8)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Clients != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("an idle client is still mapped: %+v", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Write([]byte("y")) // and a new mapping serves it again
	if _, err := c.Read(buf); err != nil || buf[0] != 'y' {
		t.Fatalf("after expiry: %v %q", err, buf[:1])
	}
}

func TestRelayRefusesBadOptions(t *testing.T) {
	for _, c := range []struct {
		target netip.AddrPort
		o      RelayOptions
	}{
		{netip.MustParseAddrPort("127.0.0.1:9"), RelayOptions{Delay: -time.Second}},
		{netip.AddrPort{}, RelayOptions{}},
		{netip.MustParseAddrPort("127.0.0.1:0"), RelayOptions{}},
	} {
		if r, err := ListenRelay("127.0.0.1:0", c.target, c.o); err == nil {
			r.Close()
			t.Errorf("%v %+v: accepted", c.target, c.o)
		}
	}
	if _, err := ListenRelay("no-such-host-name.invalid:1", netip.MustParseAddrPort("127.0.0.1:9"), RelayOptions{}); err == nil {
		t.Error("a bad listen address was accepted")
	}
}

func TestRelayCloseTwice(t *testing.T) {
	target, _ := echo(t)
	r, err := ListenRelay("127.0.0.1:0", target, RelayOptions{Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, r.Addr())
	c.Write([]byte("held back when the relay closes"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRelayThroughput pushes 1,300-byte datagrams through a relay
// with a 10 ms delay on loopback, one per send and in runs of 20 (as
// quic-go sends), as fast as one sender can, and reports what the sink
// received (the sender and the sink share the machine's cores). The
// runs need Linux; elsewhere run=20 sends 26 KB datagrams.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, run := range []int{1, 20} {
		b.Run(fmt.Sprintf("run=%d", run), func(b *testing.B) {
			sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer sink.Close()
			setBuffers(sink)
			r := newTestRelay(b, sink.LocalAddr().(*net.UDPAddr).AddrPort(), RelayOptions{Delay: 10 * time.Millisecond})
			for range b.N {
				res := MeasureThroughput(dial(b, r.Addr()), sink, 0, run, time.Second)
				b.ReportMetric(res.DeliveredMbit, "Mbit/s")
				b.ReportMetric(res.LossPct, "loss%")
			}
		})
	}
}
