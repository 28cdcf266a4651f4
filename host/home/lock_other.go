//go:build !unix

package home

// Lock is a no-op where flock is not available: run one process per home.
func (h *Home) Lock(string) (func() error, error) { return func() error { return nil }, nil }
