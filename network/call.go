package network

import (
	"context"
	"errors"
	"fmt"

	"github.com/idface/idface/protocol"
)

// MaxReply bounds a reply read by Call: answers are small (the largest is
// a public key), bulk data travels as raw words on streams.
const MaxReply = 8 << 20

// Bulk marks ctx's streams as carrying bulk answers (a helper's blocks):
// a transport may keep them on connections of their own, so that their
// congestion control is not shaped by the small, queued messages of
// enrollments on the same path (QUIC's slow start ends early when a
// bulk load's queue inflates its round-trip samples, and the window then
// grows slowly between bursty answers).
func Bulk(ctx context.Context) context.Context { return context.WithValue(ctx, bulkKey{}, true) }

// IsBulk reports whether ctx was marked by Bulk.
func IsBulk(ctx context.Context) bool { b, _ := ctx.Value(bulkKey{}).(bool); return b }

type bulkKey struct{}

// Call sends one request to the named server and returns its decoded
// reply. An Error reply is returned as a *protocol.Error. The stream ends
// with the call; ctx's deadline bounds every read and write.
func Call(ctx context.Context, d Dialer, to string, req protocol.Msg) (protocol.Msg, error) {
	s, err := d.Open(ctx, to)
	if err != nil {
		return nil, err
	}
	defer s.Finish()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	if err := s.WriteFrame(protocol.Marshal(req)); err != nil {
		return nil, fmt.Errorf("sending to %s: %w", to, err)
	}
	s.CloseWrite() // one request per stream
	return ReadReply(ctx, s, to)
}

// ReadReply reads and decodes one reply from server `from`; an Error reply
// is returned as a *protocol.Error.
func ReadReply(ctx context.Context, s *Stream, from string) (protocol.Msg, error) {
	b, err := s.ReadFrame(MaxReply)
	if err != nil {
		if ctx.Err() != nil || IsTimeout(err) {
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

// IsTimeout reports whether err is a deadline that passed.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
