//go:build unix

package home

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Lock takes the data's lock for this process (a server, or fsck or
// rebuild writing its data): two processes on one data directory would
// interleave their writes to one log. It takes three flocks (the kernel's:
// they go with the process, also on kill -9):
//   - DATA/lock, inside the data directory (created, mode 0700, if it is
//     not there), so that every spelling of its path (a trailing slash, a
//     link, --data naming HOME/data) reaches the same lock;
//   - PARENT/NAME.lock beside it, so that a directory moved aside (as a
//     rebuild asks) keeps the server that still writes it from being
//     joined by a new one on the fresh directory of that name (skipped
//     where the parent is read-only, such as a volume's mount point);
//   - HOME/lock when the data are the home's own (HOME/data): the lock
//     of releases before --data.
//
// unlock releases them.
func (h *Home) Lock(what string) (unlock func() error, err error) {
	data := filepath.Clean(h.DataDir())
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("the data directory: %w", err)
	}
	paths := []string{filepath.Join(data, lockFile), data + "." + lockFile}
	if fi, err := os.Stat(data); err == nil {
		if own, err := os.Stat(filepath.Join(h.Dir, dataDir)); err == nil && os.SameFile(fi, own) {
			paths = append(paths, filepath.Join(h.Dir, lockFile))
		}
	}
	var held []func() error
	release := func() error {
		var err error
		for _, u := range held {
			err = errors.Join(err, u())
		}
		return err
	}
	for i, path := range paths {
		u, err := flock(path, data, what)
		if i == 1 && (errors.Is(err, syscall.EROFS) || errors.Is(err, os.ErrPermission)) {
			continue // the beside lock is best effort: a read-only parent
		}
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, u)
	}
	return release, nil
}

// flock takes the lock in file path for the data in data.
func flock(path, data, what string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder, _ := os.ReadFile(path)
			return nil, fmt.Errorf("%s is in use by another idface process (%s): is this server already running? Stop it first ('idface cluster down', or SIGTERM to that process)",
				data, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "idface %s, pid %d\n", what, os.Getpid())
	return f.Close, nil // closing the file releases the lock
}
