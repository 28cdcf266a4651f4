package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/server"
)

func init() {
	register("cluster", "create and run a local cluster (init, up, down, status) or assemble a deployment's config", cmdCluster)
	register("serve", "run one server in the foreground", cmdServe)
}

func cmdCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: idface cluster init|up|down|status --dir DIR [flags]\n       idface cluster assemble --out cluster.json --mode MODE A.pub.json ...\n       idface cluster status --config cluster.json --home DIR")
		return errUsage
	}
	switch args[0] {
	case "init":
		return clusterInit(args[1:], stdout, stderr)
	case "assemble":
		return clusterAssemble(args[1:], stdout, stderr)
	case "status":
		fs := newFlags("cluster status", "idface cluster status --dir DIR\nidface cluster status --config cluster.json --home DIR\n\n"+
			"Asks every server for the configuration (serial and hash) it runs and, as an\n"+
			"operator, for its unsettled changes and whether its row map agrees with\n"+
			"every other server's (each server compares with its peers itself; row\n"+
			"counts and digests go to servers only), through a local cluster's operator\n"+
			"or through the member whose home is given.", stderr)
		dir := fs.String("dir", "", "local cluster directory")
		conf := fs.String("config", "", "cluster configuration file (with --home)")
		hdir := fs.String("home", "", "a member's home (with --config)")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		name := ""
		mf := memberFlags{dir: dir, name: &name, config: conf, home: hdir}
		cfg, h, local, err := mf.open("client")
		if err != nil {
			return err
		}
		cl, err := client.Open(cfg, h, "")
		if err != nil {
			return err
		}
		defer cl.Close()
		return clusterStatus(cfg, cl, local, h.Self.Role == config.RoleOperator, stdout)
	case "up", "down":
		fs := newFlags("cluster "+args[0], "idface cluster "+args[0]+" --dir DIR", stderr)
		dir := fs.String("dir", "", "cluster directory")
		timeout := fs.Duration("timeout", 60*time.Second, "how long 'up' waits for every server to be healthy")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if err := required(fs, "dir"); err != nil {
			return err
		}
		cfg, err := config.Load(*dir)
		if err != nil {
			return err
		}
		if args[0] == "down" {
			if err := cluster.Down(cfg); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "cluster down")
			return nil
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		if err := cluster.Up(context.Background(), cfg, exe, *timeout); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d servers up (%s, logs in %s/logs)\n", len(cfg.Servers()), cfg.Mode(), *dir)
		return nil
	default:
		fmt.Fprintf(stderr, "idface cluster: unknown subcommand %q (want init, assemble, up, down or status)\n", args[0])
		return errUsage
	}
}

func clusterInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster init", "idface cluster init --dir DIR --mode "+modeNames("|")+" --parties MU [--calibration calibration.json | --dim 512 --alpha 341 --beta 63 --tau 0.3]\n"+
		"                   [--gallery-levels L:a1,... --query-levels L:a1,...] (mode blind) [--scheme bgv|paillier] (mode he)\n\n"+
		"A local test cluster built like a deployment: every server and client gets\n"+
		"its own home DIR/homes/NAME (key, certificate, public descriptor, data) and\n"+
		"DIR/cluster.json is assembled from the public descriptors. Each server gets\n"+
		"a free UDP port on --host.\n\n"+
		"The threshold: --calibration takes a file from 'idface calibrate', which\n"+
		"chose it for a target false-positive identification rate on your own\n"+
		"labelled templates; without it, --tau is a bare cosine threshold.\n\n"+
		"Modes:\n"+modeList(), stderr)
	dir := fs.String("dir", "", "cluster directory (created)")
	mode := fs.String("mode", "2pc", "the mode: "+modeNames(", ")+" (listed above)")
	parties := fs.Int("parties", 0, "number of parties mu (share holders or local servers; default: the mode's)")
	devices := fs.Int("devices", 1, "number of device identities (identify only) besides the operator")
	dim := fs.Int("dim", 0, fmt.Sprintf("template dimension d (default %d)", config.DefaultDim))
	alpha := fs.Int("alpha", 0, "enrollment weight (default floor(2d/3))")
	beta := fs.Int("beta", 0, fmt.Sprintf("query weight (default min(%d, alpha))", config.DefaultBeta))
	tau := fs.Float64("tau", config.DefaultTau, "cosine threshold (uncalibrated; see --calibration)")
	cal := calibrationFlag(fs)
	host := fs.String("host", "127.0.0.1", "address the parties listen on")
	force := fs.Bool("force", false, "replace an existing cluster config")
	metrics := fs.Bool("metrics", false, "give every server a loopback /metrics address")
	reveal := fs.Bool("reveal-scores", false, "research cluster: identify answers with scores and candidates below the threshold (never for a deployment: scores for chosen probes reconstruct templates)")
	levels := addLevelFlags(fs)
	scheme := addSchemeFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "dir"); err != nil {
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
	if *cal != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := applyCalibration(*cal, &lit, set); err != nil {
			return err
		}
	}
	cfg, err := cluster.Init(*dir, cluster.Options{Mode: m, Parties: *parties, Devices: *devices, Dim: lit.Dim,
		Alpha: lit.Alpha, Beta: lit.Beta, Tau: lit.Tau, Host: *host, Force: *force, Metrics: *metrics, RevealScores: *reveal,
		GalleryLevels: lit.GalleryLevels, QueryLevels: lit.QueryLevels, Scheme: *scheme, Calibration: lit.Calibration})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster %s: mode %s, %d parties, d = %d, alpha = %d, beta = %d\n",
		*dir, cfg.Mode(), cfg.Mu(), cfg.Dim(), cfg.Alpha(), cfg.Beta())
	fmt.Fprintf(stdout, "  %s\n", thresholdMeaning(cfg))
	if md, err := engine.ModeOf(cfg); err == nil && md.Describe != nil {
		fmt.Fprintf(stdout, "  %s\n", md.Describe(cfg))
	}
	for _, p := range cfg.Servers() {
		fmt.Fprintf(stdout, "  %-8s %-22s %s\n", p.Name, p.Addr, p.Pin[:23]+"...")
	}
	if cfg.RevealScores() {
		fmt.Fprintln(stdout, "scores are revealed to clients: a research cluster, not for templates of real people")
	}
	fmt.Fprintf(stdout, "start it with: idface cluster up --dir %s\n", *dir)
	return nil
}

// levelFlags are blind mode's transforms, the same for 'cluster init' and
// 'cluster assemble': both hand them to config.Assemble, which parses and
// checks them (config.New: levels are for mode blind only, their supports
// set alpha and beta).
type levelFlags struct{ gallery, query *string }

func addLevelFlags(fs *flag.FlagSet) levelFlags {
	return levelFlags{
		gallery: fs.String("gallery-levels", "", "mode blind: the gallery transform \"L:a1,...\" (default the paper's T_alpha, \"1:alpha\")"),
		query:   fs.String("query-levels", "", "mode blind: the query transform \"L:a1,...\" (default T_beta, \"1:beta\")"),
	}
}

// addSchemeFlag is mode he's encryption scheme, for 'cluster init',
// 'cluster assemble', 'demo' and 'bench'.
func addSchemeFlag(fs *flag.FlagSet) *string {
	return fs.String("scheme", "", "mode he: the encryption, bgv (Lattigo BGV, the default) or paillier (2048-bit, the paper's other setting; slower)")
}

// defaultParties is the number of parties a mode starts with.
func defaultParties(m config.Mode) int {
	s, err := config.Spec(m)
	if err != nil { // m was parsed: registered
		return 2
	}
	return s.DefaultParties
}

