package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/server"
)

func init() {
	register("cluster", "create and run a local cluster (init, up, down, stop, start, status, recalibrate) or assemble a deployment's config", cmdCluster)
	register("serve", "run one server in the foreground", cmdServe)
}

func cmdCluster(args []string, stdout, stderr io.Writer) error {
	return group("cluster", []subcommand{
		{"init", "create a local test cluster: every member's home and cluster.json", clusterInit},
		{"up", "start a local cluster's servers and wait until each is healthy", clusterUp},
		{"down", "stop a local cluster's servers", clusterDown},
		{"stop", "stop one server of a local cluster (--server NAME)", clusterStop},
		{"start", "start one server of a local cluster again and wait until it is healthy (--server NAME)", clusterStart},
		{"status", "each server's configuration and whether their rows agree (exit 3: unreachable, 4: disagreeing)", clusterStatusCmd},
		{"assemble", "build a deployment's cluster.json from its members' NAME.pub.json", clusterAssemble},
		{"recalibrate", "give a local cluster the threshold of a calibration file and restart its running servers on it", clusterRecalibrate},
		{"show", "print what a cluster.json, NAME.pub.json or directory pins: members, roles, addresses, pins", clusterShow},
	}, args, stdout, stderr)
}

// Exit codes of 'cluster status', for scripts.
const (
	exitUnreachable = 3 // a server did not answer
	exitDisagree    = 4 // all answered, but configurations or row maps differ
)

func clusterStatusCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster status", "idface cluster status --cluster DIR [--client NAME] [--json]\nidface cluster status --config cluster.json --home DIR [--json]\n\n"+
		"Asks every server for the configuration (serial and hash) it runs and, as an\n"+
		"operator, for its unsettled changes and whether its row map agrees with\n"+
		"every other server's (each server compares with its peers itself; the\n"+
		"digests and per-segment row counts go to servers only: an operator's\n"+
		"count of ids enrolled is idface count), through a local cluster's operator\n"+
		"(or --client) or through the member whose home is given.\n\n"+
		"Exit status: 0 every server answered, runs this configuration and (asked by\n"+
		"an operator) agrees on the row map; 3 a server is unreachable; 4 every\n"+
		"server answered but they run different configurations, their row maps\n"+
		"differ or a server could not reach another to compare them; 1 status\n"+
		"could not be asked at all; 2 bad usage.\n\n"+
		"With --json one object: mode, config_serial, config_hash, reveal_scores,\n"+
		"trust, servers (name, role, addr, pid, reachable, error, catching_up,\n"+
		"config_serial, config_hash, config_matches, holds_rows, unsettled, agrees,\n"+
		"peers), and all_reachable, same_config, agreement (agree; disagree: a\n"+
		"server's rows differ from another's; unknown: asked as a device, which is\n"+
		"not told, or a server could not be compared, being unreachable), service\n"+
		"(checked, degraded, catching-up or down), calibration_warning (to an operator, when more ids\n"+
		"are enrolled than the threshold was calibrated for) and exit, the exit\n"+
		"status.", stderr)
	mf := addMemberFlags(fs, "client", "client identity in a local cluster (default: the operator \"client\")")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, h, local, err := mf.open("client")
	if err != nil {
		return err
	}
	cl, err := client.Open(cfg, h, "")
	if err != nil {
		return err
	}
	defer cl.Close()
	return clusterStatus(cfg, cl, local, h.Self.Role == config.RoleOperator, *asJSON, stdout)
}

// localCluster loads the cluster --cluster names, for 'up' and 'down'.
func localCluster(name string, args []string, stderr io.Writer, more func(fs *flag.FlagSet)) (*config.Params, string, error) {
	fs := newFlags("cluster "+name, "idface cluster "+name+" --cluster DIR", stderr)
	dir := clusterDirFlag(fs, "local cluster directory")
	if more != nil {
		more(fs)
	}
	if err := parse(fs, args); err != nil {
		return nil, "", err
	}
	if err := requireCluster(fs, dir); err != nil {
		return nil, "", err
	}
	cfg, err := config.Load(*dir)
	return cfg, *dir, err
}

func clusterDown(args []string, stdout, stderr io.Writer) error {
	cfg, _, err := localCluster("down", args, stderr, nil)
	if err != nil {
		return err
	}
	if err := cluster.Down(cfg); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "cluster down")
	return nil
}

// pidFileHelp says what run/NAME.pid holds, for stop's and start's help.
const pidFileHelp = "Each server's process is recorded in DIR/run/NAME.pid as one line,\n" +
	"\"PID START\": its pid and its start time in clock ticks since boot (field\n" +
	"22 of /proc/PID/stat), so that a later process given the same pid is never\n" +
	"taken for it. By hand: kill $(cut -d' ' -f1 DIR/run/p3.pid). Its log is\n" +
	"DIR/logs/NAME.log."

// serverFlag is stop's and start's --server, with the cluster it names
// and its processes.
func serverFlag(name, synopsis string, args []string, stderr io.Writer, more func(fs *flag.FlagSet)) (*config.Params, []string, error) {
	fs := newFlags("cluster "+name, synopsis, stderr)
	dir := clusterDirFlag(fs, "local cluster directory")
	server := fs.String("server", "", "the server: a member's name (with its shards, in a sharded cluster) or one process's (p1#0)")
	if more != nil {
		more(fs)
	}
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	if err := requireCluster(fs, dir); err != nil {
		return nil, nil, err
	}
	if err := required(fs, "server"); err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(*dir)
	if err != nil {
		return nil, nil, err
	}
	names, err := cluster.Processes(cfg, *server)
	return cfg, names, err
}

