package netlab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// WAN joins a lab's hosts through a router host whose relays hold every
// datagram for a one-way delay. Each exposed service (a host and a UDP
// port) gets a WAN address; the other hosts, and this process, reach it
// through the router, so the round trip between two hosts is twice the
// delay, plus what their links add.
//
// The relays sit in a router of their own rather than beside each host
// because that is the path of a real WAN: the sender's access link (its
// Shape: the rate limit applies before the delay, where a real uplink's
// queue is), the propagation delay, then the receiver's access link. One
// relay per service serves every peer, and the hosts run unchanged
// programs that know only the addresses they were given. A service's own
// host reaches it directly, as does this process once Beside names the
// host it sits with (a client on the entry server's LAN).
type WAN struct {
	lab    *Lab
	Router *Host
	delay  time.Duration

	mu     sync.Mutex
	joined map[*Host]bool
	relays []*Relay
	closed bool
}

// NewWAN adds the router host ("router") and routes this process's
// namespace through it. Every datagram between hosts waits delay in the
// router each way.
func (l *Lab) NewWAN(delay time.Duration) (*WAN, error) {
	if delay < 0 {
		return nil, fmt.Errorf("netlab: WAN delay %v is negative", delay)
	}
	l.mu.Lock()
	if len(l.wans) > 0 {
		l.mu.Unlock()
		return nil, errors.New("netlab: the lab has a WAN already")
	}
	l.mu.Unlock()
	router, err := l.AddHost("router")
	if err != nil {
		return nil, err
	}
	w := &WAN{lab: l, Router: router, delay: delay, joined: map[*Host]bool{}}
	l.mu.Lock()
	l.wans = append(l.wans, w)
	l.mu.Unlock()
	if err := ip("route", "add", w.prefix(), "via", router.Addr.String(), "dev", l.bridge); err != nil {
		return nil, fmt.Errorf("netlab: routing to the WAN: %w", err)
	}
	return w, nil
}

// Delay is the one-way delay.
func (w *WAN) Delay() time.Duration { return w.delay }

// prefix is the WAN addresses' network.
func (w *WAN) prefix() string { return w.lab.addr(1, 0).String() + "/24" }

// Addr is the host's WAN address.
func (w *WAN) Addr(h *Host) netip.Addr { return w.lab.addr(1, 10+h.index) }

// Join gives the host its WAN address (on its loopback) and a route to
// the other hosts' WAN addresses through the router. Expose joins the
// service's host; hosts that only send (clients) join with Join.
func (w *WAN) Join(h *Host) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.joined[h] {
		return nil
	}
	if h.lab != w.lab || h == w.Router {
		return fmt.Errorf("netlab: host %s cannot join this WAN", h.Name)
	}
	if err := h.IP("addr", "add", w.Addr(h).String()+"/32", "dev", "lo"); err != nil {
		return err
	}
	if err := h.IP("route", "add", w.prefix(), "via", w.Router.Addr.String(), "dev", "eth0"); err != nil {
		return err
	}
	w.joined[h] = true
	return nil
}

// Expose makes the host's UDP port (its service must listen on it on any
// address, 0.0.0.0) reachable at the host's WAN address and the same port
// through a relay in the router, and returns that address.
func (w *WAN) Expose(h *Host, port uint16) (netip.AddrPort, error) {
	if err := w.Join(h); err != nil {
		return netip.AddrPort{}, err
	}
	wan := netip.AddrPortFrom(w.Addr(h), port)
	if err := w.Router.IP("addr", "replace", wan.Addr().String()+"/32", "dev", "lo"); err != nil {
		return wan, err
	}
	ln, err := w.Router.ListenUDP(wan.String())
	if err != nil {
		return wan, err
	}
	r, err := NewRelay(ln, netip.AddrPortFrom(h.Addr, port), RelayOptions{
		Delay:    w.delay,
		Upstream: func() (*net.UDPConn, error) { return w.Router.ListenUDP("0.0.0.0:0") },
	})
	if err != nil {
		ln.Close()
		return wan, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		r.Close()
		return wan, errors.New("netlab: the lab is closed")
	}
	w.relays = append(w.relays, r)
	return wan, nil
}

// Beside makes this process reach the host's WAN address directly, not
// through the router: this process sits on the host's LAN, as a client
// beside its entry server.
func (w *WAN) Beside(h *Host) error {
	if err := w.Join(h); err != nil {
		return err
	}
	return ip("route", "replace", w.Addr(h).String()+"/32", "via", h.Addr.String(), "dev", w.lab.bridge)
}

// Stats adds up the relays' counters.
func (w *WAN) Stats() RelayStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	var s RelayStats
	for _, r := range w.relays {
		rs := r.Stats()
		s.Packets += rs.Packets
		s.Bytes += rs.Bytes
		s.Drops += rs.Drops
		s.Clients += rs.Clients
	}
	return s
}

func (w *WAN) close() {
	w.mu.Lock()
	w.closed = true
	relays := w.relays
	w.relays = nil
	w.mu.Unlock()
	for _, r := range relays {
		r.Close()
	}
}

// HostPort joins an address and a port, for command lines.
func HostPort(a netip.Addr, port uint16) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(int(port)))
}
