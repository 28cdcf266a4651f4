package transport

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/quic-go/quic-go"
)

// Flow-control windows: an identify moves tens of MB from each peer in one
// stream; quic-go's default 6 MiB stream window would stall it on every
// round trip.
const (
	streamWindow = 64 << 20
	connWindow   = 256 << 20
)

// Timeouts. A party that is down shows up as a handshake timeout, never a
// hang.
var (
	HandshakeTimeout = 3 * time.Second
	IdleTimeout      = 5 * time.Second
)

// Config returns the QUIC configuration used by every idface endpoint.
func Config() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           HandshakeTimeout,
		MaxIdleTimeout:                 IdleTimeout,
		KeepAlivePeriod:                time.Second,
		InitialStreamReceiveWindow:     4 << 20,
		MaxStreamReceiveWindow:         streamWindow,
		InitialConnectionReceiveWindow: 8 << 20,
		MaxConnectionReceiveWindow:     connWindow,
		MaxIncomingStreams:             1024,
	}
}

// Stream is one request: a bidirectional QUIC stream that frames messages
// and counts the application bytes it moves in each direction.
type Stream struct {
	s    *quic.Stream
	Peer Peer
	// broken, when set, forgets the connection after an I/O failure so the
	// next request dials afresh (the server may have restarted).
	broken func()
	sent   atomic.Int64
	recv   atomic.Int64
}

// Sent and Received return the application bytes moved so far.
func (s *Stream) Sent() int64     { return s.sent.Load() }
func (s *Stream) Received() int64 { return s.recv.Load() }

func (s *Stream) Write(p []byte) (int, error) {
	n, err := s.s.Write(p)
	s.sent.Add(int64(n))
	if err != nil {
		s.fail()
	}
	return n, err
}

func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.s.Read(p)
	s.recv.Add(int64(n))
	if err != nil && err != io.EOF {
		s.fail()
	}
	return n, err
}

func (s *Stream) fail() {
	if s.broken != nil {
		s.broken()
	}
}

// CloseWrite ends the sending direction (the peer reads io.EOF).
func (s *Stream) CloseWrite() error { return s.s.Close() }

// Finish releases a stream whose exchange is complete: it stops reading, so
// quic-go can retire the stream. Without it finished streams keep counting
// against the peer's MaxIncomingStreams and a long-lived connection stalls.
func (s *Stream) Finish() { s.s.CancelRead(0) }

// SetDeadline bounds every later Read and Write.
func (s *Stream) SetDeadline(t time.Time) error { return s.s.SetDeadline(t) }

// ErrFrameTooLarge reports a frame over the reader's bound.
var ErrFrameTooLarge = errors.New("transport: frame exceeds the size limit")

// WriteFrame writes one length-prefixed message.
func (s *Stream) WriteFrame(msg []byte) error {
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], uint32(len(msg)))
	if _, err := s.Write(h[:]); err != nil {
		return err
	}
	_, err := s.Write(msg)
	return err
}

// ReadFrame reads one length-prefixed message of at most max bytes.
func (s *Stream) ReadFrame(max int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(s, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(s, b); err != nil {
		return nil, fmt.Errorf("transport: truncated frame: %w", err)
	}
	return b, nil
}

// WriteWords writes words as raw little-endian bytes without copying.
func (s *Stream) WriteWords(w []uint64) error {
	if len(w) == 0 {
		return nil
	}
	_, err := s.Write(wordBytes(w))
	return err
}

// ReadWords fills w from raw little-endian bytes without copying.
func (s *Stream) ReadWords(w []uint64) error {
	if len(w) == 0 {
		return nil
	}
	_, err := io.ReadFull(s, wordBytes(w))
	return err
}

// wordBytes views words as bytes. The wire is little-endian, which is the
// memory order on every platform idface builds for (checked in init).
func wordBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w))
}

func init() {
	x := uint64(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		panic("transport: idface needs a little-endian machine")
	}
}

// Handler serves one request stream from an authenticated peer.
type Handler func(ctx context.Context, s *Stream)

// Listener accepts QUIC connections whose certificate is pinned.
type Listener struct {
	tr     *quic.Transport
	ln     *quic.Listener
	pins   Pins
	log    *slog.Logger
	wg     sync.WaitGroup
	closed atomic.Bool
}