func clusterStop(args []string, stdout, stderr io.Writer) error {
	var kill *bool
	cfg, names, err := serverFlag("stop", "idface cluster stop --cluster DIR --server NAME [--kill]\n\n"+
		"Stops one server of a local cluster (SIGTERM, then SIGKILL after 15 s;\n"+
		"--kill: SIGKILL at once, as a crash) and leaves the others running. Start\n"+
		"it again with idface cluster start --server NAME (or cluster up).\n\n"+pidFileHelp, args, stderr,
		func(fs *flag.FlagSet) { kill = fs.Bool("kill", false, "SIGKILL at once (a crash), not SIGTERM") })
	if err != nil {
		return err
	}
	for _, name := range names {
		pid, ok := cluster.Running(cfg, name)
		if !ok {
			fmt.Fprintf(stdout, "%s was not running\n", name)
			continue
		}
		if *kill {
			err = cluster.Kill(cfg, name)
		} else {
			err = cluster.Stop(cfg, name, 15*time.Second)
		}
		if err != nil {
			return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
		}
		fmt.Fprintf(stdout, "stopped %s (pid %d)\n", name, pid)
	}
	return nil
}

func clusterStart(args []string, stdout, stderr io.Writer) error {
	var timeout *time.Duration
	cfg, names, err := serverFlag("start", "idface cluster start --cluster DIR --server NAME [--timeout 60s]\n\n"+
		"Starts one server of a local cluster that is not running (stopped by\n"+
		"cluster stop, or exited) and waits until it answers a health check with\n"+
		"nothing unsettled; the others are not touched.\n\n"+pidFileHelp, args, stderr,
		func(fs *flag.FlagSet) {
			timeout = fs.Duration("timeout", 60*time.Second, "how long to wait for the server to be healthy")
		})
	if err != nil {
		return err
	}
	started, err := startLocal(cfg, names, *timeout)
	if err != nil {
		return err
	}
	for _, name := range names {
		pid, _ := cluster.Running(cfg, name)
		if slices.Contains(started, name) {
			fmt.Fprintf(stdout, "started %s (pid %d, log %s)\n", name, pid, cluster.LogFile(cfg, name))
		} else {
			fmt.Fprintf(stdout, "%s was running (pid %d) and is healthy\n", name, pid)
		}
	}
	return nil
}

// startLocal starts the processes names of a local cluster that are not
// running, as this binary, and waits until they are healthy; it returns
// those it started.
func startLocal(cfg *config.Params, names []string, timeout time.Duration) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return cluster.UpServers(context.Background(), cfg, exe, names, timeout)
}

func clusterUp(args []string, stdout, stderr io.Writer) error {
	var timeout *time.Duration
	cfg, dir, err := localCluster("up", args, stderr, func(fs *flag.FlagSet) {
		timeout = fs.Duration("timeout", 60*time.Second, "how long to wait for every server to be healthy")
	})
	if err != nil {
		return err
	}
	started, err := startLocal(cfg, cluster.ServerNames(cfg), *timeout)
	if err != nil {
		return err
	}
	switch n := len(cluster.ServerNames(cfg)); {
	case len(started) == n:
		fmt.Fprintf(stdout, "%d servers up (%s, logs in %s/logs)\n", len(cfg.Servers()), cfg.Mode(), dir)
	case len(started) == 0:
		fmt.Fprintf(stdout, "started none: all %d servers were running, and are healthy (%s, logs in %s/logs)\n", len(cfg.Servers()), cfg.Mode(), dir)
	default:
		fmt.Fprintf(stdout, "started %s; the others were running; all %d servers healthy (%s, logs in %s/logs)\n", strings.Join(started, ", "), len(cfg.Servers()), cfg.Mode(), dir)
	}
	for _, s := range cfg.Servers() {
		metrics := ""
		if s.Metrics != "" {
			metrics = "  metrics http://" + s.Metrics + "/metrics"
		}
		fmt.Fprintf(stdout, "  %-8s quic %-22s%s\n", s.Name, s.Addr, metrics)
	}
	return nil
}

func clusterInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster init", "idface cluster init --cluster DIR --mode "+modeNames("|")+" --parties MU [--calibration calibration.json | --dim 512 --alpha 341 --beta 63 [--tau T]]\n"+
		"                   [--gallery-levels L:a1,... --query-levels L:a1,...] (mode blind) [--scheme bgv|paillier] (mode he)\n\n"+
		"A local test cluster built like a deployment: every server and client gets\n"+
		"its own home DIR/homes/NAME (key, certificate, public descriptor, data) and\n"+
		"DIR/cluster.json is assembled from the public descriptors. Each server gets\n"+
		"a free UDP port on --host.\n\n"+
		"The threshold: --calibration takes a file from 'idface calibrate', which\n"+
		"chose it for a target false-positive identification rate on your own\n"+
		"labelled templates. Without it, the default is the threshold calibrate\n"+
		"chooses for FPIR 1e-3 with the cluster's transform and dimension on\n"+
		"synthetic people (idface synth, intra-class cosine 0.5; recorded as\n"+
		"synthetic, and said so by identify and cluster status): it finds people\n"+
		"of that kind, but no synthetic set knows your extractor's scores, so\n"+
		"calibrate on your own features before real use and apply the file to\n"+
		"the running cluster with 'idface cluster recalibrate'. --tau gives a\n"+
		"bare cosine threshold instead, calibrated to nothing.\n\n"+
		"With --json one object: cluster, mode, parties, dim, alpha, beta, tau,\n"+
		"threshold (the score), threshold_meaning, reveal_scores, and servers (name,\n"+
		"role, addr, metrics, pin).\n\n"+
		"Modes:\n"+modeList(), stderr)
	dir := clusterDirFlag(fs, "local cluster directory (created)")
	mode := fs.String("mode", "2pc", "the mode: "+modeNames(", ")+" (listed above)")
	parties := fs.Int("parties", 0, "number of parties mu (share holders or local servers; default: the mode's)")
	devices := fs.Int("devices", 1, "number of device identities (identify only) besides the operator")
	dim := fs.Int("dim", 0, fmt.Sprintf("template dimension d (default %d)", config.DefaultDim))
	alpha := fs.Int("alpha", 0, "enrollment weight (default floor(2d/3))")
	beta := fs.Int("beta", 0, fmt.Sprintf("query weight (default min(%d, alpha))", config.DefaultBeta))
	tau := tauFlag(fs)
	cal := calibrationFlag(fs)
	host := fs.String("host", "127.0.0.1", "address the parties listen on")
	k8s := fs.String("k8s", "", "make a test cluster for this namespace of one Kubernetes cluster: servers listen on 0.0.0.0 and advertise their pods' names (render it with 'idface deploy k8s --cluster DIR'; 'cluster up' refuses it)")
	force := fs.Bool("force", false, "replace an existing cluster config")
	metrics := fs.Bool("metrics", false, "give every server a loopback /metrics address")
	reveal := fs.Bool("reveal-scores", false, "research cluster: identify answers with scores and candidates below the threshold (never for a deployment: scores for chosen probes reconstruct templates)")
	hide := hideProbesFlag(fs)
	batch := addBatchFlags(fs)
	levels := addLevelFlags(fs)
	scheme := addSchemeFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	shards := fs.Int("shards", 0, "run every server as a coordinator and this many shard servers, each holding the rows of its shard (every mode; 'serve --shard N')")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := requireCluster(fs, dir); err != nil {
		return err
	}
	m, err := config.ParseMode(*mode)
	if err != nil {
		return err
	}
	if *parties == 0 {
		*parties = defaultParties(m)
	}
	lit := config.Literal{Mode: m, Dim: *dim, Alpha: *alpha, Beta: *beta, Tau: tau, GalleryLevels: *levels.gallery, QueryLevels: *levels.query}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *cal != "" {
		if err := applyCalibration(*cal, &lit, set); err != nil {
			return err
		}
	} else if !set["tau"] {
		if err := applyDefaultCalibration(&lit); err != nil {
			return err
		}
	}
	cfg, err := cluster.Init(*dir, cluster.Options{Mode: m, Parties: *parties, Devices: *devices, Dim: lit.Dim,
		Alpha: lit.Alpha, Beta: lit.Beta, Tau: lit.Tau, Host: *host, Kubernetes: *k8s, Force: *force, Metrics: *metrics, RevealScores: *reveal, HideProbes: *hide,
		GalleryLevels: lit.GalleryLevels, QueryLevels: lit.QueryLevels, Scheme: *scheme, Calibration: lit.Calibration,
		BatchMax: *batch.max, BatchWait: *batch.wait, Shards: *shards})
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(initReport(cfg, *dir))
	}
	fmt.Fprintf(stdout, "cluster %s: mode %s, %d parties, d = %d, alpha = %d, beta = %d\n",
		*dir, cfg.Mode(), cfg.Mu(), cfg.Dim(), cfg.Alpha(), cfg.Beta())
	fmt.Fprintf(stdout, "  %s\n", thresholdMeaning(cfg))
	if md, err := modes.Of(cfg); err == nil && md.Describe != nil {
		fmt.Fprintf(stdout, "  %s\n", md.Describe(cfg))
	}
	for _, p := range cfg.Servers() {
		fmt.Fprintf(stdout, "  %-8s %-22s %s\n", p.Name, p.Addr, p.Pin[:23]+"...")
	}
	if cfg.RevealScores() {
		fmt.Fprintln(stdout, "scores are revealed to clients: a research cluster, not for templates of real people")
	}
	if cfg.HideProbes() {
		fmt.Fprintln(stdout, "probes are hidden: devices seal the query's shares to the holders; no server sees a probe")
	}
	if *k8s != "" { // 'cluster up' refuses it: it runs in Kubernetes
		fmt.Fprintf(stdout, "render it for namespace %s with: idface deploy k8s --cluster %s --image REGISTRY/idface@sha256:DIGEST --out %s.yaml\n", *k8s, *dir, filepath.Base(*dir))
		fmt.Fprintf(stdout, "  (build and push the image first: idface deploy image; docs/DEPLOY.md, \"Kubernetes\"), then follow the apply line it prints\n")
		return nil
	}
	fmt.Fprintf(stdout, "start it with: idface cluster up --cluster %s\n", *dir)
	return nil
}

// initResult is 'cluster init --json'.
type initResult struct {
	Cluster          string       `json:"cluster"`
	Mode             string       `json:"mode"`
	Parties          int          `json:"parties"`
	Dim              int          `json:"dim"`
	Alpha            int          `json:"alpha"`
	Beta             int          `json:"beta"`
	Tau              float64      `json:"tau"`
	Threshold        int          `json:"threshold"`
	ThresholdMeaning string       `json:"threshold_meaning"`
	RevealScores     bool         `json:"reveal_scores"`
	HideProbes       bool         `json:"hide_probes"`
	Servers          []initServer `json:"servers"`
}

type initServer struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Addr    string `json:"addr"`
	Metrics string `json:"metrics,omitempty"`
	Pin     string `json:"pin"`
}

func initReport(cfg *config.Params, dir string) initResult {
	r := initResult{Cluster: dir, Mode: string(cfg.Mode()), Parties: cfg.Mu(), Dim: cfg.Dim(), Alpha: cfg.Alpha(), Beta: cfg.Beta(),
		Tau: cfg.Tau(), Threshold: cfg.Threshold(), ThresholdMeaning: thresholdMeaning(cfg), RevealScores: cfg.RevealScores(), HideProbes: cfg.HideProbes()}
	for _, p := range cfg.Servers() {
		r.Servers = append(r.Servers, initServer{Name: p.Name, Role: cfg.Role(p.Name), Addr: p.Addr, Metrics: p.Metrics, Pin: p.Pin})
	}
	return r
}

// levelFlags are blind mode's transforms, the same for 'cluster init' and
// 'cluster assemble': both hand them to config.Assemble, which parses and
// checks them (config.New: levels are for mode blind only, their supports
// set alpha and beta).
type levelFlags struct{ gallery, query *string }

