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
	s, err := d.Open(ctx, to)
	if err != nil {
		return nil, 0, err
	}
	defer s.Finish()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	if cancellable {
		defer context.AfterFunc(ctx, func() { s.SetDeadline(time.Now()) })()
	}
	if err := s.WriteFrame(protocol.Marshal(req)); err != nil {
		return nil, 0, fmt.Errorf("sending to %s: %w", to, err)
	}
	s.CloseWrite() // one request per stream
	resp, err := ReadReply(ctx, s, to)
	return resp, uint64(s.Sent() + s.Received()), err
}

// ReadReply reads and decodes one reply from server `from`; an Error reply
// is returned as a *protocol.Error.
func ReadReply(ctx context.Context, s *network.Stream, from string) (protocol.Msg, error) {
	b, err := s.ReadFrame(MaxReply)
	if err != nil {
		if ctx.Err() != nil || network.IsTimeout(err) {
			return nil, fmt.Errorf("%s did not answer in time", from)
		}
		return nil, fmt.Errorf("reading from %s: %w", from, err)
	}
	m, err := protocol.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", from, err)
	}
	if e, ok := m.(*protocol.Error); ok {
		return nil, e
	}
	return m, nil
}
