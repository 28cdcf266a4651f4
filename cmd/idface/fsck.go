package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blind"
	"github.com/idface/idface/engine/hemode"
	"github.com/idface/idface/engine/mpcface"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/server"
)

func init() {
	register("fsck", "check a stopped server's data: what is intact, what is lost, and repair what can be", cmdFsck)
}

func cmdFsck(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("fsck", "idface fsck --cluster DIR --party NAME [--repair] [--rows ORIGIN:LO-HI]\nidface fsck --config cluster.json --home DIR [...]\n\n"+
		"Reads a stopped server's data directory without changing it and reports what\n"+
		"is intact and what is lost: log records, damaged spans, torn tail, rows and\n"+
		"live rows per origin, undecided transactions, shares that fail their\n"+
		"checksums (and the ids of those rows), HE group files and key files.\n"+
		"--repair cuts a torn tail (keeping its bytes aside) and nothing else: lost\n"+
		"shares cannot be rebuilt by anyone; the report says what to do.\n"+
		"--rows lists the ids at rows LO..HI-1 of an origin's segment (run it at a\n"+
		"healthy party to name the rows another party lost).\n"+
		"Every log is bound to its cluster, member, mode, HE key and generation;\n"+
		"fsck shows the binding and refuses a file bound elsewhere. --adopt binds a\n"+
		"log of format 1 (written before bindings) to this server: only for the\n"+
		"server's own log, never for one copied from another server.\n\n"+
		"With --json one object: server, mode, data, intact, problems, segments\n"+
		"(share holders: origin, rows, live per origin), rows (with --rows:\n"+
		"origin, row, id, live), report (the lines of the human report) and, when\n"+
		"fsck could not check at all, error.", stderr)
	mf := addMemberFlags(fs, "party", "server name in a local cluster")
	repair := fs.Bool("repair", false, "cut a torn tail")
	rows := fs.String("rows", "", "list ids at ORIGIN:LO-HI")
	adopt := fs.Bool("adopt", false, "bind this server's own format-1 log to it")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	res := &fsckResult{}
	if *asJSON {
		// The human report is kept as lines of the object, printed last.
		var report bytes.Buffer
		out := stdout
		stdout = &report
		defer func() {
			res.Report = strings.Split(strings.TrimSuffix(report.String(), "\n"), "\n")
			if res.Problems == nil {
				res.Problems = []string{}
			}
			if err != nil && len(res.Problems) == 0 {
				res.Error = err.Error() // fsck could not check
			}
			err = errors.Join(err, json.NewEncoder(out).Encode(res))
		}()
	}
	p, h, _, err := mf.open("")
	if err != nil {
		return err
	}
	if _, err := h.Check(p); err != nil {
		return err
	}
	name := &h.Self.Name
	if _, ok := p.Server(*name); !ok {
		return fmt.Errorf("%s is not a server of this cluster", *name)
	}
	data := h.DataDir()
	res.Server, res.Mode, res.Data = *name, string(p.Mode()), data
	env := engine.Env{Params: p, Self: *name, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(error) {}}
	fmt.Fprintf(stdout, "%s (%s), data in %s\n", *name, p.Mode(), data)
	if *adopt || *repair { // they write: never beside a running server
		unlock, err := h.Lock("fsck")
		if err != nil {
			return err
		}
		defer unlock()
	}
	if *adopt {
		if err := adoptLog(p, *name, data, stdout); err != nil {
			return err
		}
	}
	if *repair { // first, so that the report shows the state after it
		if err := cutTornTail(p, *name, data, stdout); err != nil {
			return err
		}
	}
	var problems []string
	switch k, _ := p.KeyServer(); {
	case p.Mode() == config.ModeHE && k.Name == *name:
		problems = fsckHEKey(env, data, stdout)
	case p.Mode() == config.ModeHE:
		problems, err = fsckHE(env, data, stdout)
	case p.Mode() == config.ModeBlind && *name == p.DeciderName():
		fmt.Fprintln(stdout, "the decider keeps no data")
	case p.Mode() == config.ModeBlind:
		var e holder
		if e, err = blind.New(env); err == nil {
			problems, err = fsckShares(env, e, data, store.KindBlind, *rows, res, stdout)
		}
	default:
		var e holder
		if e, err = mpcface.New(env); err == nil {
			problems, err = fsckShares(env, e, data, store.KindShares, *rows, res, stdout)
		}
	}
	if err != nil {
		return err
	}
	res.Problems = problems
	if len(problems) == 0 {
		res.Intact = true
		fmt.Fprintln(stdout, "intact")
		return nil
	}
	for _, pr := range problems {
		fmt.Fprintln(stdout, "PROBLEM:", pr)
	}
	return fmt.Errorf("%d problems found", len(problems))
}

