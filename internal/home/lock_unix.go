//go:build unix

package home

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Lock takes the home's lock for this process (a server, or fsck
// repairing its data): two processes on one data directory would
// interleave their writes to one log. The lock file is beside the data
// directory (lockPath). The lock is the kernel's (flock), so
// it goes with the process, also on kill -9. unlock releases it.
func (h *Home) Lock(what string) (unlock func() error, err error) {
	path := h.lockPath()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder, _ := os.ReadFile(path)
			return nil, fmt.Errorf("%s is in use by another idface process (%s): is this server already running? Stop it first ('idface cluster down', or SIGTERM to that process)",
				h.DataDir(), strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "idface %s, pid %d\n", what, os.Getpid())
	return f.Close, nil // closing the file releases the lock
}
