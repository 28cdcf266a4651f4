package network

import (
	"context"
	"errors"
)

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

// IsTimeout reports whether err is a deadline that passed.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
