package inproc

import (
	"errors"
	"sync/atomic"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/store"
)

// ErrDisk is the error of a FailingDisk's appends once it has failed.
var ErrDisk = errors.New("inproc: the disk failed (a FailingDisk)")

// FailingDisk is a storage of the host's files (engine.Files) whose logs
// take n more appends and then fail every one with ErrDisk, as a disk
// that dies; give it to a server through Cluster.Storage before it
// (re)starts.
type FailingDisk struct{ left atomic.Int64 }

// FailAfter is a FailingDisk that takes n more appends.
func FailAfter(n int) *FailingDisk {
	d := &FailingDisk{}
	d.left.Store(int64(n))
	return d
}

// OpenLog opens the log as engine.Files does, behind the failing disk.
func (d *FailingDisk) OpenLog(env engine.Env, path string, b store.Binding, replay func(store.Entry) error) (engine.LogFile, error) {
	l, err := engine.Files{}.OpenLog(env, path, b, replay)
	if err != nil {
		return nil, err
	}
	return &failingLog{LogFile: l, d: d}, nil
}

type failingLog struct {
	engine.LogFile
	d *FailingDisk
}

func (l *failingLog) Append(recs ...store.Record) ([]store.Pos, error) {
	if l.d.left.Add(-1) < 0 {
		return nil, ErrDisk
	}
	return l.LogFile.Append(recs...)
}
