package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/host/pairkey"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/server"
)

func init() {
	register("fsck", "check a stopped server's data: what is intact, what is lost, and repair what can be", cmdFsck)
}

func cmdFsck(args []string, stdout, stderr io.Writer) (err error) {
	o, err := fsckFlags(args, stderr)
	if err != nil {
		return err
	}
	res := &fsckResult{}
	if o.asJSON {
		var finish func(error) error
		stdout, finish = res.collect(stdout)
		defer func() { err = finish(err) }()
	}
	env, h, me, err := o.open()
	if err != nil {
		return err
	}
	data := h.DataDir()
	res.Server, res.Mode, res.Data = env.Member(), string(env.Params.Mode()), data
	fmt.Fprintf(stdout, "%s (%s), data in %s\n", env.Member(), env.Params.Mode(), data)
	if env.Coordinating() {
		fmt.Fprintf(stdout, "%s's coordinator keeps no data: check each shard with --shard 0..%d\n", env.Self, env.Params.Shards()-1)
		res.Intact = true
		return nil
	}
	if o.adopt || o.repair { // they write: never beside a running server
		if _, err := os.Stat(data); errors.Is(err, os.ErrNotExist) {
			// Locking would create it: a mistyped --data or --home.
			return fmt.Errorf("no data directory %s: nothing to repair or adopt (check --data and --home)", data)
		}
		unlock, err := h.Lock("fsck")
		if err != nil {
			return err
		}
		defer unlock()
		if err := o.fix(env, data, stdout); err != nil {
			return err
		}
	}
	return o.check(env, h, me, data, res, stdout)
}

// fsckOptions are fsck's flags.
type fsckOptions struct {
	mf                    memberFlags
	repair, adopt, asJSON bool
	rows                  string
	shard                 int
}

