package hemode

import "github.com/idface/idface/engine"

// SetAfterReserve runs f at local server e once it has reserved an
// enrollment's slots, before it encrypts them (f may block to hold the
// enrollment there), until the returned function is called.
func SetAfterReserve(e engine.Engine, f func()) (restore func()) {
	l := e.(*Local)
	l.afterReserve.Store(&f)
	return func() { l.afterReserve.Store(nil) }
}