// clusterStatus asks every server for its state through cl; local says
// whether pids of a local cluster can be shown, operator whether cl is an
// operator (only operators learn whether the servers' row maps agree).
// Row counts and digests are never shown: servers give them to servers
// only. Each server that holds rows compares its row map with its peers'
// itself, server to server, and reports agreement.
func clusterStatus(cfg *config.Params, cl *client.Client, local, operator bool, stdout io.Writer) error {
	servers := cfg.Servers()
	type answer struct {
		h   *protocol.HealthOK
		err error
	}
	answers := make([]answer, len(servers))
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
	fmt.Fprintf(stdout, "%-8s %-22s %-8s %9s  %-22s  %s\n", "server", "addr", "pid", "unsettled", "config", "row map")
	agree := true
	mine := cfg.Hash()
	configs := map[string]bool{}
	for i, p := range servers {
		pidS := "-"
		if local {
			if pid, running := cluster.Running(cfg, p.Name); running {
				pidS = fmt.Sprint(pid)
			}
		}
		h, err := answers[i].h, answers[i].err
		if err != nil {
			fmt.Fprintf(stdout, "%-8s %-22s %-8s unreachable: %v\n", p.Name, p.Addr, pidS, err)
			agree = false
			continue
		}
		conf := fmt.Sprintf("%d/%x", h.ConfigSerial, h.ConfigHash)
		configs[conf] = true
		if h.ConfigHash != [8]byte(mine[:8]) {
			conf += " (differs from this config)"
		}
		unsettled, rowMap := "-", ""
		switch {
		case cfg.PartyIndex(p.Name) < 0:
			rowMap = "holds no rows (" + serverRole(cfg, p.Name) + ")"
		case !operator:
			rowMap = "(operators only)"
		default:
			unsettled = fmt.Sprint(h.InDoubt)
			var ok bool
			rowMap, ok = peerStates(h.Peers, cfg.Mu()-1)
			agree = agree && ok
		}
		fmt.Fprintf(stdout, "%-8s %-22s %-8s %9s  %-22s  %s\n", p.Name, p.Addr, pidS, unsettled, conf, rowMap)
	}
	fmt.Fprintf(stdout, "this config: serial %d, hash %x\n", cfg.Serial(), mine[:8])
	if len(configs) > 1 {
		fmt.Fprintln(stdout, "servers run DIFFERENT configurations: restart each with the same cluster.json")
	}
	if cfg.RevealScores() {
		fmt.Fprintln(stdout, "answers reveal scores (research cluster)")
	} else {
		fmt.Fprintln(stdout, "answers reveal decisions only")
	}
	fmt.Fprintln(stdout, trustLine(cfg.Mode()))
	switch {
	case !operator:
		fmt.Fprintln(stdout, "whether the servers agree on the row map is shown to operators only")
	case agree:
		fmt.Fprintln(stdout, "all servers agree on the row map (each compared its rows with every other server's)")
	default:
		fmt.Fprintln(stdout, "servers DISAGREE or are unreachable: identification is refused until they agree (the servers' logs say how their rows differ)")
	}
	return nil
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
	srv, err := engine.ServerOf(cfg, name)
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

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "idface serve --config cluster.json --home DIR [--metrics-addr HOST:PORT]\nidface serve --cluster DIR --party NAME\n\n"+
		"Runs the server whose home is DIR (its key, certificate and data) until\n"+
		"SIGINT or SIGTERM; --cluster/--party is the same for a local cluster.", stderr)
	mf := addMemberFlags(fs, "party", "server name in a local cluster")
	verbose := fs.Bool("v", false, "debug logging")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics on this TCP address (default: the server's loopback metrics address in the config); any address named here is used as given")
	pprofOn := fs.Bool("pprof", false, "also serve /debug/pprof/ on the metrics address (loopback addresses only)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, h, _, err := mf.open("")
	if err != nil {
		return err
	}
	name := &h.Self.Name
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("server", *name)
	// The heap is mostly pointer-free share columns, which the collector
	// need not scan: collecting at 25% growth keeps RSS near the live
	// shares for little CPU. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	me, ok := cfg.Server(*name)
	if !ok {
		return fmt.Errorf("%s is not a server of this cluster", *name)
	}
	addr := *metricsAddr
	if addr == "" {
		addr = me.Metrics
	}
	if addr == "" && *pprofOn {
		return fmt.Errorf("--pprof serves profiles beside the metrics, and %s has no metrics address: give --metrics-addr 127.0.0.1:PORT (or 'cluster init --metrics')", *name)
	}
	srv, err := server.Open(ctx, cfg, h, log)
	if err != nil {
		return err
	}
	if addr != "" {
		h := srv.MetricsHandler()
		if *pprofOn {
			if err := config.CheckLoopback(addr); err != nil {
				return fmt.Errorf("--pprof: %w: profiles are served on loopback only", err)
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics", h)
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			h = mux
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("metrics endpoint: %w", err)
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln)
		defer hs.Close()
		log.Info("metrics", "addr", ln.Addr().String(), "pprof", *pprofOn)
	}
	err = srv.Serve(ctx)
	log.Info("stopped", "err", err)
	return err
}