func fsckFlags(args []string, stderr io.Writer) (*fsckOptions, error) {
	fs := newFlags("fsck", "idface fsck --cluster DIR --party NAME [--repair] [--rows ORIGIN:LO-HI]\nidface fsck --config cluster.json --home DIR [...]\n\n"+
		"Reads a stopped server's data directory without changing it and reports what\n"+
		"is intact and what is lost: log records, damaged spans, torn tail, rows and\n"+
		"live rows per origin, undecided transactions, shares that fail their\n"+
		"checksums (and the ids of those rows), HE group files and key files.\n"+
		"--repair cuts a torn tail (keeping its bytes aside) and nothing else: lost\n"+
		"shares cannot be rebuilt by anyone; the report says what to do.\n"+
		"--rows lists the ids at rows LO..HI-1 of an origin's segment (run it at a\n"+
		"healthy party to name the rows another party lost).\n"+
		"A replicated share holder's rows are also compared with the other\n"+
		"holders' (as this server, while they run): a copy older than theirs (a\n"+
		"backup restored after later deletions) is reported stale; started, it\n"+
		"catches up from them before it serves, or stands down and says why.\n"+
		"Every log is bound to its cluster, member, mode, HE key and generation;\n"+
		"fsck shows the binding and refuses a file bound elsewhere. --adopt binds a\n"+
		"log of format 1 (written before bindings) to this server: only for the\n"+
		"server's own log, never for one copied from another server.\n\n"+
		"With --json one object: server, mode, data, intact, problems, segments\n"+
		"(share holders: origin, rows, live per origin), rows (with --rows:\n"+
		"origin, row, id, live), report (the lines of the human report) and, when\n"+
		"fsck could not check at all, error.", stderr)
	o := &fsckOptions{mf: addMemberFlags(fs, "party", "server name in a local cluster").withData(fs)}
	fs.BoolVar(&o.repair, "repair", false, "cut a torn tail")
	fs.StringVar(&o.rows, "rows", "", "list ids at ORIGIN:LO-HI")
	fs.BoolVar(&o.adopt, "adopt", false, "bind this server's own format-1 log to it")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	fs.IntVar(&o.shard, "shard", config.Coordinator, "in a sharded cluster: check this shard's data (DATA/shard-N)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	return o, nil
}

// collect keeps the human report as lines of the --json object (stdout
// is where they go instead), which finish prints last, after err (nil or
// the failure to check).
func (res *fsckResult) collect(out io.Writer) (stdout io.Writer, finish func(err error) error) {
	var report bytes.Buffer
	return &report, func(err error) error {
		res.Report = strings.Split(strings.TrimSuffix(report.String(), "\n"), "\n")
		if res.Problems == nil {
			res.Problems = []string{}
		}
		if err != nil && len(res.Problems) == 0 {
			res.Error = err.Error() // fsck could not check
		}
		return errors.Join(err, json.NewEncoder(out).Encode(res))
	}
}

// open opens the server's home and configuration for the shard checked:
// the engine's environment to check it in, the home and the server's
// member.
func (o *fsckOptions) open() (engine.Env, *home.Home, config.Member, error) {
	p, h, _, err := o.mf.open("")
	if err != nil {
		return engine.Env{}, nil, config.Member{}, err
	}
	me, err := h.Check(p)
	if err != nil {
		return engine.Env{}, nil, me, err
	}
	name := h.Self.Name
	if _, ok := p.Server(name); !ok {
		return engine.Env{}, nil, me, fmt.Errorf("%s is not a server of this cluster", name)
	}
	if o.shard < config.Coordinator || o.shard >= p.Shards() || p.Shards() == 1 && o.shard != config.Coordinator {
		return engine.Env{}, nil, me, fmt.Errorf("--shard %d: this cluster has %d shards per server", o.shard, p.Shards())
	}
	if p.Shards() > 1 {
		h.UseShard(o.shard)
	}
	if p, err = server.WithShardKey(p, h, name); err != nil {
		return engine.Env{}, nil, me, err
	}
	env := engine.Env{Params: p, Self: name, Shard: o.shard, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(error) {}}
	return env, h, me, nil
}

// fix binds a format-1 log (--adopt) and cuts a torn tail (--repair)
// before the check, so that the report shows the state after them.
func (o *fsckOptions) fix(env engine.Env, data string, stdout io.Writer) error {
	if o.adopt {
		if err := adoptLog(env.Params, env.Self, env.Bound(), data, stdout); err != nil {
			return err
		}
	}
	if o.repair {
		if err := cutTornTail(env.Params, env.Self, env.Bound(), data, stdout); err != nil {
			return err
		}
	}
	return nil
}

// check runs the mode's check of the server's data and reports its
// problems.
func (o *fsckOptions) check(env engine.Env, h *home.Home, me config.Member, data string, res *fsckResult, stdout io.Writer) error {
	p, name := env.Params, env.Self
	srv, err := modes.ServerOf(p, name)
	if err != nil {
		return err
	}
	if srv.Fsck == nil {
		fmt.Fprintf(stdout, "the %s keeps no data\n", srv.Role)
		res.Intact = true
		return nil
	}
	if p.PartyIndex(name) >= 0 {
		// A share holder's copy may be older than the other holders'
		// rows (a restored backup): where the mode compares them, fsck
		// asks them as this server.
		if cert, err := h.Certificate(); err == nil {
			d := quicnet.NewDialer(cert, p.Directory(o.shard), protocol.Version)
			defer d.Close()
			env.Net = d
			if key, err := h.PairKey(me, cert.PrivateKey); err == nil {
				env.PairKeys, _ = pairkey.Derive(p, name, key)
			}
		}
	}
	problems, err := srv.Fsck(env, data, engine.FsckOptions{Rows: o.rows, Report: &res.FsckReport}, stdout)
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
	Server   string   `json:"server"`
	Mode     string   `json:"mode"`
	Data     string   `json:"data"`
	Intact   bool     `json:"intact"`
	Problems []string `json:"problems"`
	engine.FsckReport
	Report []string `json:"report"`
	Error  string   `json:"error,omitempty"` // fsck could not check
}

// cutTornTail opens the server's log the way the server does: a torn tail
// is cut and kept aside; a damaged log is left alone.
func cutTornTail(p *config.Params, name, bound, data string, stdout io.Writer) error {
	path, b := logOf(p, name, bound, data)
	if path == "" {
		fmt.Fprintln(stdout, "repair: this server keeps no log")
		return nil
	}
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

// logOf is a server's log file and the binding it must carry (to bound:
// the server, or one of its shards); "" for a server that keeps no log.
func logOf(p *config.Params, name, bound, data string) (string, store.Binding) {
	srv, err := modes.ServerOf(p, name)
	if err != nil || srv.Log == "" {
		return "", store.Binding{}
	}
	return filepath.Join(data, srv.Log), engine.Binding(p, bound, srv.Kind, [32]byte{})
}

// adoptLog binds a format-1 log to this server (--adopt).
func adoptLog(p *config.Params, name, bound, data string, stdout io.Writer) error {
	path, b := logOf(p, name, bound, data)
	if path == "" {
		return fmt.Errorf("--adopt: this server keeps no log")
	}
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
