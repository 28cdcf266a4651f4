// Package memnet is an in-memory network for tests: named servers and
// dialers in one process, byte streams with flow control, deadlines and
// half-close like QUIC streams, and faults injected per direction (refuse,
// withhold, delay, corrupt, reset) so that engines can be run with silent
// or faulty peers.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/idface/idface/network"
)

// Fault changes what one side of a link does. It applies to the bytes that
// `from` writes on streams between `from` and `to` (either side may have
// opened the stream), except Refuse, which applies to opening.
type Fault struct {
	// Refuse makes `from`'s attempts to open a stream to `to` fail as if
	// `to` were down.
	Refuse bool
	// Silent swallows every byte `from` writes: the other side waits until
	// its deadline (a peer that never answers).
	Silent bool
	// Delay holds each write by `from` for this long.
	Delay time.Duration
	// Corrupt may change the bytes `from` writes (it gets a copy).
	Corrupt func(p []byte)
	// ResetAfter breaks the stream once `from` has written more than this
	// many bytes on it (0: never).
	ResetAfter int64
}

// Window is how many bytes a direction buffers before the writer blocks.
const Window = 1 << 20

// Network is a set of named servers reachable in memory.
type Network struct {
	mu      sync.Mutex
	servers map[string]*Listener
	faults  map[[2]string]Fault
}

// New returns an empty network.
func New() *Network {
	return &Network{servers: map[string]*Listener{}, faults: map[[2]string]Fault{}}
}

// SetFault sets the fault on the bytes `from` writes to `to` (replacing an
// earlier one); the zero Fault clears it. It applies to streams opened
// afterwards.
func (n *Network) SetFault(from, to string, f Fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults[[2]string{from, to}] = f
}

func (n *Network) fault(from, to string) Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faults[[2]string{from, to}]
}

// Listen registers a server under name. Streams are accepted once Serve
// runs and refused after Close.
func (n *Network) Listen(name string) (*Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l := n.servers[name]; l != nil && !l.isClosed() {
		return nil, fmt.Errorf("memnet: %s is already listening", name)
	}
	l := &Listener{net: n, name: name, ready: make(chan struct{}), done: make(chan struct{})}
	n.servers[name] = l
	return l, nil
}

// Dialer returns a dialer that presents the identity self.
func (n *Network) Dialer(self network.Peer) network.Dialer { return &dialer{net: n, self: self} }

type dialer struct {
	net  *Network
	self network.Peer
}

func (d *dialer) Close() error { return nil }

func (d *dialer) Open(ctx context.Context, to string) (*network.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.net.mu.Lock()
	l := d.net.servers[to]
	d.net.mu.Unlock()
	if l == nil || d.net.fault(d.self.Name, to).Refuse {
		return nil, fmt.Errorf("memnet: %s is not reachable", to)
	}
	up, down := newPipe(), newPipe() // client -> server, server -> client
	client := &end{r: down, w: up, fault: d.net.fault(d.self.Name, to)}
	server := &end{r: up, w: down, fault: d.net.fault(to, d.self.Name)}
	if err := l.accept(ctx, network.NewStream(server, d.self), client, server); err != nil {
		return nil, err
	}
	return network.NewStream(client, network.Peer{Name: to}), nil
}

// Listener is a server's endpoint.
type Listener struct {
	net  *Network
	name string
	mu   sync.Mutex
	h    network.Handler
	ctx  context.Context
	wg   sync.WaitGroup
	ends map[*end]bool
	// draining is set when Serve's context ends: no new streams.
	draining bool
	ready    chan struct{} // closed when Serve starts
	done     chan struct{} // closed by Close
	once     sync.Once
}

func (l *Listener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Addr names the endpoint.
func (l *Listener) Addr() string { return "mem:" + l.name }

// Serve runs h for every stream until ctx ends or Close is called.
func (l *Listener) Serve(ctx context.Context, h network.Handler) error {
	l.mu.Lock()
	if l.isClosed() {
		l.mu.Unlock()
		return errors.New("memnet: listener closed")
	}
	l.h, l.ctx, l.ends = h, context.WithoutCancel(ctx), map[*end]bool{}
	close(l.ready)
	l.mu.Unlock()
	select {
	case <-ctx.Done(): // stop accepting; let the streams in progress finish
		l.mu.Lock()
		l.draining = true
		l.mu.Unlock()
	case <-l.done:
	}
	l.wg.Wait()
	return nil
}

func (l *Listener) accept(ctx context.Context, s *network.Stream, ends ...*end) error {
	select { // a server that is starting up is waited for, like a handshake
	case <-l.ready:
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("memnet: %s did not start serving: %w", l.name, ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isClosed() || l.draining {
		return fmt.Errorf("memnet: %s is not reachable", l.name)
	}
	for _, e := range ends {
		l.ends[e] = true
	}
	l.wg.Go(func() {
		l.h(l.ctx, s)
		s.CloseWrite()
		s.Finish()
		l.mu.Lock()
		for _, e := range ends {
			delete(l.ends, e)
		}
		l.mu.Unlock()
	})
	return nil
}

// Close stops accepting and breaks every open stream, like a crash.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		for e := range l.ends {
			e.r.breakWith(errReset)
			e.w.breakWith(errReset)
		}
		l.mu.Unlock()
		l.net.mu.Lock()
		if l.net.servers[l.name] == l {
			delete(l.net.servers, l.name)
		}
		l.net.mu.Unlock()
	})
	return nil
}

