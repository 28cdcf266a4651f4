package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/server"
)

func init() {
	register("cluster", "create and run a local cluster: init, up, down, status", cmdCluster)
	register("serve", "run one party in the foreground", cmdServe)
}

func cmdCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: idface cluster init|up|down|status --dir DIR [flags]")
		return errUsage
	}
	switch args[0] {
	case "init":
		return clusterInit(args[1:], stdout, stderr)
	case "up", "down", "status":
		fs := newFlags("cluster "+args[0], "idface cluster "+args[0]+" --dir DIR", stderr)
		dir := fs.String("dir", "", "cluster directory")
		timeout := fs.Duration("timeout", 60*time.Second, "how long 'up' waits for every party to be healthy")
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
		switch args[0] {
		case "up":
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			if err := cluster.Up(context.Background(), cfg, exe, *timeout); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d servers up (%s, logs in %s/logs)\n", len(cfg.Servers()), cfg.Mode(), *dir)
			return nil
		case "down":
			if err := cluster.Down(cfg); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "cluster down")
			return nil
		default:
			return clusterStatus(cfg, stdout)
		}
	default:
		fmt.Fprintf(stderr, "idface cluster: unknown subcommand %q (want init, up, down or status)\n", args[0])
		return errUsage
	}
}

func clusterInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster init", "idface cluster init --dir DIR --mode 2pc|mpc --parties MU [--dim 512] [--alpha 341] [--beta 63] [--tau 0.3]\n\n"+
		"Writes DIR/cluster.json and a key and self-signed certificate for every\n"+
		"party and client (DIR/keys). Each party gets a free UDP port on 127.0.0.1.", stderr)
	dir := fs.String("dir", "", "cluster directory (created)")
	mode := fs.String("mode", "2pc", "2pc (two parties), mpc (mu parties) or he (local servers and a key server)")
	parties := fs.Int("parties", 0, "number of parties mu (default 2; 1 local server in mode he)")
	devices := fs.Int("devices", 1, "number of device identities (identify only) besides the operator")
	dim := fs.Int("dim", 0, fmt.Sprintf("template dimension d (default %d)", config.DefaultDim))
	alpha := fs.Int("alpha", 0, "enrollment weight (default floor(2d/3))")
	beta := fs.Int("beta", 0, fmt.Sprintf("query weight (default min(%d, alpha))", config.DefaultBeta))
	tau := fs.Float64("tau", config.DefaultTau, "cosine threshold")
	host := fs.String("host", "127.0.0.1", "address the parties listen on")
	force := fs.Bool("force", false, "replace an existing cluster config")
	metrics := fs.Bool("metrics", false, "give every server a loopback /metrics address")
	reveal := fs.Bool("reveal-scores", false, "research cluster: identify answers with scores and candidates below the threshold (never for a deployment: scores for chosen probes reconstruct templates)")
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
	cfg, err := cluster.Init(*dir, cluster.Options{Mode: m, Parties: *parties, Devices: *devices, Dim: *dim,
		Alpha: *alpha, Beta: *beta, Tau: tau, Host: *host, Force: *force, Metrics: *metrics, RevealScores: *reveal})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster %s: mode %s, %d parties, d = %d, alpha = %d, beta = %d, tau = %.3f\n",
		*dir, cfg.Mode(), cfg.Mu(), cfg.Dim(), cfg.Alpha(), cfg.Beta(), cfg.Tau())
	for _, p := range cfg.Servers() {
		fmt.Fprintf(stdout, "  %-8s %-22s %s\n", p.Name, p.Addr, p.Pin[:23]+"...")
	}
	if cfg.RevealScores() {
		fmt.Fprintln(stdout, "scores are revealed to clients: a research cluster, not for templates of real people")
	}
	fmt.Fprintf(stdout, "start it with: idface cluster up --dir %s\n", *dir)
	return nil
}

// defaultParties is the number of parties a mode starts with.
func defaultParties(m config.Mode) int {
	if m == config.ModeHE {
		return 1
	}
	return 2
}

func clusterStatus(cfg *config.Params, stdout io.Writer) error {
	cl, err := client.Open(cfg, "", "")
	if err != nil {
		return err
	}
	defer cl.Close()
	fmt.Fprintf(stdout, "%-8s %-22s %-8s %10s %10s %8s  %s\n", "party", "addr", "pid", "rows", "live", "undecided", "digest")
	var first string
	agree := true
	for _, p := range cfg.Servers() {
		pid, running := cluster.Running(cfg, p.Name)
		pidS := "-"
		if running {
			pidS = fmt.Sprint(pid)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		h, err := cl.Health(ctx, p.Name)
		cancel()
		if err != nil {
			fmt.Fprintf(stdout, "%-8s %-22s %-8s unreachable: %v\n", p.Name, p.Addr, pidS, err)
			agree = false
			continue
		}
		rows, live := 0, 0
		for _, s := range h.Digest {
			rows += int(s.Rows)
			live += int(s.Live)
		}
		dg := digestString(h.Digest)
		if h.Mode == "he-key" {
			fmt.Fprintf(stdout, "%-8s %-22s %-8s %10s %10s %8s  %s\n", p.Name, p.Addr, pidS, "-", "-", "-", "key server")
			continue
		}
		if first == "" {
			first = dg
		} else if dg != first {
			agree = false
		}
		fmt.Fprintf(stdout, "%-8s %-22s %-8s %10d %10d %8d  %s\n", p.Name, p.Addr, pidS, rows, live, h.InDoubt, dg)
	}
	if cfg.RevealScores() {
		fmt.Fprintln(stdout, "answers reveal scores (research cluster)")
	} else {
		fmt.Fprintln(stdout, "answers reveal decisions only")
	}
	if agree {
		fmt.Fprintln(stdout, "all parties agree on the row map")
	} else {
		fmt.Fprintln(stdout, "parties DISAGREE or are unreachable: identification is refused until they agree")
	}
	return nil
}

// digestString is a short fingerprint of a party's row map.
func digestString(g protocol.Digest) string {
	h := sha256.New()
	for _, s := range g {
		fmt.Fprintf(h, "%d/%d/%x;", s.Rows, s.Live, s.Hash)
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "idface serve --cluster DIR --party NAME [--metrics-addr HOST:PORT]\n\nRuns one server in the foreground until SIGINT or SIGTERM.", stderr)
	dir := fs.String("cluster", "", "cluster directory")
	name := fs.String("party", "", "server name from the cluster config")
	verbose := fs.Bool("v", false, "debug logging")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics on this TCP address (default: the server's loopback metrics address in the config); any address named here is used as given")
	pprofOn := fs.Bool("pprof", false, "also serve /debug/pprof/ on the metrics address (loopback addresses only)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "cluster", "party"); err != nil {
		return err
	}
	cfg, err := config.Load(*dir)
	if err != nil {
		return err
	}
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
		return fmt.Errorf("no server %q in %s", *name, *dir)
	}
	srv, err := server.Open(ctx, cfg, *name, log)
	if err != nil {
		return err
	}
	addr := *metricsAddr
	if addr == "" {
		addr = me.Metrics
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
