// Package network is the interface every protocol flow of idface talks
// through: request streams between authenticated peers, framed messages and
// raw bulk words, with byte counts. Two implementations plug in: QUIC with
// pinned mutual TLS (network/quicnet, the only package that imports
// quic-go) and an in-memory network with injectable faults
// (network/memnet), so that every engine runs mu parties in one process in
// tests.
//
// One request per stream: the caller opens a stream, writes one framed
// request (and possibly raw data), and reads the reply; the server's
// handler reads the request and answers on the same stream.
package network

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idface/idface/protocol/frame"
)

// Role is what an authenticated peer may do; the runtime dispatches on it.
type Role uint8

const (
	RoleParty    Role = iota + 1 // a party holding the database: share holder, local server
	RoleHelper                   // a server holding no rows: key server, decider
	RoleOperator                 // a client that may enroll, delete and identify
	RoleDevice                   // a client that may only identify
)

func (r Role) String() string {
	switch r {
	case RoleParty:
		return "party"
	case RoleHelper:
		return "helper"
	case RoleOperator:
		return "operator"
	case RoleDevice:
		return "device"
	}
	return "unknown"
}

// Pin is the pinned fingerprint of a DER certificate: "sha256:<hex>".
func Pin(der []byte) string {
	h := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Peer is an authenticated remote: who its credentials say it is. On a
// dialed stream only Name is set: the server's role is the configuration's.
type Peer struct {
	Name string
	Role Role
}

// Raw is one bidirectional byte stream of a transport.
type Raw interface {
	Read(p []byte) (int, error)
	Write(p []byte) (int, error)
	// CloseWrite ends the sending direction: the peer reads io.EOF.
	CloseWrite() error
	// CancelRead stops reading: the transport may retire the stream and
	// the peer's writes fail.
	CancelRead()
	SetDeadline(t time.Time) error
}

// Dialer opens request streams to the servers it knows by name.
type Dialer interface {
	Open(ctx context.Context, to string) (*Stream, error)
	Close() error
}

// Connector is a Dialer that can also connect to a server without opening
// a stream (a handshake, kept for the next Open): a client learns which
// servers it reaches without sending them anything.
type Connector interface {
	Connect(ctx context.Context, to string) error
	// Connected reports, without waiting, whether a live connection to
	// the server is at hand.
	Connected(to string) bool
}

// Handler serves one request stream from an authenticated peer.
type Handler func(ctx context.Context, s *Stream)

// Listener accepts streams from authenticated peers.
type Listener interface {
	// Serve runs h for every stream until ctx ends or Close is called; it
	// returns after every handler has returned. When ctx ends it stops
	// accepting and waits for the handlers in progress (a graceful
	// shutdown); Close breaks every stream at once.
	Serve(ctx context.Context, h Handler) error
	Addr() string
	Close() error
}

// Stream frames messages on a Raw stream and counts the application bytes
// moved in each direction.
type Stream struct {
	raw  Raw
	peer Peer
	sent atomic.Int64
	recv atomic.Int64
}

// NewStream wraps a transport's stream.
func NewStream(raw Raw, peer Peer) *Stream {
	return &Stream{raw: raw, peer: peer}
}

// Peer is who is at the other end.
func (s *Stream) Peer() Peer { return s.peer }

// Sent and Received return the application bytes moved so far.
func (s *Stream) Sent() int64     { return s.sent.Load() }
func (s *Stream) Received() int64 { return s.recv.Load() }

func (s *Stream) Write(p []byte) (int, error) {
	n, err := s.raw.Write(p)
	s.sent.Add(int64(n))
	return n, err
}

func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.raw.Read(p)
	s.recv.Add(int64(n))
	return n, err
}

// Abandoned is closed once the peer stops reading this stream: a
// requester that gave up on the reply. Nil where the transport cannot
// tell. (Closing this side's writing closes it too.)
func (s *Stream) Abandoned() <-chan struct{} {
	if a, ok := s.raw.(interface{ Abandoned() <-chan struct{} }); ok {
		return a.Abandoned()
	}
	return nil
}

// CloseWrite ends the sending direction (the peer reads io.EOF).
func (s *Stream) CloseWrite() error { return s.raw.CloseWrite() }