var (
	errReset     = errors.New("memnet: stream reset")
	errCancelled = errors.New("memnet: the peer stopped reading")
	errClosed    = errors.New("memnet: write after close")
)

// pipe is one direction of a stream.
type pipe struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	buf     []byte
	eof     bool          // the writer closed
	stopped bool          // the reader cancelled
	gone    chan struct{} // closed when the reader cancels
	err     error         // reset
}

func newPipe() *pipe { return &pipe{changed: make(chan struct{}), gone: make(chan struct{})} }

// signal wakes every waiter (caller holds mu).
func (p *pipe) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *pipe) breakWith(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
		p.signal()
	}
}

// wait releases mu until the pipe changes or the deadline passes, then
// takes mu again; it reports a passed deadline.
func (p *pipe) wait(deadline time.Time) error {
	ch := p.changed
	p.mu.Unlock()
	defer p.mu.Lock()
	if deadline.IsZero() {
		<-ch
		return nil
	}
	d := time.Until(deadline)
	if d <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

// end is one side of a stream: it reads r and writes w.
type end struct {
	r, w    *pipe
	fault   Fault
	mu      sync.Mutex
	dl      time.Time
	written int64
}

func (e *end) deadline() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dl
}

func (e *end) SetDeadline(t time.Time) error {
	e.mu.Lock()
	e.dl = t
	e.mu.Unlock()
	for _, p := range []*pipe{e.r, e.w} { // waiters re-check the new deadline
		p.mu.Lock()
		p.signal()
		p.mu.Unlock()
	}
	return nil
}

func (e *end) Read(b []byte) (int, error) {
	p := e.r
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 {
		switch {
		case p.err != nil:
			return 0, p.err
		case p.eof:
			return 0, io.EOF
		case p.stopped:
			return 0, errCancelled
		}
		if err := p.wait(e.deadline()); err != nil {
			return 0, err
		}
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	if len(p.buf) == 0 {
		p.buf = nil
	}
	p.signal()
	return n, nil
}

func (e *end) Write(b []byte) (int, error) {
	f := e.fault
	if f.Delay > 0 {
		dl := e.deadline()
		if !dl.IsZero() && time.Until(dl) < f.Delay {
			time.Sleep(max(0, time.Until(dl)))
			return 0, os.ErrDeadlineExceeded
		}
		time.Sleep(f.Delay)
	}
	if f.ResetAfter > 0 && e.written+int64(len(b)) > f.ResetAfter {
		e.r.breakWith(errReset)
		e.w.breakWith(errReset)
		return 0, errReset
	}
	e.written += int64(len(b))
	if f.Silent {
		return len(b), nil
	}
	if f.Corrupt != nil {
		b = append([]byte(nil), b...)
		f.Corrupt(b)
	}
	p := e.w
	p.mu.Lock()
	defer p.mu.Unlock()
	done := 0
	for done < len(b) {
		switch {
		case p.err != nil:
			return done, p.err
		case p.stopped:
			return done, errCancelled
		case p.eof:
			return done, errClosed
		}
		if room := Window - len(p.buf); room > 0 {
			k := min(room, len(b)-done)
			p.buf = append(p.buf, b[done:done+k]...)
			done += k
			p.signal()
			continue
		}
		if err := p.wait(e.deadline()); err != nil {
			return done, err
		}
	}
	return done, nil
}

func (e *end) CloseWrite() error {
	if e.fault.Silent { // the end of the stream is withheld too
		return nil
	}
	p := e.w
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.eof {
		p.eof = true
		p.signal()
	}
	return nil
}

func (e *end) CancelRead() {
	p := e.r
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		close(p.gone)
	}
	p.stopped, p.buf = true, nil
	p.signal()
}

// Abandoned is closed once the peer stops reading what this end writes.
func (e *end) Abandoned() <-chan struct{} { return e.w.gone }
