package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/modes"
)

func init() {
	register("shard", "shards: make the placement key (key), move a stopped cluster's rows to another number of shards (rebalance)", cmdShard)
}

func cmdShard(args []string, stdout, stderr io.Writer) error {
	return group("shard", []subcommand{
		{"key", "make a sharded cluster's placement key (HMAC of the ids)", shardKey},
		{"rebalance", "move a stopped cluster's rows to another number of shards", shardRebalance},
	}, args, stdout, stderr)
}

func shardRebalance(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("shard rebalance", "idface shard rebalance --cluster DIR --shards N\nidface shard rebalance --config NEW.json --previous OLD.json --home DIR [--data DATA]\n\n"+
		"Moves the rows of a stopped local cluster to N shards per server (1: no\n"+
		"shards) without re-enrolment: each holder's own shares, each row to the\n"+
		"shard its id hashes to under N (a jump consistent hash: from S to S+1\n"+
		"shards about 1/(S+1) of the rows move, all onto the new shard). Deleted\n"+
		"rows are dropped. The new configuration (serial + 1, a port for each new\n"+
		"shard) replaces cluster.json; each server's old data are kept in\n"+
		"DATA/before-rebalance-SERIAL until you remove them. Refused while a\n"+
		"server runs or has anything unsettled ('cluster status' shows it).\n\n"+
		"Across organisations, each runs the second form on its own server, its\n"+
		"servers stopped and every shard's data under its DATA (DATA/shard-N):\n"+
		"OLD.json is the configuration its data follow, NEW.json the next one\n"+
		"(same cluster, a higher serial, another shard count and every server's\n"+
		"shard addresses). Every holder must move before any serves NEW.json.", stderr)
	dir := clusterDirFlag(fs, "the local cluster (stopped)")
	shards := fs.Int("shards", 0, "the new number of shards per server")
	cfgFile := fs.String("config", "", "the new configuration (with --previous and --home)")
	prevFile := fs.String("previous", "", "the configuration the data follow now")
	homeDir := fs.String("home", "", "this server's home (with --config)")
	dataDir := fs.String("data", "", "this server's data directory (default: the home's)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cfgFile != "" || *prevFile != "" || *homeDir != "" {
		if *dir != "" || *shards != 0 {
			return fmt.Errorf("give --cluster and --shards (a local cluster), or --config, --previous and --home (one server)")
		}
		return rebalanceMember(*cfgFile, *prevFile, *homeDir, *dataDir, stdout)
	}
	if err := requireCluster(fs, dir); err != nil {
		return err
	}
	old, err := config.Load(*dir)
	if err != nil {
		return err
	}
	m, err := modes.Of(old)
	if err != nil {
		return err
	}
	if m.Rebalance == nil {
		return m.CannotRebalance()
	}
	if *shards < 1 || *shards > config.MaxShards {
		return fmt.Errorf("--shards %d: want 1..%d", *shards, config.MaxShards)
	}
	if *shards == old.Shards() {
		return fmt.Errorf("the cluster already has %d shards per server", *shards)
	}
	for _, name := range cluster.ServerNames(old) {
		if pid, ok := cluster.Running(old, name); ok {
			return fmt.Errorf("%s runs (pid %d): stop the cluster first ('idface cluster down --cluster %s')", name, pid, *dir)
		}
	}
	lit, err := resharded(old, *shards)
	if err != nil {
		return err
	}
	if lit.Shards > 1 && lit.ShardKeyID == "" { // a local cluster's rows placed under a key from now on
		if err := cluster.KeyPlacement(*dir, &lit, true); err != nil {
			return err
		}
	}
	next, err := config.New(lit, *dir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// Every holder's new shards beside its data first; nothing moves into
	// place until every holder has its new shards.
	stage := fmt.Sprintf("rebalance-%d", next.Serial())
	bases := map[string]string{}
	for _, p := range old.Parties() {
		h, err := home.Open(cluster.HomeDir(*dir, p.Name))
		if err != nil {
			return err
		}
		base := h.DataDir()
		bases[p.Name] = base
		if err := stageShards(ctx, m, h, old, next, p.Name, base, stage, stdout); err != nil {
			return err
		}
	}
	for _, p := range old.Parties() {
		if err := swapIn(bases[p.Name], stage, old.Shards(), next.Shards(), next.Serial()); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	if err := config.Save(*dir, lit); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d shards per server (configuration serial %d); the old data are in each server's DATA/before-rebalance-%d\nstart it with: idface cluster up --cluster %s\n",
		next.Shards(), next.Serial(), next.Serial(), *dir)
	return nil
}

// shardKey makes a cluster's shard key: rows are placed on shards by a
// keyed hash of their ids, so that the decider or key server, which never
// holds the key, cannot tell which ids a shard holds.
func shardKey(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("shard key", "idface shard key --out shard.key\n\n"+
		"Makes a random shard key (32 bytes, hex, mode 0600) for a sharded\n"+
		"cluster assembled across organisations. Rows are placed on shards by\n"+
		"HMAC-SHA256 of their ids under it. The row-holding organisations and\n"+
		"the operators each put a copy into their homes (HOME/shard.key); the\n"+
		"decider's or key server's organisation never gets it. 'cluster\n"+
		"assemble --shards N --shard-key shard.key' records its id (not the key)\n"+
		"in the configuration; a server whose home holds another key refuses to\n"+
		"start. The key never changes for a cluster: the rows follow it.", stderr)
	out := fs.String("out", "", "the file to write (refused if it exists)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "out"); err != nil {
		return err
	}
	if _, err := os.Stat(*out); err == nil {
		return fmt.Errorf("%s exists: a cluster keeps its shard key (move the file away to make another for a new cluster)", *out)
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	if err := home.WriteShardKey(*out, &key); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "shard key %s written to %s (mode 0600): copy it into HOME/%s of every row-holding server and operator, never the decider or key server\n", config.ShardKeyID(&key), *out, config.ShardKeyFile)
	return nil
}

// rebalanceMember moves one stopped server's rows from the shards of the
// configuration in prev to those of the one in next.
func rebalanceMember(next, prev, homeDir, dataDir string, stdout io.Writer) error {
	if next == "" || prev == "" || homeDir == "" {
		return fmt.Errorf("give --config (the new configuration), --previous (the one the data follow) and --home")
	}
	old, err := config.LoadFile(prev)
	if err != nil {
		return fmt.Errorf("--previous: %w", err)
	}
	nxt, err := config.LoadFile(next)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	switch {
	case old.ClusterID() != nxt.ClusterID():
		return fmt.Errorf("%s and %s are configurations of two clusters", prev, next)
	case nxt.Serial() <= old.Serial():
		return fmt.Errorf("%s (serial %d) must follow %s (serial %d)", next, nxt.Serial(), prev, old.Serial())
	case nxt.Shards() == old.Shards():
		return fmt.Errorf("both configurations have %d shards per server: nothing to move", old.Shards())
	}
	m, err := modes.Of(old)
	if err != nil {
		return err
	}
	if m.Rebalance == nil {
		return m.CannotRebalance()
	}
	h, err := home.Open(homeDir)
	if err != nil {
		return err
	}
	if dataDir != "" {
		h.Data = dataDir
	}
	name := h.Self.Name
	if _, err := h.Check(old); err != nil {
		return err
	}
	if old.PartyIndex(name) < 0 {
		fmt.Fprintf(stdout, "%s holds no rows: nothing to move; serve it with %s\n", name, next)
		return nil
	}
	base := h.DataDir()
	from := shardDirs(base, old.Shards())
	// Every old shard's lock: refused while any of them serves.
	for _, dir := range from {
		hh := *h
		hh.Data = dir
		unlock, err := hh.Lock("shard rebalance")
		if err != nil {
			return err
		}
		defer unlock()
	}
	stage := fmt.Sprintf("rebalance-%d", nxt.Serial())
	if err := stageShards(context.Background(), m, h, old, nxt, name, base, stage, stdout); err != nil {
		return err
	}
	if err := swapIn(base, stage, old.Shards(), nxt.Shards(), nxt.Serial()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d shards; serve them with %s once every holder has moved (the old data are in %s)\n",
		name, nxt.Shards(), next, filepath.Join(base, fmt.Sprintf("before-rebalance-%d", nxt.Serial())))
	return nil
}

// stageShards writes a holder's new shards into base/stage from its data
// under base; h is the holder's home, whose shard key places the rows
// where the placement is keyed.
func stageShards(ctx context.Context, m *engine.Mode, h *home.Home, old, next *config.Params, name, base, stage string, stdout io.Writer) error {
	key, err := h.ShardKey()
	if err != nil {
		return err
	}
	for _, p := range []**config.Params{&old, &next} {
		if !(*p).ShardKeyed() {
			continue
		}
		if *p, err = (*p).WithShardKey(key); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := next.CanPlace(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	os.RemoveAll(filepath.Join(base, stage)) // a rebalance interrupted before
	from, to := shardDirs(base, old.Shards()), shardDirs(filepath.Join(base, stage), next.Shards())
	for s, dir := range from {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("%s's shard %d: %w", name, s, err)
		}
	}
	for _, dir := range to {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	if err := m.Rebalance(ctx, m.Server(old, name), old, next, name, from, to, stdout); err != nil {
		return fmt.Errorf("%s: %w (nothing was changed: its data still follow %d shards)", name, err, old.Shards())
	}
	return nil
}

// resharded is old's configuration with n shards per server: the shards
// it keeps keep their addresses, a new one gets a free port on its
// server's host.
func resharded(old *config.Params, n int) (config.Literal, error) {
	lit := old.Literal()
	lit.Serial = old.Serial() + 1
	lit.Shards = n
	members := []*config.Member{lit.KeyServer, lit.Decider}
	for i := range lit.Parties {
		members = append(members, &lit.Parties[i])
	}
	for _, m := range members {
		if m == nil {
			continue
		}
		if n == 1 {
			m.Shards = nil
			continue
		}
		host, _, err := net.SplitHostPort(m.Addr)
		if err != nil {
			return lit, err
		}
		m.Shards = append([]string(nil), m.Shards[:min(n, len(m.Shards))]...)
		for len(m.Shards) < n {
			port, err := cluster.FreePort("udp", host)
			if err != nil {
				return lit, err
			}
			m.Shards = append(m.Shards, net.JoinHostPort(host, strconv.Itoa(port)))
		}
	}
	return lit, nil
}

// shardDirs are the data directories of n shards under base: base itself
// for an unsharded server.
func shardDirs(base string, n int) []string {
	if n == 1 {
		return []string{base}
	}
	dirs := make([]string, n)
	for s := range dirs {
		dirs[s] = filepath.Join(base, "shard-"+strconv.Itoa(s))
	}
	return dirs
}

// swapIn moves a server's old data aside (into base/before-rebalance-
// SERIAL) and its new shards, staged in base/stage, into place.
func swapIn(base, stage string, oldShards, newShards, serial int) error {
	aside := filepath.Join(base, fmt.Sprintf("before-rebalance-%d", serial))
	if err := os.Mkdir(aside, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		keep := name == stage || strings.HasPrefix(name, "before-rebalance-") || name == "coordinator" || filepath.Ext(name) == ".lock" || name == "lock"
		if oldShards > 1 && !isShardDir(name) {
			keep = true // beside the shards: not the old data
		}
		if !keep {
			if err := os.Rename(filepath.Join(base, name), filepath.Join(aside, name)); err != nil {
				return err
			}
		}
	}
	staged := shardDirs(filepath.Join(base, stage), newShards)
	for s, dir := range shardDirs(base, newShards) {
		if newShards == 1 { // the files of the one new shard into base
			files, err := os.ReadDir(staged[0])
			if err != nil {
				return err
			}
			for _, f := range files {
				if err := os.Rename(filepath.Join(staged[0], f.Name()), filepath.Join(base, f.Name())); err != nil {
					return err
				}
			}
			break
		}
		if err := os.Rename(staged[s], dir); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(base, stage)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// isShardDir reports whether name is a shard's data directory.
func isShardDir(name string) bool {
	n, ok := strings.CutPrefix(name, "shard-")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}