// fsckResult is 'fsck --json'.
type fsckResult struct {
	Server   string        `json:"server"`
	Mode     string        `json:"mode"`
	Data     string        `json:"data"`
	Intact   bool          `json:"intact"`
	Problems []string      `json:"problems"`
	Segments []fsckSegment `json:"segments,omitempty"`
	Rows     []fsckRow     `json:"rows,omitempty"`
	Report   []string      `json:"report"`
	Error    string        `json:"error,omitempty"` // fsck could not check
}

type fsckSegment struct {
	Origin string `json:"origin"`
	Rows   int    `json:"rows"`
	Live   int    `json:"live"`
}

type fsckRow struct {
	Origin string `json:"origin"`
	Row    int    `json:"row"`
	ID     string `json:"id"`
	Live   bool   `json:"live"`
}

// logReport prints a log's structure and returns its problems.
func logReport(path string, rep store.Report, stdout io.Writer) []string {
	var problems []string
	fmt.Fprintf(stdout, "log %s: %d intact records, %d bytes before any damage\n", path, rep.Records, rep.Bytes)
	fmt.Fprintf(stdout, "  bound to %s: matches this server\n", rep.Binding)
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

// holder is a share holder's engine as fsck sees it.
type holder interface {
	Replay(store.Entry) error
	Inspect() rowtxn.Inspection
	RowIDs(k, lo, hi int) ([]string, []bool)
}

// fsckShares reports a share holder's log (2PC/MPC or blind).
func fsckShares(env engine.Env, e holder, data string, kind store.Kind, rows string, res *fsckResult, stdout io.Writer) ([]string, error) {
	path := filepath.Join(data, "shares.log")
	if _, err := os.Stat(path); err != nil {
		return []string{fmt.Sprintf("no log: %v (a party that never started has none)", err)}, nil
	}
	rep, err := store.ScanAll(path, server.Binding(env.Params, env.Self, kind, [32]byte{}), e.Replay)
	if err != nil {
		return bindingProblem(err)
	}
	problems := logReport(path, rep, stdout)
	in := e.Inspect()
	for _, s := range in.Segments {
		fmt.Fprintf(stdout, "  rows enrolled through %-8s %10d, live %10d\n", s.Origin, s.Rows, s.Live)
		res.Segments = append(res.Segments, fsckSegment{Origin: s.Origin, Rows: s.Rows, Live: s.Live})
	}
	fmt.Fprintf(stdout, "  undecided transactions %d, erased shares %d, damaged shares of deleted rows %d\n", in.Pending, in.Erased, in.LostDeleted)
	for _, l := range in.LostLive {
		problems = append(problems, fmt.Sprintf("the share of live row %d of %s (id %q) fails its checksum: revoke it at every party (idface delete --id %s) and enroll it again", l.Seq, l.Origin, l.ID, l.ID))
	}
	if rows != "" {
		origin, lo, hi, err := parseRows(rows)
		if err != nil {
			return nil, err
		}
		k := env.Params.PartyIndex(origin)
		if k < 0 {
			return nil, fmt.Errorf("--rows: no party %q", origin)
		}
		ids, live := e.RowIDs(k, lo, hi)
		for i, id := range ids {
			fmt.Fprintf(stdout, "%s row %d: %q live=%v\n", origin, lo+i, id, live[i])
			res.Rows = append(res.Rows, fsckRow{Origin: origin, Row: lo + i, ID: id, Live: live[i]})
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

// fsckHEKey reports the key server's key pair: intact, a pair, and bound
// to this cluster and key server.
func fsckHEKey(env engine.Env, data string, stdout io.Writer) []string {
	p := env.Params
	bind := hemode.KeyBinding(p)
	key, err := store.CheckHEKey(data, p.HE(), bind, env.Log)
	if err != nil {
		return []string{err.Error()}
	}
	fp := heidface.Fingerprint(key.Public)
	fmt.Fprintf(stdout, "key pair: intact, secret and public key match; both files bound to %s: matches this cluster\n", bind)
	fmt.Fprintf(stdout, "  public key fingerprint %x (every local server's public.key and row log must name it)\n", fp[:8])
	return nil
}

// fsckHE reports an HE local server: its public key, row log and group
// files, and what each is bound to.
func fsckHE(env engine.Env, data string, stdout io.Writer) ([]string, error) {
	groups, err := store.OpenGroups(filepath.Join(data, "groups"), env.Params.HE())
	if err != nil {
		return nil, err
	}
	var problems []string
	keys := hemode.PublicKeyFile(env.Params, data)
	path := filepath.Join(data, "rows.log")
	l, err := hemode.NewLocal(context.Background(), env, groups, keys, nil)
	if err != nil {
		_, noLog := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) && noLog != nil {
			return []string{"no public key yet: this local server never started"}, nil
		}
		return []string{fmt.Sprintf("public key: %v (a local server with data never fetches the key again: restore %s from this server's backup, or copy another local server's whose fingerprint matches the one its row log records)", err, keys)}, nil
	}
	fp := l.KeyFingerprint()
	fmt.Fprintf(stdout, "public key %s: fingerprint %x, bound to %s: matches this cluster\n", keys, fp[:8], keys.Bind)
	if _, err := os.Stat(path); err != nil {
		return []string{fmt.Sprintf("no log: %v (a server that never started has none)", err)}, nil
	}
	rep, err := store.ScanAll(path, server.Binding(env.Params, env.Self, store.KindHERows, [32]byte{}), l.Replay)
	if err != nil {
		return bindingProblem(err)
	}
	problems = append(problems, logReport(path, rep, stdout)...)
	in := l.Inspect()
	fmt.Fprintf(stdout, "  slots %d (settled %d), live %d, changes applied %d, undecided enrollment %v, groups %d\n", in.Rows, in.Settled, in.Live, in.Changes, in.Pending, in.Groups)
	switch {
	case in.LogKey == nil:
		fmt.Fprintln(stdout, "  the row log records no public key yet (the server writes it first when it starts)")
	case *in.LogKey != in.Key:
		problems = append(problems, fmt.Sprintf("%s records public key %x (generation %d), but %s holds %x: the public key file was replaced (perhaps fetched again after the key server made a new key pair). "+
			"Restore %s from this server's backup, or copy another local server's whose fingerprint is %x", path, in.LogKey[:8], in.LogGeneration, keys, in.Key[:8], keys, in.LogKey[:8]))
	default:
		fmt.Fprintf(stdout, "  the row log is bound to public key %x, generation %d: matches %s\n", in.LogKey[:8], in.LogGeneration, keys)
	}
	fmt.Fprintf(stdout, "  group files must be bound to %s and their own group number\n", in.Binding)
	if len(in.GroupErrors) == 0 {
		fmt.Fprintf(stdout, "  group files: %d, every one intact, bound as above and consistent with the row log\n", in.Groups)
	}
	problems = append(problems, in.GroupErrors...)
	for g, live := range in.DamagedGroups {
		fmt.Fprintf(stdout, "  group %d cannot be used (see below): %d live rows there cannot be identified at this server\n", g, live)
	}
	return problems, nil
}

// cutTornTail opens the server's log the way the server does: a torn tail
// is cut and kept aside; a damaged log is left alone.
func cutTornTail(p *config.Params, name, data string, stdout io.Writer) error {
	path, b := logOf(p, name, data)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	l, rep, err := store.Open(path, b, func(store.Entry) error { return nil })
	if err != nil {
		fmt.Fprintf(stdout, "repair: nothing changed (%v)\n", err)
		return nil
	}
	l.Close()
	if rep.TornBytes > 0 {
		fmt.Fprintf(stdout, "repair: cut a torn tail of %d bytes, kept in %s\n", rep.TornBytes, rep.TornFile)
	} else {
		fmt.Fprintln(stdout, "repair: nothing to cut")
	}
	return nil
}

// logOf is a server's log file and the binding it must carry.
func logOf(p *config.Params, name, data string) (string, store.Binding) {
	switch p.Mode() {
	case config.ModeHE: // the key binding is the log's first record (hemode)
		return filepath.Join(data, "rows.log"), server.Binding(p, name, store.KindHERows, [32]byte{})
	case config.ModeBlind:
		return filepath.Join(data, "shares.log"), server.Binding(p, name, store.KindBlind, [32]byte{})
	}
	return filepath.Join(data, "shares.log"), server.Binding(p, name, store.KindShares, [32]byte{})
}

// adoptLog binds a format-1 log to this server (--adopt).
func adoptLog(p *config.Params, name, data string, stdout io.Writer) error {
	path, b := logOf(p, name, data)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--adopt: %w", err)
	}
	if err := store.Adopt(path, b); err != nil {
		return fmt.Errorf("--adopt: %w", err)
	}
	got, err := store.ReadBinding(path)
	if err != nil {
		return fmt.Errorf("--adopt: %w", err)
	}
	fmt.Fprintf(stdout, "adopt: %s is bound to %s\n", path, got)
	return nil
}

// bindingProblem turns a log bound elsewhere into a reported problem
// (fsck goes on with the other checks); other errors stay errors.
func bindingProblem(err error) ([]string, error) {
	var be *store.BindingError
	var fbe *store.FileBindingError
	var fe *store.FormatError
	if errors.As(err, &be) || errors.As(err, &fbe) || errors.As(err, &fe) {
		return []string{err.Error()}, nil
	}
	return nil, err
}