// Listen opens a UDP listener on addr (host:port; port 0 picks one).
func Listen(addr string, cert tls.Certificate, pins Pins, log *slog.Logger) (*Listener, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: address %s: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("transport: listening on %s: %w", addr, err)
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
	ln, err := tr.Listen(ServerTLS(cert, pins), Config())
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("transport: listening on %s: %w", addr, err)
	}
	return &Listener{tr: tr, ln: ln, pins: pins, log: log}, nil
}

func resetKey(cert tls.Certificate) (quic.StatelessResetKey, error) {
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return quic.StatelessResetKey{}, fmt.Errorf("transport: private key: %w", err)
	}
	h := sha256.New()
	h.Write([]byte("idface stateless reset key v1\x00"))
	h.Write(der)
	var k quic.StatelessResetKey
	copy(k[:], h.Sum(nil))
	return k, nil
}

// Addr returns the bound UDP address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Serve accepts connections and runs h for every stream until ctx ends or
// Close is called.
func (l *Listener) Serve(ctx context.Context, h Handler) error {
	for {
		conn, err := l.ln.Accept(ctx)
		if err != nil {
			if l.closed.Load() || ctx.Err() != nil {
				l.wg.Wait()
				return nil
			}
			return err
		}
		st := conn.ConnectionState().TLS
		if len(st.PeerCertificates) == 0 {
			conn.CloseWithError(1, "no certificate")
			continue
		}
		peer, ok := l.pins[Pin(st.PeerCertificates[0].Raw)]
		if !ok { // VerifyPeerCertificate already refused it; belt and braces
			conn.CloseWithError(1, "certificate not pinned")
			continue
		}
		l.wg.Go(func() {
			for {
				qs, err := conn.AcceptStream(conn.Context())
				if err != nil {
					return
				}
				s := &Stream{s: qs, Peer: peer}
				l.wg.Go(func() {
					h(conn.Context(), s)
					s.s.Close()
					s.Finish()
				})
			}
		})
	}
}

// Close stops accepting and closes every connection.
func (l *Listener) Close() error {
	l.closed.Store(true)
	err := l.ln.Close()
	l.tr.Close()
	return err
}

// Dialer opens request streams to pinned servers, keeping one connection
// per address and re-dialing when it breaks.
type Dialer struct {
	cert  tls.Certificate
	mu    sync.Mutex
	conns map[string]*quic.Conn
}

// NewDialer returns a dialer presenting cert.
func NewDialer(cert tls.Certificate) *Dialer {
	return &Dialer{cert: cert, conns: map[string]*quic.Conn{}}
}

// Open opens a new request stream to the server at addr, which must present
// the certificate with pin. name labels errors.
func (d *Dialer) Open(ctx context.Context, name, addr, pin string) (*Stream, error) {
	for attempt := 0; ; attempt++ {
		conn, err := d.conn(ctx, name, addr, pin)
		if err != nil {
			return nil, err
		}
		qs, err := conn.OpenStreamSync(ctx)
		if err == nil {
			return &Stream{s: qs, Peer: Peer{Name: name, Role: RoleParty}, broken: func() { d.drop(addr, conn) }}, nil
		}
		d.drop(addr, conn)
		if attempt == 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("transport: opening a stream to %s (%s): %w", name, addr, err)
		}
	}
}

func (d *Dialer) conn(ctx context.Context, name, addr, pin string) (*quic.Conn, error) {
	d.mu.Lock()
	c := d.conns[addr]
	d.mu.Unlock()
	if c != nil && c.Context().Err() == nil {
		return c, nil
	}
	c, err := quic.DialAddr(ctx, addr, ClientTLS(d.cert, pin), Config())
	if err != nil {
		var idle *quic.IdleTimeoutError
		if errors.As(err, &idle) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("transport: %s (%s) did not answer within %v: is it running?", name, addr, HandshakeTimeout)
		}
		return nil, fmt.Errorf("transport: connecting to %s (%s): %w", name, addr, err)
	}
	d.mu.Lock()
	if old := d.conns[addr]; old != nil && old.Context().Err() == nil {
		d.mu.Unlock()
		c.CloseWithError(0, "duplicate")
		return old, nil
	}
	d.conns[addr] = c
	d.mu.Unlock()
	return c, nil
}

func (d *Dialer) drop(addr string, c *quic.Conn) {
	d.mu.Lock()
	if d.conns[addr] == c {
		delete(d.conns, addr)
	}
	d.mu.Unlock()
	c.CloseWithError(0, "")
}

// Close closes every connection.
func (d *Dialer) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for a, c := range d.conns {
		c.CloseWithError(0, "closing")
		delete(d.conns, a)
	}
}
