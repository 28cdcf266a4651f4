package quicnet

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/idface/idface/network"
)

// Flow-control windows: an identify moves tens of MB from each peer in one
// stream; quic-go's default 6 MiB stream window would stall it on every
// round trip.
const (
	streamWindow = 64 << 20
	connWindow   = 256 << 20
)

// Timeouts of the transport itself (a connection, not a request: request
// deadlines are config.Timeouts). A party that is down shows up as a
// handshake timeout, never a hang.
const (
	handshakeTimeout = 3 * time.Second
	idleTimeout      = 5 * time.Second
)

// Config returns the QUIC configuration used by every idface endpoint.
func Config() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           handshakeTimeout,
		MaxIdleTimeout:                 idleTimeout,
		KeepAlivePeriod:                time.Second,
		InitialStreamReceiveWindow:     4 << 20,
		MaxStreamReceiveWindow:         streamWindow,
		InitialConnectionReceiveWindow: 8 << 20,
		MaxConnectionReceiveWindow:     connWindow,
		MaxIncomingStreams:             1024,
	}
}

// dialConfig is Config for the dialing side, which receives the bulk
// answers (a helper's blocks: 16 MB at 1M rows) from pinned servers only:
// a new stream starts at the largest window instead of doubling up to it
// over round trips. Listeners keep the small initial window: requests
// are bounded, and a large one would let any client park that much per
// stream.
func dialConfig() *quic.Config {
	c := Config()
	c.InitialStreamReceiveWindow = streamWindow
	c.InitialConnectionReceiveWindow = connWindow
	return c
}

// raw adapts a QUIC stream to network.Raw. On a dialed stream, dead is
// told when an I/O error came from the connection itself (closed, idle,
// reset: the server may have restarted) so the dialer forgets it; a
// stream's own reset or deadline leaves the connection to its other
// streams, except a server's refusal as it drains: then the dialer
// forgets the connection (close false) and lets its streams in progress
// finish.
type raw struct {
	s    *quic.Stream
	conn *quic.Conn // nil on accepted streams
	dead func(close bool, code quic.ApplicationErrorCode)
	name string // the server dialed; "" on accepted streams
}

func (r raw) Read(p []byte) (int, error) {
	n, err := r.s.Read(p)
	return n, r.check(err)
}

func (r raw) Write(p []byte) (int, error) {
	n, err := r.s.Write(p)
	return n, r.check(err)
}

func (r raw) check(err error) error {
	if err == nil || r.conn == nil {
		return err
	}
	if r.conn.Context().Err() != nil {
		r.dead(true, 0)
	}
	// A crashed server's restart: its keep-alive PINGs are too short to
	// draw a reset. The stream that sees the reset first closes the
	// connection with codeRestarted, which the other streams on it may see
	// instead of the reset.
	var reset *quic.StatelessResetError
	var app *quic.ApplicationError
	if errors.As(err, &reset) || errors.As(err, &app) && !app.Remote && app.ErrorCode == codeRestarted {
		r.dead(true, codeRestarted)
		return fmt.Errorf("%s: %w (%w)", r.name, network.ErrPeerRestarted, err)
	}
	var se *quic.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == codeStopping {
		r.dead(false, 0) // the next request dials again
		return fmt.Errorf("%s is stopping and refused the request: %w", r.name, err)
	}
	return refusedCertificate(err, r.name)
}

// TLS alerts a server sends when it does not accept the client's
// certificate (RFC 8446 6.2); QUIC carries them as 0x100 + alert.
var certAlerts = map[uint8]bool{42: true, 43: true, 44: true, 45: true, 46: true, 48: true}

// refusedCertificate explains a server's refusal of this member's
// certificate. With TLS 1.3 the client finishes its handshake before the
// server checks the client's certificate, so the refusal arrives on the
// first read or write, as a bare "tls: bad certificate".
func refusedCertificate(err error, name string) error {
	var te *quic.TransportError
	if err == nil || name == "" || !errors.As(err, &te) || !te.Remote || !te.ErrorCode.IsCryptoError() || !certAlerts[uint8(te.ErrorCode)] {
		return err
	}
	return fmt.Errorf("%s refused this member's certificate (%w): its configuration does not list this member's current key. Was this client removed from the cluster, or its key rotated into a configuration %s does not run yet? ('idface cluster status' shows each server's configuration serial)", name, err, name)
}

