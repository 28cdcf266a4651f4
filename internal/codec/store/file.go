package store

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFile replaces a file durably: write a temporary file with mode
// perm, fsync, rename over path, fsync the directory. A crash leaves the
// old or the new file, never a mix.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	return WriteFileFunc(path, perm, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	})
}

// WriteFileFunc is WriteFile with the contents written by write.
func WriteFileFunc(path string, perm os.FileMode, write func(*os.File) error) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	err = f.Chmod(perm) // an older temporary file's mode does not stay
	if err == nil {
		err = write(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes a directory's entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Exists reports whether path names a file; an error other than "does not
// exist" (permissions, I/O) is returned. Engines ask it instead of opening
// files themselves (scripts/importcheck).
func Exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Remove removes a file that its caller made and must not leave half-made
// (a rebuild's new log that failed its checks), durably.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// FileBindingError refuses a file (an HE group or key file, heidface)
// bound to another cluster, server, mode, key, generation or place.
type FileBindingError struct {
	File string
	Msg  string
}

func (e *FileBindingError) Error() string { return e.File + ": " + e.Msg }
