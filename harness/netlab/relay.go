package netlab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// RelayOptions configure a Relay; zero values take the defaults.
type RelayOptions struct {
	// Delay is added to every datagram in each direction: the round trip
	// between a client and the target grows by twice Delay.
	Delay time.Duration
	// Upstream opens the socket one client's datagrams leave through
	// towards the target (one socket per client, so the target's replies
	// can be told apart). Default: an unbound UDP socket in this process's
	// network namespace; a Lab passes one that opens it in the relay's
	// namespace.
	Upstream func() (*net.UDPConn, error)
	// MaxQueue bounds the bytes held back in each direction; a datagram
	// that does not fit is dropped, as a router's full buffer drops it.
	// Default 64 MiB: 50 ms at 10 Gbit/s.
	MaxQueue int
	// IdleTimeout drops a client's mapping (and its upstream socket) after
	// this long without a datagram either way. Default 2 minutes.
	IdleTimeout time.Duration
}

// RelayStats count what a relay moved and dropped.
type RelayStats struct {
	Packets, Bytes uint64 // forwarded, both directions
	Drops          uint64 // datagrams dropped on a full queue
	Clients        int    // mappings open now
}

// Relay forwards UDP datagrams from any client to one target after a fixed
// delay and relays the target's replies back to the client that caused
// them, after the same delay. Each client gets its own upstream socket: the
// target sees the relay's address (a NAT-like mapping), and a reply is
// returned by the socket it arrived on. Order and spacing are kept: each
// direction is one FIFO of datagrams stamped on arrival and sent by one
// goroutine at arrival + Delay (with a fixed delay, arrival order is
// departure order, so the FIFO is the time-ordered queue).
type Relay struct {
	ln     *net.UDPConn
	target netip.AddrPort
	o      RelayOptions

	up, down *delayLine // client -> target, target -> client

	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
	closed   bool

	wg      sync.WaitGroup
	stop    chan struct{}
	packets atomic.Uint64
	bytes   atomic.Uint64
}

// session is one client's mapping: its address and the upstream socket.
type session struct {
	client netip.AddrPort
	conn   *net.UDPConn
	last   atomic.Int64 // unix nanoseconds of the last datagram
}

// NewRelay starts relaying datagrams that arrive on ln to target. The
// relay owns ln and closes it in Close.
func NewRelay(ln *net.UDPConn, target netip.AddrPort, o RelayOptions) (*Relay, error) {
	if o.Delay < 0 {
		return nil, fmt.Errorf("netlab: relay delay %v is negative", o.Delay)
	}
	if !target.IsValid() || target.Port() == 0 {
		return nil, fmt.Errorf("netlab: relay target %v: want an address with a port", target)
	}
	if o.Upstream == nil {
		o.Upstream = func() (*net.UDPConn, error) { return net.ListenUDP("udp", nil) }
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 64 << 20
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	setBuffers(ln)
	coalesce(ln)
	r := &Relay{ln: ln, target: target, o: o, sessions: map[netip.AddrPort]*session{}, stop: make(chan struct{})}
	r.up = newDelayLine(o.Delay, o.MaxQueue)
	r.down = newDelayLine(o.Delay, o.MaxQueue)
	r.wg.Add(4)
	go func() { defer r.wg.Done(); r.up.run(r.stop, r.sent) }()
	go func() { defer r.wg.Done(); r.down.run(r.stop, r.sent) }()
	go func() { defer r.wg.Done(); r.readClients() }()
	go func() { defer r.wg.Done(); r.expire() }()
	return r, nil
}

// ListenRelay listens on addr (host:port, in this process's network
// namespace) and relays to target.
func ListenRelay(addr string, target netip.AddrPort, o RelayOptions) (*Relay, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("netlab: relay address %q: %w", addr, err)
	}
	ln, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("netlab: relay: %w", err)
	}
	r, err := NewRelay(ln, target, o)
	if err != nil {
		ln.Close()
	}
	return r, err
}

// Addr is the address clients send to.
func (r *Relay) Addr() netip.AddrPort { return r.ln.LocalAddr().(*net.UDPAddr).AddrPort() }

// Stats reports the relay's counters.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	n := len(r.sessions)
	r.mu.Unlock()
	return RelayStats{Packets: r.packets.Load(), Bytes: r.bytes.Load(), Drops: r.up.drops.Load() + r.down.drops.Load(), Clients: n}
}

// Close stops relaying and closes every socket; datagrams still held back
// are dropped.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.stop)
	err := r.ln.Close()
	for _, s := range r.sessions {
		s.conn.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *Relay) sent(datagrams, bytes int) {
	r.packets.Add(uint64(datagrams))
	r.bytes.Add(uint64(bytes))
}

// readClients reads datagrams from clients and queues them to the target.
func (r *Relay) readClients() {
	scratch, oob := make([]byte, maxDatagram), make([]byte, oobSize)
	for {
		n, seg, from, err := readRun(r.ln, scratch, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || r.isClosed() {
				return
			}
			continue // e.g. ICMP port unreachable reported on the socket
		}
		s, err := r.session(from)
		if err != nil {
			continue // no socket for this client now: as a lost datagram
		}
		s.last.Store(time.Now().UnixNano())
		r.up.push(scratch[:n], seg, s.conn, r.target)
	}
}

