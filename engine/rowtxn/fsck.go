package rowtxn

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/store"
)

// Inspectable is a share holder's engine as fsck sees it: a Core, replayed
// but not started.
type Inspectable interface {
	Replay(store.Entry) error
	Inspect() Inspection
	RowIDs(k, lo, hi int) ([]string, []bool)
}

// Fsck reports a share holder's log, file name log in dir, replayed into
// e (a fresh engine of the server): its structure, rows per origin,
// undecided transactions, shares that fail their checksums and, with
// opt.Rows, the ids of a span of rows.
func Fsck(env engine.Env, e Inspectable, dir, log string, kind store.Kind, opt engine.FsckOptions, out io.Writer) ([]string, error) {
	path := filepath.Join(dir, log)
	if ok, err := store.Exists(path); !ok {
		if err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("no log: %s does not exist (a party that never started has none)", path)}, nil
	}
	rep, err := store.ScanAll(path, engine.Binding(env.Params, env.Bound(), kind, [32]byte{}), e.Replay)
	if err != nil {
		return engine.BindingProblem(err)
	}
	problems := engine.LogReport(path, rep, out)
	in := e.Inspect()
	found := opt.Report
	if found == nil {
		found = &engine.FsckReport{}
	}
	for _, s := range in.Segments {
		fmt.Fprintf(out, "  rows enrolled through %-8s %10d, live %10d\n", s.Origin, s.Rows, s.Live)
		found.Segments = append(found.Segments, engine.FsckSegment{Origin: s.Origin, Rows: s.Rows, Live: s.Live})
	}
	fmt.Fprintf(out, "  undecided transactions %d, erased shares %d, damaged shares of deleted rows %d\n", in.Pending, in.Erased, in.LostDeleted)
	for _, l := range in.LostLive {
		problems = append(problems, fmt.Sprintf("the share of live row %d of %s (id %q) fails its checksum: revoke it at every party (idface delete --id %s) and enroll it again", l.Seq, l.Origin, l.ID, l.ID))
	}
	if opt.Rows != "" {
		origin, lo, hi, err := parseRows(opt.Rows)
		if err != nil {
			return nil, err
		}
		k := env.Params.PartyIndex(origin)
		if k < 0 {
			return nil, fmt.Errorf("--rows: no party %q", origin)
		}
		ids, live := e.RowIDs(k, lo, hi)
		for i, id := range ids {
			fmt.Fprintf(out, "%s row %d: %q live=%v\n", origin, lo+i, id, live[i])
			found.Rows = append(found.Rows, engine.FsckRow{Origin: origin, Row: lo + i, ID: id, Live: live[i]})
		}
	}
	return problems, nil
}

func parseRows(s string) (origin string, lo, hi int, err error) {
	origin, span, ok := strings.Cut(s, ":")
	a, b, ok2 := strings.Cut(span, "-")
	if ok && ok2 {
		lo, err = strconv.Atoi(a)
		if err == nil {
			hi, err = strconv.Atoi(b)
		}
		if err == nil && lo <= hi {
			return origin, lo, hi, nil
		}
	}
	return "", 0, 0, fmt.Errorf("--rows %q: want ORIGIN:LO-HI", s)
}

// Holder is what a share-holding mode's engine (mpcface, blind) offers the
// mode's registration: an engine recovered from its log, and inspectable.
type Holder interface {
	engine.Replayer
	Inspectable
}

// HolderServer is a share holder's registration: its engine made by
// newEngine, its rows in the log file log of the given kind.
func HolderServer(role, log string, kind store.Kind, newEngine func(engine.Env) (Holder, error)) engine.Server {
	return engine.Server{
		Role: role, Log: log, Kind: kind,
		Open: func(_ context.Context, env engine.Env, dir string) (engine.Engine, []func() error, error) {
			eng, err := newEngine(env)
			if err != nil {
				return nil, nil, err
			}
			return engine.OpenReplayed(env, eng, filepath.Join(dir, log), engine.Binding(env.Params, env.Bound(), kind, [32]byte{}))
		},
		Fsck: func(env engine.Env, dir string, opt engine.FsckOptions, out io.Writer) ([]string, error) {
			eng, err := newEngine(env)
			if err != nil {
				return nil, err
			}
			return Fsck(env, eng, dir, log, kind, opt, out)
		},
	}
}