// hideProbesFlag is --hide-probes of 'cluster init' and 'cluster
// assemble' (config.Literal.HideProbes).
func hideProbesFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("hide-probes", false, "mode "+modesThat(hidesProbes)+": devices seal the query's shares to the holders, so no server sees a probe (docs/HIDDEN-PROBES.md); every holder must be up to answer")
}

// batchFlags are --batch-max and --batch-wait (config.Literal.BatchMax,
// BatchWait): how an entry groups concurrent identifies into one pass.
type batchFlags struct {
	max  *int
	wait *time.Duration
}

func addBatchFlags(fs *flag.FlagSet) batchFlags {
	return batchFlags{
		max:  fs.Int("batch-max", 0, fmt.Sprintf("most concurrent identifies scored in one pass over the rows (2pc and mpc: an entry's batch, its helpers stream the union of the probes' columns once; blind, replicated, he: the queries that arrive at a server while a pass runs share the next); 1: no batching (default %d)", config.DefaultBatchMax)),
		wait: fs.Duration("batch-wait", 0, fmt.Sprintf("how long an entry holds the first identify of a batch for others (default %v; 2pc and mpc hold none while the entry is idle)", config.DefaultBatchWait)),
	}
}

func addLevelFlags(fs *flag.FlagSet) levelFlags {
	return levelFlags{
		gallery: fs.String("gallery-levels", "", "mode "+modesThat(takesLevels)+": the gallery transform \"L:a1,...\" (default the paper's T_alpha, \"1:alpha\")"),
		query:   fs.String("query-levels", "", "mode "+modesThat(takesLevels)+": the query transform \"L:a1,...\" (default T_beta, \"1:beta\")"),
	}
}

// addSchemeFlag is mode he's encryption scheme, for 'cluster init',
// 'cluster assemble', 'demo' and 'bench'.
func addSchemeFlag(fs *flag.FlagSet) *string {
	return fs.String("scheme", "", "mode "+modesThat(takesScheme)+": the encryption, bgv (Lattigo BGV, the default) or paillier (2048-bit, the paper's other setting; slower)")
}

// defaultParties is the number of parties a mode starts with.
func defaultParties(m config.Mode) int {
	s, err := config.Spec(m)
	if err != nil { // m was parsed: registered
		return 2
	}
	return s.DefaultParties
}

// statusReport is 'cluster status --json'. Row counts are not in it:
// servers give them to servers only.
type statusReport struct {
	Mode         string         `json:"mode"`
	ConfigSerial int            `json:"config_serial"`
	ConfigHash   string         `json:"config_hash"`
	RevealScores bool           `json:"reveal_scores"`
	HideProbes   bool           `json:"hide_probes"`
	Trust        string         `json:"trust"`
	Servers      []serverStatus `json:"servers"`
	AllReachable bool           `json:"all_reachable"`
	SameConfig   bool           `json:"same_config"`
	Agreement    string         `json:"agreement"` // agree, disagree, unknown (a device is not told; a server not compared)
	// Service is what identification gets: "checked" (every server up),
	// "degraded" (one share holder down in a mode that answers without
	// it, unchecked for its shares), "catching-up" (one share holder
	// stands down while it catches up: queries wait for it, or are
	// refused, rather than run degraded) or "down".
	Service string `json:"service"`
	// CalibrationWarning, to an operator, says that more ids are enrolled
	// than the threshold was calibrated for (config.Calibration.Warning).
	CalibrationWarning string `json:"calibration_warning,omitempty"`
	Exit               int    `json:"exit"`
}

// serverStatus is one server's line of 'cluster status'.
type serverStatus struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Addr      string `json:"addr"`
	Pid       *int   `json:"pid"` // a running process of a local cluster
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// CatchingUp: the server answered that it stands down while it
	// catches up (replicated mode: it missed changes; the others wait for
	// it rather than answer degraded without it).
	CatchingUp    bool         `json:"catching_up,omitempty"`
	ConfigSerial  *uint32      `json:"config_serial"`
	ConfigHash    string       `json:"config_hash,omitempty"`
	ConfigMatches bool         `json:"config_matches"`
	HoldsRows     bool         `json:"holds_rows"`
	Unsettled     *int         `json:"unsettled"` // operators only
	Agrees        *bool        `json:"agrees"`    // operators only, for servers that hold rows
	Peers         []peerStatus `json:"peers,omitempty"`
	// DegradedLimit, to operators, in a mode that answers with a holder
	// down: the degraded queries a second this server serves each entry
	// while one is down (configured, or derived from the last minute's
	// checked rate).
	DegradedLimit *uint32 `json:"degraded_limit,omitempty"`
}

type peerStatus struct {
	Name  string `json:"name"`
	State string `json:"state"` // agrees, differs, unreachable
	Note  string `json:"note,omitempty"`
}

// statusProc is one server process of a status report: a server, or in a
// sharded cluster one of its shards or its coordinator.
type statusProc struct {
	Name, Addr string
	member     string
	shard      int
}

// statusProcs lists the processes a status reports, shards before their
// coordinator.
func statusProcs(cfg *config.Params) []statusProc {
	var procs []statusProc
	for _, m := range cfg.Servers() {
		if cfg.Shards() > 1 {
			for s := range cfg.Shards() {
				procs = append(procs, statusProc{config.ShardName(m.Name, s), m.ShardAddr(s), m.Name, s})
			}
		}
		procs = append(procs, statusProc{m.Name, m.Addr, m.Name, config.Coordinator})
	}
	return procs
}

// clusterStatus asks every server for its state through cl; local says
// whether pids of a local cluster can be shown, operator whether cl is an
// operator (only operators learn whether the servers' row maps agree).
// Row counts and digests are never shown: servers give them to servers
// only. Each server that holds rows compares its row map with its peers'
// itself, server to server, and reports agreement. A server unreachable,
// or servers that disagree, are an *exitError (exitUnreachable,
// exitDisagree) after the report.
func clusterStatus(cfg *config.Params, cl *client.Client, local, operator, asJSON bool, stdout io.Writer) error {
	servers := statusProcs(cfg)
	answers := askStatus(cl, servers, operator)
	t := newStatusTally(cfg, local, operator)
	for i, p := range servers {
		t.add(p, answers[i].h, answers[i].err)
	}
	rep := t.report()
	failure := statusFailure(&rep, operator)
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printStatus(cfg, rep, t.lines, len(t.configs) > 1, operator, local, stdout)
	}
	if failure != nil {
		return &exitError{rep.Exit, failure}
	}
	return nil
}