func (r raw) CloseWrite() error { return r.s.Close() }
func (r raw) CancelRead()       { r.s.CancelRead(0) }

// Abandoned is closed once the peer stops reading the stream (its
// STOP_SENDING), or this side's writing ends.
func (r raw) Abandoned() <-chan struct{}    { return r.s.Context().Done() }
func (r raw) SetDeadline(t time.Time) error { return r.s.SetDeadline(t) }

// Pins maps certificate pins to the identities allowed to connect.
type Pins map[string]network.Peer

// ListenOptions are the wire version a listener speaks and bounds on what
// one peer may hold open.
type ListenOptions struct {
	// Version is the wire version (the caller's protocol.Version; no
	// default): the ALPN is ALPN(Version), so peers of another version
	// are refused at the handshake.
	Version int
	// ConnsPerPin caps the connections one certificate may hold at once
	// (default 8): a client that opens more is refused at once while every
	// other peer is still served.
	ConnsPerPin int
}

// Listener accepts QUIC connections whose certificate is pinned.
type Listener struct {
	udp    *net.UDPConn
	tr     *quic.Transport
	ln     *quic.Listener
	pins   Pins
	opt    ListenOptions
	log    *slog.Logger
	closed atomic.Bool
	mu     sync.Mutex
	// handlers counts the streams being handled; once draining (Serve's
	// ctx ended), no new one starts.
	handlers sync.WaitGroup
	draining bool
	conns    map[string]int          // open connections per pin
	open     map[*quic.Conn]struct{} // to close, telling the peers, on Close
}

// Listen opens a UDP listener on addr (host:port; port 0 picks one).
func Listen(addr string, cert tls.Certificate, pins Pins, opt ListenOptions, log *slog.Logger) (*Listener, error) {
	if opt.Version <= 0 {
		return nil, fmt.Errorf("quicnet: listening on %s: no wire version (ListenOptions.Version)", addr)
	}
	if opt.ConnsPerPin == 0 {
		opt.ConnsPerPin = 8
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("quicnet: address %s: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("quicnet: listening on %s: %w", addr, err)
	}
	// A restarted server must reset its predecessor's connections at once,
	// or clients keep writing into them until the idle timeout. The key is
	// derived from the private key, so it is stable across restarts and
	// secret.
	key, err := resetKey(cert)
	if err != nil {
		udp.Close()
		return nil, err
	}
	tr := &quic.Transport{Conn: udp, StatelessResetKey: &key}
	ln, err := tr.Listen(ServerTLS(cert, pins, opt.Version), Config())
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("quicnet: listening on %s: %w", addr, err)
	}
	return &Listener{udp: udp, tr: tr, ln: ln, pins: pins, opt: opt, log: log, conns: map[string]int{}, open: map[*quic.Conn]struct{}{}}, nil
}

func resetKey(cert tls.Certificate) (quic.StatelessResetKey, error) {
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return quic.StatelessResetKey{}, fmt.Errorf("quicnet: private key: %w", err)
	}
	h := sha256.New()
	h.Write([]byte("idface stateless reset key v1\x00"))
	h.Write(der)
	var k quic.StatelessResetKey
	copy(k[:], h.Sum(nil))
	return k, nil
}

// Addr returns the bound UDP address.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Application error codes on connections the listener refuses.
const (
	codeRefused      = 1
	codeTooManyConns = 2
	codeStopping     = 3
	codeRestarted    = 4 // this side closed a connection whose server restarted
)

