// Package rpc is one request and its reply over a network stream: the
// protocol's messages (package protocol, which does no I/O) on the
// network's streams (package network, which knows no message).
package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
)

// MaxReply bounds a reply read by Call: answers are small (the largest is
// a public key), bulk data travels as raw words on streams.
const MaxReply = 8 << 20

// Call sends one request to the named server and returns its decoded
// reply. An Error reply is returned as a *protocol.Error. The stream ends
// with the call; ctx's deadline bounds every read and write.
//
// A request sent on a connection to a server that has restarted since
// (network.ErrPeerRestarted: the process running now did not process it)
// is sent once more on a new connection, as a caller would retry after
// the crash: requests carry ids (transactions, signed nonces, row ids), so
// a second delivery is refused or answered alike, never applied twice.
func Call(ctx context.Context, d network.Dialer, to string, req protocol.Msg) (protocol.Msg, error) {
	resp, _, err := resend(ctx, d, to, req, false)
	return resp, err
}

// Ask is Call for a request whose answer a cancellation stops waiting
// for at once (another part of the query failed), and it also returns the
// bytes of the stream both ways (the query's traffic).
func Ask(ctx context.Context, d network.Dialer, to string, req protocol.Msg) (protocol.Msg, uint64, error) {
	return resend(ctx, d, to, req, true)
}

// AskOnce is Ask without the resend to a restarted server, for a request
// that must never run twice: a shard's identify draws fresh randomness
// under its coordinator's query id, and two runs of one id would show the
// decider two vectors where one is due.
func AskOnce(ctx context.Context, d network.Dialer, to string, req protocol.Msg) (protocol.Msg, uint64, error) {
	return exchange(ctx, d, to, req, true)
}

// resend is exchange, once more on a new connection to a server that
// restarted since the last one was made.
func resend(ctx context.Context, d network.Dialer, to string, req protocol.Msg, cancellable bool) (protocol.Msg, uint64, error) {
	resp, n, err := exchange(ctx, d, to, req, cancellable)
	if errors.Is(err, network.ErrPeerRestarted) {
		resp, n, err = exchange(ctx, d, to, req, cancellable)
	}
	return resp, n, err
}

// exchange sends one request on a stream of its own and reads the reply;
// cancellable: ctx's cancellation, not only its deadline, ends the wait.
func exchange(ctx context.Context, d network.Dialer, to string, req protocol.Msg, cancellable bool) (protocol.Msg, uint64, error) {
	// Marshalled before the stream opens: the server reads a request from
	// the stream's start within one request timeout, and a batch of shares
	// (tens of MB) takes a while to marshal on a loaded host.
	b := protocol.Marshal(req)
	s, err := d.Open(ctx, to)
	if err != nil {
		return nil, 0, err
	}
	defer s.Finish()
	w := newWait(ctx, len(b))
	w.extend(s)
	if cancellable {
		defer context.AfterFunc(ctx, func() { s.SetDeadline(time.Now()) })()
	}
	if err := s.WriteFrame(b); err != nil {
		if resp := refusal(s, err); resp != nil {
			return nil, uint64(s.Sent() + s.Received()), resp
		}
		return nil, 0, fmt.Errorf("sending to %s: %w", to, err)
	}
	s.CloseWrite() // one request per stream
	resp, err := readReply(ctx, s, to, w)
	return resp, uint64(s.Sent() + s.Received()), err
}

// refusalWait bounds the read of a refusal after a failed write: a server
// that refused the request has written its answer before it stopped
// reading.
const refusalWait = 2 * time.Second