// statusAnswer is a server's answer to cluster status, or why none came.
type statusAnswer struct {
	h   *protocol.HealthOK
	err error
}

// askStatus asks every server at once for its health, as an operator
// with its comparison of row maps.
func askStatus(cl *client.Client, servers []statusProc, operator bool) []statusAnswer {
	answers := make([]statusAnswer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			// A server's comparison takes up to the digest wait, and a
			// peer that does not answer up to a TLS handshake timeout.
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if operator {
				answers[i].h, answers[i].err = cl.ComparePeers(ctx, s.Name)
			} else {
				answers[i].h, answers[i].err = cl.Health(ctx, s.Name)
			}
		})
	}
	wg.Wait()
	return answers
}

// statusTally is cluster status's report as the servers' answers come
// in: the human table's rows beside it.
type statusTally struct {
	cfg             *config.Params
	local, operator bool
	mine            [32]byte // this configuration's hash
	rep             statusReport
	lines           []string // the human table's rows
	configs         map[string]bool
	compared        bool           // every row map compared with every peer's
	differs         bool           // a difference seen
	live            map[string]int // live rows by member (a sharded member's shards add up)
}

func newStatusTally(cfg *config.Params, local, operator bool) *statusTally {
	mine := cfg.Hash()
	t := &statusTally{cfg: cfg, local: local, operator: operator, mine: mine, configs: map[string]bool{}, compared: true, live: map[string]int{},
		rep: statusReport{Mode: string(cfg.Mode()), ConfigSerial: cfg.Serial(), ConfigHash: fmt.Sprintf("%x", mine[:8]),
			RevealScores: cfg.RevealScores(), HideProbes: cfg.HideProbes(), Trust: trustLine(cfg.Mode()), AllReachable: true, SameConfig: true, Agreement: "unknown"}}
	if operator {
		t.rep.Agreement = "agree"
	}
	return t
}

// add counts server p's answer h, or err.
func (t *statusTally) add(p statusProc, h *protocol.HealthOK, err error) {
	cfg := t.cfg
	coordinator := cfg.Shards() > 1 && p.shard == config.Coordinator
	st := serverStatus{Name: p.Name, Role: cfg.Role(p.member), Addr: p.Addr, HoldsRows: cfg.PartyIndex(p.member) >= 0 && !coordinator}
	pidS := "-"
	if t.local {
		if pid, running := cluster.Running(cfg, p.Name); running {
			pidS, st.Pid = fmt.Sprint(pid), &pid
		}
	}
	if err != nil {
		st.Error = err.Error()
		t.rep.AllReachable = false
		t.compared = t.compared && !st.HoldsRows
		t.rep.Servers = append(t.rep.Servers, st)
		state := "unreachable"
		if rowtxn.StandsDown(err, p.member) { // it answers that its rows are older than its peers' (modes/replicated)
			state = "STALE"
			st.CatchingUp = !rowtxn.StandsDownUntilRebuilt(err, p.member)
		}
		t.lines = append(t.lines, fmt.Sprintf("%-8s %-22s %-8s %s: %v", p.Name, p.Addr, pidS, state, err))
		return
	}
	st.Reachable, st.ConfigSerial, st.ConfigHash = true, &h.ConfigSerial, fmt.Sprintf("%x", h.ConfigHash)
	conf := fmt.Sprintf("%d/%x", h.ConfigSerial, h.ConfigHash)
	t.configs[conf] = true
	st.ConfigMatches = h.ConfigHash == [8]byte(t.mine[:8])
	if !st.ConfigMatches {
		conf += " *" // the column keeps its width; the line under the table says what * is
		t.rep.SameConfig = false
	}
	unsettled, rowMap := "-", ""
	switch {
	case coordinator:
		rowMap = fmt.Sprintf("holds no rows (coordinator of %d shards)", cfg.Shards())
	case !st.HoldsRows:
		rowMap = "holds no rows (" + serverRole(cfg, p.member) + ")"
	case !t.operator:
		rowMap = "(operators only)"
	default:
		unsettled, rowMap = t.rowMap(&st, p.member, h)
	}
	t.rep.Servers = append(t.rep.Servers, st)
	t.lines = append(t.lines, fmt.Sprintf("%-8s %-22s %-8s %9s  %-22s  %s", p.Name, p.Addr, pidS, unsettled, conf, rowMap))
}

// rowMap counts what a share holder told an operator (its unsettled
// changes, its agreement with each peer, its live rows) into st, and
// returns the table's unsettled and row map columns.
func (t *statusTally) rowMap(st *serverStatus, member string, h *protocol.HealthOK) (unsettled, rowMap string) {
	n := int(h.InDoubt)
	unsettled, st.Unsettled = fmt.Sprint(n), &n
	rowMap, ok := peerStates(h.Peers, t.cfg.Mu()-1)
	st.Agrees = &ok
	for _, q := range h.Peers {
		st.Peers = append(st.Peers, peerStatus{Name: q.Name, State: strings.ToLower(q.State.String()), Note: q.Note})
		t.differs = t.differs || q.State == protocol.PeerDiffers
	}
	t.compared = t.compared && ok
	t.live[member] += int(h.Live)
	if h.DegradedLimit > 0 {
		limit := h.DegradedLimit
		st.DegradedLimit = &limit
	}
	return unsettled, rowMap
}

