package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/party"
	"github.com/idface/idface/protocol"
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
		cfg, err := party.LoadConfig(*dir)
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
			fmt.Fprintf(stdout, "%d parties up (%s, logs in %s/logs)\n", cfg.Mu(), cfg.Mode, *dir)
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
	mode := fs.String("mode", "2pc", "2pc (two parties), mpc (mu parties) or he (a local server and a key server)")
	parties := fs.Int("parties", 2, "number of parties mu")
	clients := fs.Int("clients", 1, "number of client identities")
	dim := fs.Int("dim", 512, "template dimension d")
	alpha := fs.Int("alpha", 0, "enrollment weight (default floor(2d/3))")
	beta := fs.Int("beta", 63, "query weight")
	tau := fs.Float64("tau", 0.3, "cosine threshold")
	host := fs.String("host", "127.0.0.1", "address the parties listen on")
	force := fs.Bool("force", false, "replace an existing cluster config")
	metrics := fs.Bool("metrics", false, "give every party a loopback /metrics and /debug/pprof address")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "dir"); err != nil {
		return err
	}
	cfg, err := cluster.Init(*dir, cluster.Options{Mode: *mode, Parties: *parties, Clients: *clients, Dim: *dim,
		Alpha: *alpha, Beta: *beta, Tau: *tau, Host: *host, Force: *force, Metrics: *metrics})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "cluster %s: mode %s, %d parties, d = %d, alpha = %d, beta = %d, tau = %.3f\n",
		*dir, cfg.Mode, cfg.Mu(), cfg.Dim, cfg.Alpha, cfg.Beta, cfg.Tau)
	for _, p := range cfg.Servers() {
		fmt.Fprintf(stdout, "  %-8s %-22s %s\n", p.Name, p.Addr, p.Pin[:23]+"...")
	}
	fmt.Fprintf(stdout, "start it with: idface cluster up --dir %s\n", *dir)
	return nil
}

func clusterStatus(cfg *party.Config, stdout io.Writer) error {
	cl, err := party.NewClient(cfg, "", "")
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
		h, err := cl.HealthOf(ctx, p)
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
	fs := newFlags("serve", "idface serve --cluster DIR --party NAME\n\nRuns one party in the foreground until SIGINT or SIGTERM.", stderr)
	dir := fs.String("cluster", "", "cluster directory")
	name := fs.String("party", "", "party name from the cluster config")
	verbose := fs.Bool("v", false, "debug logging")
	debugAddr := fs.String("debug-addr", "", "serve /metrics and /debug/pprof on this TCP address (default: the party's metrics address in the config)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "cluster", "party"); err != nil {
		return err
	}
	cfg, err := party.LoadConfig(*dir)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("party", *name)
	// The heap is mostly pointer-free share columns, which the collector
	// need not scan: collecting at 25% growth keeps RSS near the live
	// shares for little CPU. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.Mode == "he" {
		return serveHE(ctx, cfg, *name, log)
	}
	p, err := party.Open(cfg, *name, log)
	if err != nil {
		return err
	}
	defer p.Close()
	me, ok := cfg.Member(*name)
	if !ok {
		return fmt.Errorf("no server %q in %s", *name, *dir)
	}
	if *debugAddr == "" {
		*debugAddr = me.Metrics
	}
	if *debugAddr != "" {
		srv := &http.Server{Addr: *debugAddr, Handler: p.DebugHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				log.Error("debug endpoint", "err", err)
			}
		}()
		defer srv.Close()
	}
	err = p.Serve(ctx)
	log.Info("stopped")
	return err
}

// serveHE runs the key server or a local server of an HE cluster.
func serveHE(ctx context.Context, cfg *party.Config, name string, log *slog.Logger) error {
	if cfg.KeyServer != nil && name == cfg.KeyServer.Name {
		k, err := party.OpenKeyServer(cfg, log)
		if err != nil {
			return err
		}
		return k.Serve(ctx)
	}
	l, err := party.OpenHELocal(ctx, cfg, name, log)
	if err != nil {
		return err
	}
	defer l.Close()
	return l.Serve(ctx)
}