// refusal is the server's answer to a request whose writing failed with
// werr, or nil. A server refuses a request from its first bytes (a type
// the sender's role may not send, a frame over its bound), answers, and
// stops reading: a large request is cut off while it is written, and
// its answer, already on the stream, says why. Without it the refusal
// reads as a lost answer (in doubt) instead of a refusal.
func refusal(s *network.Stream, werr error) *protocol.Error {
	if network.IsTimeout(werr) || errors.Is(werr, network.ErrPeerRestarted) {
		return nil
	}
	s.SetDeadline(time.Now().Add(refusalWait))
	b, err := s.ReadFrame(MaxReply)
	if err != nil {
		return nil
	}
	m, err := protocol.Decode(b)
	if err != nil {
		return nil
	}
	e, _ := m.(*protocol.Error)
	return e
}

// ErrLate reports a server that took the request (its stream opened)
// and did not answer within the deadline: a slow server, or one that died
// since; unlike a failure to reach it, proof of neither.
var ErrLate = errors.New("did not answer in time")

// ReadReply reads and decodes one reply from server `from`; an Error reply
// is returned as a *protocol.Error.
func ReadReply(ctx context.Context, s *network.Stream, from string) (protocol.Msg, error) {
	return readReply(ctx, s, from, nil)
}

// readReply is ReadReply that, with w, takes each report of progress
// (protocol.Working) as leave to wait once more.
func readReply(ctx context.Context, s *network.Stream, from string, w *wait) (protocol.Msg, error) {
	for {
		b, err := s.ReadFrame(MaxReply)
		if err != nil {
			if ctx.Err() != nil || network.IsTimeout(err) {
				if w != nil && w.patient {
					return nil, fmt.Errorf("%s %w (nor report progress within %v)", from, ErrLate, w.patience)
				}
				return nil, fmt.Errorf("%s %w", from, ErrLate)
			}
			return nil, fmt.Errorf("reading from %s: %w", from, err)
		}
		m, err := protocol.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("from %s: %w", from, err)
		}
		if _, ok := m.(*protocol.Working); ok {
			if w != nil && ctx.Err() == nil {
				w.extend(s)
			}
			continue
		}
		if e, ok := m.(*protocol.Error); ok {
			return nil, e
		}
		return m, nil
	}
}

// Patient returns a context whose requests (Call, Ask) wait for a reply
// at most patience at a time: a server that reports progress
// (protocol.Working, sent while a change runs) is given patience again
// after each report, up to ChangeBound for the request's size (and ctx's
// own deadline, if it has one). A slow server that is still working is
// waited for; one silent for patience is given up on.
func Patient(ctx context.Context, patience time.Duration) context.Context {
	return context.WithValue(ctx, patienceKey{}, patience)
}

type patienceKey struct{}

// ChangeBound is how long a change of reqBytes may run at its server,
// with patience the request timeout: 8 request timeouts, and one more for
// every 256 KiB of the request (an enrollment's cost grows with its
// templates). A server ends the change there, whatever its progress, so
// that a change stuck in a wait cannot hold its requester forever.
func ChangeBound(patience time.Duration, reqBytes int) time.Duration {
	return patience * time.Duration(8+reqBytes>>18)
}

// wait is one request's deadline: ctx's, or with Patient, patience from
// now (from each report of progress) within the change's bound.
type wait struct {
	patient  bool
	patience time.Duration
	limit    time.Time // zero: none
}

func newWait(ctx context.Context, reqBytes int) *wait {
	w := &wait{}
	w.limit, _ = ctx.Deadline()
	if p, ok := ctx.Value(patienceKey{}).(time.Duration); ok && p > 0 {
		w.patient, w.patience = true, p
		// One patience beyond the server's bound: the server counts from
		// when the request arrived.
		bound := time.Now().Add(ChangeBound(p, reqBytes) + p)
		if w.limit.IsZero() || bound.Before(w.limit) {
			w.limit = bound
		}
	}
	return w
}

// extend sets the stream's deadline for the next reply or report.
func (w *wait) extend(s *network.Stream) {
	t := w.limit
	if w.patient {
		if next := time.Now().Add(w.patience); t.IsZero() || next.Before(t) {
			t = next
		}
	}
	if !t.IsZero() {
		s.SetDeadline(t)
	}
}