// report is the report once every server is counted: agreement, service
// and the calibration's warning.
func (t *statusTally) report() statusReport {
	rep := t.rep
	if len(t.configs) > 1 {
		rep.SameConfig = false
	}
	// A peer that could not be reached is no disagreement: its row map is
	// unknown.
	switch {
	case !t.operator:
	case t.differs:
		rep.Agreement = "disagree"
	case !t.compared:
		rep.Agreement = "unknown"
	}
	rep.Service = service(t.cfg, &rep, t.operator)
	if c, ok := t.cfg.Calibration(); ok && len(t.live) > 0 {
		most := 0
		for _, n := range t.live {
			most = max(most, n)
		}
		rep.CalibrationWarning = c.Warning(most)
	}
	return rep
}

// statusFailure sets rep's exit status and says why it is not 0 (nil
// when it is).
func statusFailure(rep *statusReport, operator bool) error {
	var failure error
	switch {
	case !slices.ContainsFunc(rep.Servers, func(st serverStatus) bool { return st.Reachable }):
		rep.Exit, failure = exitUnreachable, errors.New("no server answers (exit 3)")
	case !rep.AllReachable:
		rep.Exit, failure = exitUnreachable, errors.New("a server is unreachable (exit 3)")
	case !rep.SameConfig:
		rep.Exit, failure = exitDisagree, errors.New("the servers run different configurations (exit 4)")
	case rep.Agreement == "disagree":
		rep.Exit, failure = exitDisagree, errors.New("the servers' row maps disagree (exit 4)")
	case rep.Agreement == "unknown" && operator:
		rep.Exit, failure = exitDisagree, errors.New("the servers could not compare their row maps (exit 4)")
	}
	return failure
}

// service says what identification gets from the servers of rep: every
// server up, or in a mode that answers with a party down (ModeSpec.Outage)
// one share holder down (any of its processes, in a sharded cluster: its
// coordinator, shards or all) while the others agree among themselves
// (then their reports of it as unreachable are not a disagreement).
func service(cfg *config.Params, rep *statusReport, operator bool) string {
	var down []serverStatus
	for _, st := range rep.Servers {
		if !st.Reachable {
			down = append(down, st)
		}
	}
	if len(down) == 0 {
		return "checked"
	}
	one := config.MemberOf(down[0].Name)
	if cfg.PartyIndex(one) < 0 || !cfg.Spec().Outage {
		return "down"
	}
	catchingUp := true
	for _, st := range down {
		if config.MemberOf(st.Name) != one {
			return "down"
		}
		catchingUp = catchingUp && st.CatchingUp
	}
	if catchingUp {
		return "catching-up"
	}
	if cfg.HideProbes() { // a hidden probe needs every holder
		return "down"
	}
	if operator && rep.Agreement != "agree" {
		// The holders up compared their row maps with each other.
		rep.Agreement = "agree"
		for _, st := range rep.Servers {
			for _, q := range st.Peers {
				switch {
				case config.MemberOf(q.Name) == one:
				case q.State == "differs":
					rep.Agreement = "disagree"
				case q.State != "agrees" && rep.Agreement == "agree":
					rep.Agreement = "unknown"
				}
			}
		}
	}
	if rep.Agreement == "disagree" || operator && rep.Agreement == "unknown" {
		return "down"
	}
	return "degraded"
}

// printStatus is the human form of a status report; local says it is
// a local cluster's (started with 'cluster up').
func printStatus(cfg *config.Params, rep statusReport, lines []string, configsDiffer, operator, local bool, stdout io.Writer) {
	fmt.Fprintf(stdout, "%-8s %-22s %-8s %9s  %-22s  %s\n", "server", "addr", "pid", "unsettled", "config", "row map")
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	fmt.Fprintf(stdout, "this config: serial %d, hash %s\n", rep.ConfigSerial, rep.ConfigHash)
	if !rep.SameConfig {
		fmt.Fprintln(stdout, "* the server's config differs from this config")
	}
	if configsDiffer {
		fmt.Fprintln(stdout, "servers run DIFFERENT configurations: restart each with the same cluster.json")
	}
	if cfg.RevealScores() {
		fmt.Fprintln(stdout, "answers reveal scores (research cluster)")
	} else {
		fmt.Fprintln(stdout, "answers reveal decisions only")
	}
	if cfg.HideProbes() {
		fmt.Fprintln(stdout, "probes are hidden from every server (and need every share holder up)")
	}
	fmt.Fprintln(stdout, rep.Trust)
	var down []string
	running := false // a local cluster's process of any server
	for _, st := range rep.Servers {
		if !st.Reachable {
			down = append(down, st.Name)
		}
		running = running || st.Pid != nil
	}
	start := "start them (their services), or check the network between them and this host"
	if local {
		start = "start them: idface cluster up --cluster " + cfg.Dir()
	}
	switch {
	case len(down) == len(rep.Servers) && local && !running:
		fmt.Fprintf(stdout, "nothing runs: no server of this cluster is running, so nothing answers; %s\n", start)
	case len(down) == len(rep.Servers):
		fmt.Fprintf(stdout, "no server answers: nothing can be enrolled or identified; %s\n", start)
	case !operator:
		if len(down) > 0 {
			fmt.Fprintf(stdout, "%s %s unreachable; %s\n", strings.Join(down, ", "), isAre(len(down)), start)
		}
		fmt.Fprintln(stdout, "whether the servers agree on the row map is shown to operators only")
	case rep.AllReachable && rep.Agreement == "agree":
		fmt.Fprintln(stdout, "all servers agree on the row map (each compared its rows with every other server's)")
	case rep.Service == "degraded":
		fmt.Fprintln(stdout, "the cluster answers DEGRADED: one share holder is down; the others agree and answer without checking its shares (answers are flagged degraded); checked answers resume by themselves once it is back")
	case rep.Service == "catching-up":
		fmt.Fprintf(stdout, "the cluster WAITS for %s, which stands down while it catches up (it missed changes): identification waits for it, up to 5 s a query, or is refused, never answered without it; it serves again by itself, usually within seconds (its line says why, and what to do if it cannot)\n", strings.Join(down, ", "))
	case rep.Agreement == "disagree":
		fmt.Fprintln(stdout, "servers DISAGREE on the row map: identification is refused until they agree (the servers' logs say how their rows differ)")
		if len(down) > 0 {
			fmt.Fprintf(stdout, "and %s %s unreachable; %s\n", strings.Join(down, ", "), isAre(len(down)), start)
		}
	case len(down) > 0:
		fmt.Fprintf(stdout, "%s %s unreachable: identification is refused until every server answers (the others' row maps are compared then); %s\n", strings.Join(down, ", "), isAre(len(down)), start)
	default:
		fmt.Fprintln(stdout, "the servers could not compare their row maps (a server cannot reach another: see the row map column): identification is refused until they reach each other")
	}
	if line := degradedLimitLine(cfg, rep); line != "" && operator {
		fmt.Fprintln(stdout, line)
	}
	if rep.CalibrationWarning != "" {
		fmt.Fprintln(stdout, "warning: "+rep.CalibrationWarning)
	}
}

