package hemode

// SetAfterReserve runs f at every local server of this process that has
// reserved an enrollment's slots, before it encrypts them (f may block to
// hold the enrollment there), until the returned function is called.
func SetAfterReserve(f func(self string)) (restore func()) {
	afterReserve.Store(&f)
	return func() { afterReserve.Store(nil) }
}