// Finish releases a stream whose exchange is complete (or abandoned).
func (s *Stream) Finish() { s.raw.CancelRead() }

// SetDeadline bounds every later Read and Write.
func (s *Stream) SetDeadline(t time.Time) error { return s.raw.SetDeadline(t) }

// ErrPeerRestarted reports a request on a connection the server no longer
// knows: it restarted (or crashed and came back) since the connection was
// made, and answered with a stateless reset. The process running now did
// not process the request (the one before may have, if it crashed after
// reading it, as with any request in flight at a crash); the dialer dials
// again for the next one.
var ErrPeerRestarted = errors.New("network: the server restarted since this connection was made")

// ErrFrameTooLarge reports a frame over the reader's bound.
var ErrFrameTooLarge = errors.New("network: frame exceeds the size limit")

// WriteFrame writes one length-prefixed message (small ones in one write).
func (s *Stream) WriteFrame(msg []byte) error {
	if len(msg) <= 4096 {
		b := frame.Append(make([]byte, 0, frame.Size(len(msg))), len(msg))
		_, err := s.Write(append(b, msg...))
		return err
	}
	var h [frame.Header]byte
	frame.Put(h[:], len(msg))
	if _, err := s.Write(h[:]); err != nil {
		return err
	}
	_, err := s.Write(msg)
	return err
}

// ReadFrame reads one length-prefixed message of at most max bytes.
func (s *Stream) ReadFrame(max int) ([]byte, error) {
	return s.ReadFrameLimit(max, func([]byte, int) (int, error) { return max, nil })
}

// frameChunk is how much a frame buffer grows at a time: a peer that
// announces a large frame gets memory only as fast as it sends bytes.
const frameChunk = 64 << 10

// ReadFrameLimit reads one length-prefixed message of at most ceiling
// bytes whose bound also depends on its first bytes (the protocol's version
// and type): limit sees up to two leading bytes and the announced length
// n (to set a deadline by it) and returns the largest acceptable frame, or
// an error. Nothing beyond those bytes is allocated
// before it has arrived.
func (s *Stream) ReadFrameLimit(ceiling int, limit func(head []byte, n int) (int, error)) ([]byte, error) {
	var h [frame.Header]byte
	if _, err := io.ReadFull(s, h[:]); err != nil {
		return nil, err
	}
	n := frame.Len(h[:])
	if n > ceiling {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, ceiling)
	}
	var hb [2]byte
	head := hb[:min(n, 2)]
	if _, err := io.ReadFull(s, head); err != nil {
		if err == io.EOF { // its length came: the frame is cut short
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("network: truncated frame: %w", err)
	}
	bound, err := limit(head, n)
	if err != nil {
		return nil, err
	}
	if n > bound {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, bound)
	}
	b, err := ReadGrowing(s, append(make([]byte, 0, min(n, frameChunk)), head...), n)
	if err != nil {
		return nil, fmt.Errorf("network: truncated frame: %w", err)
	}
	return b, nil
}

// ReadGrowing reads from r until b holds n bytes, growing b as bytes
// arrive (doubling, from frameChunk): a peer that announces n bytes and
// sends fewer gets memory only for what it sent.
func ReadGrowing(r io.Reader, b []byte, n int) ([]byte, error) {
	for len(b) < n {
		if len(b) == cap(b) {
			b = append(b, make([]byte, min(n-len(b), max(cap(b), frameChunk)))...)[:len(b)]
		}
		m, err := r.Read(b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil && len(b) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}

// WriteWords writes words as raw little-endian bytes without copying.
func (s *Stream) WriteWords(w []uint64) error {
	if len(w) == 0 {
		return nil
	}
	_, err := s.Write(WordBytes(w))
	return err
}

// ReadWords fills w from raw little-endian bytes without copying.
func (s *Stream) ReadWords(w []uint64) error {
	if len(w) == 0 {
		return nil
	}
	_, err := io.ReadFull(s, WordBytes(w))
	return err
}

// WordBytes views words as bytes. The wire is little-endian, which is the
// memory order on every platform idface builds for (checked in init).
func WordBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w))
}

func init() {
	x := uint64(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		panic("network: idface needs a little-endian machine")
	}
}