// degradedLimitLine says how many degraded queries a second the holders
// up serve an entry while one holder is down ("" where none said).
func degradedLimitLine(cfg *config.Params, rep statusReport) string {
	var limits []string
	for _, st := range rep.Servers {
		if st.DegradedLimit != nil {
			limits = append(limits, fmt.Sprintf("%s %d", st.Name, *st.DegradedLimit))
		}
	}
	if len(limits) == 0 {
		return ""
	}
	how := "derived: 1.5x the busiest second of checked queries in the last 60 seconds that had any, at least 20; set degraded_rate in the cluster config to fix it"
	if r := cfg.DegradedRate(); r > 0 {
		how = fmt.Sprintf("degraded_rate %g in the cluster config", r)
	}
	return fmt.Sprintf("degraded limit, queries a second each holder serves an entry while one holder is down: %s (%s)", strings.Join(limits, ", "), how)
}

// isAre is the verb for n names.
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// trustLine states what the mode's protection assumes of the servers
// (docs/SECURITY.md), as the mode declares it.
func trustLine(m config.Mode) string {
	if s, err := config.Spec(m); err == nil && s.Trust != "" {
		return s.Trust
	}
	return "trust: see docs/SECURITY.md"
}

// serverRole names a server's role, as its mode declares it.
func serverRole(cfg *config.Params, name string) string {
	srv, err := modes.ServerOf(cfg, name)
	if err != nil {
		return "unknown role"
	}
	return srv.Role
}

// peerStates is a server's report on its peers' row maps, and whether all
// want of them agree with its own.
func peerStates(peers []protocol.PeerState, want int) (string, bool) {
	if want == 0 {
		return "no other server holds rows", true
	}
	var agreeing, other []string
	for _, p := range peers {
		switch p.State {
		case protocol.PeerAgrees:
			agreeing = append(agreeing, p.Name)
		default:
			other = append(other, fmt.Sprintf("%s %v (%s)", p.Name, p.State, p.Note))
		}
	}
	var parts []string
	if len(agreeing) > 0 {
		parts = append(parts, "agrees with "+strings.Join(agreeing, ", "))
	}
	parts = append(parts, other...)
	if len(peers) != want {
		parts = append(parts, fmt.Sprintf("compared with %d of %d peers", len(peers), want))
	}
	return strings.Join(parts, "; "), len(agreeing) == want
}