// Serve accepts connections and runs h for every stream until ctx ends or
// Close is called. When ctx ends, handlers in progress finish on their
// connections, while every new stream and connection is refused at once
// (a reset stream, a closed connection, code "stopping"): a peer then
// fails over or retries instead of waiting on a request no one will read.
// Close then closes every connection.
func (l *Listener) Serve(ctx context.Context, h network.Handler) error {
	for {
		conn, err := l.ln.Accept(ctx)
		if err != nil {
			if l.closed.Load() || ctx.Err() != nil {
				l.drain()
				return nil
			}
			return err
		}
		st := conn.ConnectionState().TLS
		if len(st.PeerCertificates) == 0 {
			conn.CloseWithError(codeRefused, "no certificate")
			continue
		}
		pin := Pin(st.PeerCertificates[0].Raw)
		peer, ok := l.pins[pin]
		if !ok { // VerifyPeerCertificate already refused it; belt and braces
			conn.CloseWithError(codeRefused, "certificate not pinned")
			continue
		}
		if !l.hold(pin, conn) {
			l.log.Warn("refused a connection: too many from one peer", "peer", peer.Name, "limit", l.opt.ConnsPerPin)
			conn.CloseWithError(codeTooManyConns, fmt.Sprintf("more than %d connections from %s", l.opt.ConnsPerPin, peer.Name))
			continue
		}
		go func() { // ends when the connection closes (at the latest, Close)
			defer l.release(pin)
			for {
				qs, err := conn.AcceptStream(conn.Context())
				if err != nil {
					return
				}
				if !l.start() {
					qs.CancelRead(codeStopping)
					qs.CancelWrite(codeStopping)
					continue
				}
				s := network.NewStream(raw{s: qs}, peer)
				go func() {
					defer l.handlers.Done()
					h(conn.Context(), s)
					s.CloseWrite()
					s.Finish()
				}()
			}
		}()
	}
}

// start counts a new handler, or reports a listener draining.
func (l *Listener) start() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining {
		return false
	}
	l.handlers.Add(1)
	return true
}

// drain refuses new streams and connections from now on and waits for the
// handlers in progress.
func (l *Listener) drain() {
	l.mu.Lock()
	l.draining = true
	l.mu.Unlock()
	go func() { // connections that complete their handshake from now on
		for {
			c, err := l.ln.Accept(context.Background())
			if err != nil {
				return // Close
			}
			c.CloseWithError(codeStopping, "server stopping")
		}
	}()
	l.handlers.Wait()
}

func (l *Listener) hold(pin string, c *quic.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[pin] >= l.opt.ConnsPerPin {
		return false
	}
	l.conns[pin]++
	l.open[c] = struct{}{}
	context.AfterFunc(c.Context(), func() { // closed by either side
		l.mu.Lock()
		delete(l.open, c)
		l.mu.Unlock()
	})
	return true
}

func (l *Listener) release(pin string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[pin]--; l.conns[pin] <= 0 {
		delete(l.conns, pin)
	}
}

// Close stops accepting and closes every connection, telling each peer
// (quic-go's Transport.Close drops them silently: a peer would find out
// only at its idle timeout, and its next request would fail).
func (l *Listener) Close() error {
	l.closed.Store(true)
	err := l.ln.Close()
	l.mu.Lock()
	open := make([]*quic.Conn, 0, len(l.open))
	for c := range l.open {
		open = append(open, c)
	}
	l.mu.Unlock()
	for _, c := range open { // outside mu: closing runs the AfterFunc
		c.CloseWithError(codeStopping, "server stopping")
	}
	l.tr.Close()
	l.udp.Close() // a Transport does not close the socket it was given
	return err
}

// Directory resolves a server's name to its address and the certificate
// pins it may present (its current one, and its next during a key
// rotation).
type Directory func(name string) (addr string, pins []string, ok bool)

// Dialer opens request streams to pinned servers, keeping one connection
// per server identity (name, address and pins: a rotated key or a moved
// server gets a fresh connection) and re-dialing when it breaks.
type Dialer struct {
	cert    tls.Certificate
	dir     Directory
	version int
	mu      sync.Mutex
	conns   map[string]*quic.Conn
}

// NewDialer returns a dialer presenting cert that finds servers in dir and
// speaks wire version version (the caller's protocol.Version; see
// ListenOptions.Version).
func NewDialer(cert tls.Certificate, dir Directory, version int) *Dialer {
	return &Dialer{cert: cert, dir: dir, version: version, conns: map[string]*quic.Conn{}}
}