// session returns the client's mapping, opening it on its first datagram.
func (r *Relay) session(client netip.AddrPort) (*session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.sessions[client]; s != nil {
		return s, nil
	}
	if r.closed {
		return nil, net.ErrClosed
	}
	conn, err := r.o.Upstream()
	if err != nil {
		return nil, err
	}
	setBuffers(conn)
	coalesce(conn)
	s := &session{client: client, conn: conn}
	r.sessions[client] = s
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.readReplies(s) }()
	return s, nil
}

// readReplies reads the target's replies to one client and queues them
// back to it.
func (r *Relay) readReplies(s *session) {
	scratch, oob := make([]byte, maxDatagram), make([]byte, oobSize)
	for {
		n, seg, from, err := readRun(s.conn, scratch, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if from.Addr().Unmap() != r.target.Addr().Unmap() || from.Port() != r.target.Port() {
			continue // only the target's replies travel back
		}
		s.last.Store(time.Now().UnixNano())
		r.down.push(scratch[:n], seg, r.ln, s.client)
	}
}

// expire drops mappings idle for longer than IdleTimeout.
func (r *Relay) expire() {
	t := time.NewTicker(max(r.o.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.mu.Lock()
			for c, s := range r.sessions {
				if now.Sub(time.Unix(0, s.last.Load())) > r.o.IdleTimeout {
					s.conn.Close() // its reader returns
					delete(r.sessions, c)
				}
			}
			r.mu.Unlock()
		}
	}
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// maxDatagram is the largest UDP payload, and the largest run of
// coalesced datagrams.
const maxDatagram = 65535

// delayLine holds datagrams for a fixed delay and sends them in arrival
// order from one goroutine.
type delayLine struct {
	delay time.Duration
	max   int

	mu    sync.Mutex
	q     []datagram // ring buffer
	head  int
	n     int
	bytes int
	wake  chan struct{}
	drops atomic.Uint64
}

// datagram is one datagram, or a run of datagrams of seg bytes each.
type datagram struct {
	due  time.Time
	buf  *[]byte
	seg  int
	conn *net.UDPConn
	to   netip.AddrPort
}

func newDelayLine(delay time.Duration, maxBytes int) *delayLine {
	return &delayLine{delay: delay, max: maxBytes, q: make([]datagram, 1024), wake: make(chan struct{}, 1)}
}

// count is the number of datagrams in n bytes of seg-byte datagrams (seg
// 0: one datagram).
func count(n, seg int) int {
	if seg == 0 {
		return 1
	}
	return (n + seg - 1) / seg
}

// Buffers come in three sizes: a datagram up to a typical MTU, a short
// run of them, and the largest run.
var (
	bufSizes = [...]int{2 << 10, 16 << 10, maxDatagram}
	bufPools [len(bufSizes)]sync.Pool
)

func getBuf(n int) *[]byte {
	for i, size := range bufSizes {
		if n <= size {
			if b, ok := bufPools[i].Get().(*[]byte); ok {
				return b
			}
			b := make([]byte, 0, size)
			return &b
		}
	}
	b := make([]byte, 0, n)
	return &b
}

func release(buf *[]byte) {
	for i, size := range bufSizes {
		if cap(*buf) == size {
			bufPools[i].Put(buf)
			return
		}
	}
}

// push copies p (a datagram, or a run of seg-byte datagrams) and queues
// it to leave through conn towards to at now + delay; it drops p when the
// queue is full.
func (d *delayLine) push(p []byte, seg int, conn *net.UDPConn, to netip.AddrPort) {
	buf := getBuf(len(p))
	*buf = append((*buf)[:0], p...)
	d.mu.Lock()
	if d.bytes+len(p) > d.max {
		d.mu.Unlock()
		d.drops.Add(uint64(count(len(p), seg)))
		release(buf)
		return
	}
	if d.n == len(d.q) { // grow the ring, keeping order
		q := make([]datagram, 2*len(d.q))
		for i := range d.n {
			q[i] = d.q[(d.head+i)%len(d.q)]
		}
		d.q, d.head = q, 0
	}
	// Stamped under the lock: stamps are in queue order even when several
	// readers push, so the head is always the first one due.
	d.q[(d.head+d.n)%len(d.q)] = datagram{due: time.Now().Add(d.delay), buf: buf, seg: seg, conn: conn, to: to}
	d.n++
	d.bytes += len(p)
	empty := d.n == 1
	d.mu.Unlock()
	if empty {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// run sends datagrams as they fall due until stop is closed.
func (d *delayLine) run(stop <-chan struct{}, sent func(datagrams, bytes int)) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]datagram, 0, 64)
	for {
		d.mu.Lock()
		if d.n == 0 {
			d.mu.Unlock()
			select {
			case <-d.wake:
				continue
			case <-stop:
				return
			}
		}
		now := time.Now()
		if wait := d.q[d.head].due.Sub(now); wait > 0 {
			d.mu.Unlock()
			// Later arrivals are due later still: nothing can need sending
			// before the head, so a plain wait for the head is enough.
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-stop:
				return
			}
			continue
		}
		batch = batch[:0]
		for d.n > 0 && len(batch) < cap(batch) && !d.q[d.head].due.After(now) {
			g := d.q[d.head]
			d.q[d.head] = datagram{}
			d.head = (d.head + 1) % len(d.q)
			d.n--
			d.bytes -= len(*g.buf)
			batch = append(batch, g)
		}
		d.mu.Unlock()
		for _, g := range batch {
			// A failed send (the peer's socket is gone, the socket closed)
			// is a lost datagram, as on a real path.
			if err := writeRun(g.conn, *g.buf, g.seg, g.to); err == nil {
				sent(count(len(*g.buf), g.seg), len(*g.buf))
			}
			release(g.buf)
		}
	}
}