// checkLayout refuses data laid out for another shard count: an unsharded
// server's log where shards are configured, or shards where none are (the
// server would start empty beside its rows).
func checkLayout(cfg *config.Params, h *home.Home) error {
	srv, err := modes.ServerOf(cfg, h.Self.Name)
	if err != nil || srv.Log == "" {
		return err
	}
	data := h.DataDir()
	_, errLog := os.Stat(filepath.Join(data, srv.Log))
	_, errShard := os.Stat(filepath.Join(data, "shard-0"))
	switch {
	case cfg.Shards() > 1 && errLog == nil:
		return fmt.Errorf("%s holds %s's rows unsharded, and the configuration has %d shards: move them with 'idface shard rebalance' (a local cluster), not by starting shards beside them", data, h.Self.Name, cfg.Shards())
	case cfg.Shards() == 1 && errShard == nil:
		return fmt.Errorf("%s holds %s's rows in shards, and the configuration has none: move them with 'idface shard rebalance --shards 1' (a local cluster)", data, h.Self.Name)
	}
	return nil
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

func cmdServe(args []string, stdout, stderr io.Writer) error {
	o, err := serveFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, h, err := o.open()
	if err != nil {
		return err
	}
	log := o.logger(h.Self.Name, stderr)
	// The heap is mostly pointer-free share columns, which the collector
	// need not scan: collecting at 25% growth keeps RSS near the live
	// shares for little CPU. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	addr, err := o.metricsAt(cfg, h.Self.Name)
	if err != nil {
		return err
	}
	// The data's lock first: a second server is refused as running, not by
	// a port in use. Then the HTTP endpoints listen before the server opens
	// (replaying a large log takes minutes): /healthz says "starting" until
	// it serves.
	unlock, err := h.Lock("serve")
	if err != nil {
		return err
	}
	opened := false
	defer func() {
		if !opened {
			unlock()
		}
	}()
	var served atomic.Pointer[http.Handler]
	closeEndpoints, err := o.endpoints(addr, &served, log)
	defer closeEndpoints()
	if err != nil {
		return err
	}
	srv, err := server.OpenShard(ctx, cfg, h, o.shard, log, unlock)
	if err != nil {
		opened = true // OpenLocked released the lock
		return err
	}
	opened = true // the server releases it after Serve
	mh := srv.MetricsHandler()
	served.Store(&mh)
	err = srv.Serve(ctx)
	log.Info("stopped", "err", err)
	return err
}

// serveOptions are serve's flags, checked.
type serveOptions struct {
	mf                              memberFlags
	verbose, pprof                  bool
	metricsAddr, listen, healthAddr string
	shard                           int
}

func serveFlags(args []string, stderr io.Writer) (*serveOptions, error) {
	fs := newFlags("serve", "idface serve --config cluster.json --home DIR [--metrics-addr HOST:PORT]\nidface serve --cluster DIR --party NAME\n\n"+
		"Runs the server whose home is DIR (its key, certificate and data) until\n"+
		"SIGINT or SIGTERM; --cluster/--party is the same for a local cluster.", stderr)
	o := &serveOptions{mf: addMemberFlags(fs, "party", "server name in a local cluster").withData(fs)}
	fs.BoolVar(&o.verbose, "v", false, "debug logging")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve /metrics on this TCP address (default: the server's loopback metrics address in the config); any address named here is used as given")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve /debug/pprof/ on the metrics address (loopback addresses only)")
	fs.StringVar(&o.listen, "listen", "", "bind this UDP address instead of the home's (a pod binds 0.0.0.0:PORT; the others still dial the advertised address)")
	fs.StringVar(&o.healthAddr, "health-addr", "", "serve /healthz alone on this TCP address (200 \"serving\"; 503 \"starting\", \"stopping\" or \"failed\"): for probes, without the metrics")
	fs.IntVar(&o.shard, "shard", config.Coordinator, "in a sharded cluster: run this shard of the server (0..shards-1, its data in DATA/shard-N); without it, the server's coordinator")
	ordinal := fs.Bool("shard-ordinal", false, "run the shard this pod's StatefulSet ordinal names (the number that ends the host name): 'deploy k8s' gives a sharded server's shard pods this flag")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if *ordinal {
		var err error
		if o.shard, err = shardOrdinal(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// shardOrdinal is the shard that this pod's StatefulSet ordinal names:
// the number that ends its host name.
func shardOrdinal() (int, error) {
	var err error
	host := os.Getenv("HOSTNAME") // the pod's name, as Kubernetes sets it
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return 0, err
		}
	}
	_, n, _ := cutLast(host, "-")
	shard, err := strconv.Atoi(n)
	if err != nil || shard < 0 {
		return shard, fmt.Errorf("--shard-ordinal: the host name %q does not end in a pod's ordinal (-N)", host)
	}
	return shard, nil
}

// open opens the server's home and configuration, for its shard, bound
// to --listen when given.
func (o *serveOptions) open() (*config.Params, *home.Home, error) {
	cfg, h, _, err := o.mf.open("")
	if err != nil {
		return nil, nil, err
	}
	if o.shard < config.Coordinator || o.shard >= cfg.Shards() || cfg.Shards() == 1 && o.shard != config.Coordinator {
		return nil, nil, fmt.Errorf("--shard %d: this cluster has %d shards per server (give 0..%d, or no --shard for the coordinator)", o.shard, cfg.Shards(), cfg.Shards()-1)
	}
	if err := checkLayout(cfg, h); err != nil {
		return nil, nil, err
	}
	if cfg.Shards() > 1 {
		h.UseShard(o.shard)
	}
	if o.listen != "" {
		if _, _, err := net.SplitHostPort(o.listen); err != nil {
			return nil, nil, fmt.Errorf("--listen %q: %w", o.listen, err)
		}
		h.Listen = o.listen
	}
	return cfg, h, nil
}

// logger is the server's log on stderr, naming it (or its shard).
func (o *serveOptions) logger(name string, stderr io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	who := name
	if o.shard != config.Coordinator {
		who = config.ShardName(who, o.shard)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("server", who)
}

// metricsAt is where server name serves its metrics ("" nowhere):
// --metrics-addr, or the configuration's for a coordinator; checked with
// --pprof and --health-addr.
func (o *serveOptions) metricsAt(cfg *config.Params, name string) (string, error) {
	me, ok := cfg.Server(name)
	if !ok {
		return "", fmt.Errorf("%s is not a server of this cluster", name)
	}
	addr := o.metricsAddr
	if addr == "" && o.shard == config.Coordinator { // a shard's metrics only where named
		addr = me.Metrics
	}
	if addr == "" && o.pprof {
		return "", fmt.Errorf("--pprof serves profiles beside the metrics, and %s has no metrics address: give --metrics-addr 127.0.0.1:PORT (or 'cluster init --metrics')", name)
	}
	if o.pprof {
		if err := config.CheckLoopback(addr); err != nil {
			return "", fmt.Errorf("--pprof: %w: profiles are served on loopback only", err)
		}
	}
	if addr != "" && addr == o.healthAddr {
		return "", fmt.Errorf("--health-addr %s is the metrics address: give another port (the metrics address serves /healthz too)", addr)
	}
	return addr, nil
}

// endpoints serves the metrics (on addr, with pprof) and the health
// (--health-addr) endpoints, each answering "starting" until served holds
// the server's handler. closeAll closes those that listen, also after a
// failure to listen.
func (o *serveOptions) endpoints(addr string, served *atomic.Pointer[http.Handler], log *slog.Logger) (closeAll func(), err error) {
	var servers []*http.Server
	closeAll = func() {
		for _, hs := range slices.Backward(servers) {
			hs.Close()
		}
	}
	late := func(healthOnly bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if healthOnly && r.URL.Path != "/healthz" {
				http.NotFound(w, r)
				return
			}
			if h := served.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "starting")
		})
	}
	for _, e := range []struct {
		what, addr string
		h          http.Handler
	}{{"metrics", addr, late(false)}, {"health", o.healthAddr, late(true)}} {
		if e.addr == "" {
			continue
		}
		h := e.h
		if e.what == "metrics" && o.pprof {
			mux := http.NewServeMux()
			mux.Handle("/", h) // /metrics and /healthz
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			h = mux
		}
		ln, err := net.Listen("tcp", e.addr)
		if err != nil {
			return closeAll, fmt.Errorf("%s endpoint: %w", e.what, err)
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln)
		servers = append(servers, hs)
		log.Info(e.what, "addr", ln.Addr().String(), "pprof", e.what == "metrics" && o.pprof)
	}
	return closeAll, nil
}
