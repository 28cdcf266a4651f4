package engine

import (
	"errors"
	"fmt"
	"io"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/store"
)

// Binding is what server name's data files must be bound to: this cluster,
// this member, this mode, and for HE the key fingerprint (zero otherwise).
// Any generation is accepted: the log holds the member's generation and
// the other files are checked against it.
func Binding(p *config.Params, name string, kind store.Kind, key [32]byte) store.Binding {
	return store.Binding{Kind: kind, Cluster: p.ClusterID(), Member: name, Mode: string(p.Mode()), Key: key}
}

// Storage opens the durable logs of a server's engine, as Net reaches
// its peers: Files, the host's files (internal/codec/store), in every
// server; a test may give a storage of its own that stands between an
// engine and its files (a disk that fails on purpose).
type Storage interface {
	OpenLog(env Env, path string, b store.Binding, replay func(store.Entry) error) (LogFile, error)
}

// LogFile is an engine's opened log.
type LogFile interface {
	Log
	Close() error
	Path() string
}

// Files is the storage of the host's files: store.Open, fsynced and
// checksummed.
type Files struct{}

// OpenLog opens an engine's log, replaying it, and reports what it found.
func (Files) OpenLog(env Env, path string, b store.Binding, replay func(store.Entry) error) (LogFile, error) {
	l, rep, err := store.Open(path, b, replay)
	if err != nil {
		return nil, err
	}
	if rep.TornBytes > 0 {
		env.Log.Warn("cut a torn record off the end of the log (a crash during a write); its bytes are kept aside",
			"bytes", rep.TornBytes, "kept_in", rep.TornFile)
	}
	return l, nil
}

// OpenLog opens an engine's log in env's storage (Files when none).
func OpenLog(env Env, path string, b store.Binding, replay func(store.Entry) error) (LogFile, error) {
	if env.Storage == nil {
		return Files{}.OpenLog(env, path, b, replay)
	}
	return env.Storage.OpenLog(env, path, b, replay)
}

// Replayer is an engine recovered from a log.
type Replayer interface {
	Engine
	Replay(store.Entry) error
	Start(Log) error
}

// OpenReplayed replays an engine's log into eng and starts it.
func OpenReplayed(env Env, eng Replayer, path string, b store.Binding) (Engine, []func() error, error) {
	l, err := OpenLog(env, path, b, eng.Replay)
	if err != nil {
		return nil, nil, err
	}
	if err := eng.Start(l); err != nil {
		l.Close()
		return nil, nil, withFile(err, l.Path())
	}
	return eng, []func() error{l.Close}, nil
}

// withFile names the log in a damage report from an engine's recovery.
func withFile(err error, path string) error {
	if de, ok := err.(*store.DamageError); ok && de.File == "" {
		de.File = path
	}
	return err
}

// LogReport prints a log's structure (fsck) and returns its problems.
func LogReport(path string, rep store.Report, out io.Writer) []string {
	var problems []string
	fmt.Fprintf(out, "log %s: %d intact records, %d bytes before any damage\n", path, rep.Records, rep.Bytes)
	fmt.Fprintf(out, "  bound to %s: matches this server\n", rep.Binding)
	if rep.TornBytes > 0 {
		problems = append(problems, fmt.Sprintf("a torn tail of %d bytes (a crash during a write, never acknowledged): 'idface fsck --repair' or starting the server cuts it and keeps the bytes aside", rep.TornBytes))
	}
	for _, d := range rep.Damaged {
		problems = append(problems, fmt.Sprintf("damaged span at offsets %d..%d (%s): the records there are lost. Restore this server's data directory from a backup; shares cannot be rebuilt from the other parties", d.Offset, d.Next, d.Reason))
	}
	if rep.ReplayErr != nil {
		problems = append(problems, fmt.Sprintf("the records after the damage do not follow on: %v", rep.ReplayErr))
	}
	return problems
}

// BindingProblem turns a file bound elsewhere into a reported problem
// (fsck goes on with the other checks); other errors stay errors.
func BindingProblem(err error) ([]string, error) {
	var be *store.BindingError
	var fbe *store.FileBindingError
	var fe *store.FormatError
	if errors.As(err, &be) || errors.As(err, &fbe) || errors.As(err, &fe) {
		return []string{err.Error()}, nil
	}
	return nil, err
}