// Open opens a new request stream to the named server, which must present
// the certificate pinned for it.
func (d *Dialer) Open(ctx context.Context, name string) (*network.Stream, error) {
	key, addr, pins, err := d.target(ctx, name)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		conn, err := d.conn(ctx, key, name, addr, pins)
		if err != nil {
			return nil, err
		}
		qs, err := conn.OpenStreamSync(ctx)
		if err == nil {
			return network.NewStream(raw{s: qs, conn: conn, dead: func(close bool, code quic.ApplicationErrorCode) { d.drop(key, conn, close, code) }, name: name}, network.Peer{Name: name}), nil
		}
		if errors.Is(ctx.Err(), context.Canceled) && conn.Context().Err() == nil {
			// The requester gave up (a query cancelled elsewhere): the
			// connection and its other streams are sound. A deadline that
			// passed while the open waited for the peer's stream credit is
			// not: the connection is dropped and dialled again, as before.
			return nil, fmt.Errorf("quicnet: opening a stream to %s (%s): %w", name, addr, ctx.Err())
		}
		d.drop(key, conn, true, 0)
		if attempt == 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("quicnet: opening a stream to %s (%s): %w", name, addr, err)
		}
	}
}

// target is where name is, and the key of its connection.
func (d *Dialer) target(ctx context.Context, name string) (key, addr string, pins []string, err error) {
	if d.version <= 0 {
		return "", "", nil, fmt.Errorf("quicnet: no wire version (NewDialer's version)")
	}
	addr, pins, ok := d.dir(name)
	if !ok || len(pins) == 0 {
		return "", "", nil, fmt.Errorf("quicnet: no server %q in the configuration", name)
	}
	key = name + "|" + addr + "|" + strings.Join(pins, ",")
	if network.IsBulk(ctx) {
		key += "|bulk"
	}
	return key, addr, pins, nil
}

// Connect makes (or finds) the connection to name that Open would use,
// opening no stream (network.Connector).
func (d *Dialer) Connect(ctx context.Context, name string) error {
	key, addr, pins, err := d.target(ctx, name)
	if err != nil {
		return err
	}
	_, err = d.conn(ctx, key, name, addr, pins)
	return err
}

// Connected reports whether Open would find a live connection to name
// (network.Connector).
func (d *Dialer) Connected(name string) bool {
	key, _, _, err := d.target(context.Background(), name)
	if err != nil {
		return false
	}
	d.mu.Lock()
	c := d.conns[key]
	d.mu.Unlock()
	return c != nil && c.Context().Err() == nil
}

func (d *Dialer) conn(ctx context.Context, key, name, addr string, pins []string) (*quic.Conn, error) {
	d.mu.Lock()
	c := d.conns[key]
	d.mu.Unlock()
	if c != nil && c.Context().Err() == nil {
		return c, nil
	}
	c, err := quic.DialAddr(ctx, addr, ClientTLS(d.cert, pins, d.version), dialConfig())
	if err != nil {
		var idle *quic.IdleTimeoutError
		var app *quic.ApplicationError
		switch {
		case errors.As(err, &app) && app.ErrorCode == codeTooManyConns:
			return nil, fmt.Errorf("quicnet: %s refused the connection: %s", name, app.ErrorMessage)
		case errors.As(err, &idle) || errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("quicnet: %s (%s) did not answer within %v: is it running?", name, addr, handshakeTimeout)
		}
		return nil, fmt.Errorf("quicnet: connecting to %s (%s): %w", name, addr, err)
	}
	d.mu.Lock()
	if old := d.conns[key]; old != nil && old.Context().Err() == nil {
		d.mu.Unlock()
		c.CloseWithError(0, "duplicate")
		return old, nil
	}
	d.conns[key] = c
	d.mu.Unlock()
	return c, nil
}

// drop forgets connection c, and closes it if asked.
func (d *Dialer) drop(key string, c *quic.Conn, close bool, code quic.ApplicationErrorCode) {
	d.mu.Lock()
	if d.conns[key] == c {
		delete(d.conns, key)
	}
	d.mu.Unlock()
	if close {
		c.CloseWithError(code, "")
	}
}

// Close closes every connection.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, c := range d.conns {
		c.CloseWithError(0, "closing")
		delete(d.conns, k)
	}
	return nil
}
