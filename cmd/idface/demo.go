package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/protocol"
)

func init() {
	register("demo", "run a temporary local cluster end to end and print a summary", cmdDemo)
}

func cmdDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "idface demo [--mode 2pc|mpc|he|blind] [--parties MU] [--people 500] [--samples 3] [--scheme bgv|paillier]\n\n"+
		"Starts a temporary cluster of real party processes on 127.0.0.1, enrolls\n"+
		"synthetic people (sample 0 of 80% of them), identifies the other samples\n"+
		"(genuine) and every sample of the rest (impostors), prints accuracy,\n"+
		"latency and bytes per query, and removes everything.", stderr)
	mode := fs.String("mode", "2pc", "2pc, mpc, he or blind")
	parties := fs.Int("parties", 0, "number of parties: share holders in 2pc, mpc and blind (default 2), local servers in he (default 1)")
	people := fs.Int("people", 500, "synthetic people")
	samples := fs.Int("samples", 3, "samples per person (>= 2)")
	intra := fs.Float64("intra", 0.6, "mean cosine between samples of one person")
	tau := fs.Float64("tau", 0.2, "cosine threshold")
	beta := fs.Int("beta", 63, "query weight")
	keep := fs.Bool("keep", false, "keep the cluster directory and leave the parties running")
	seed := fs.Uint64("seed", 0, "seed of the synthetic people (default: from the clock)")
	scheme := addSchemeFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *samples < 2 || *people < 5 {
		return fmt.Errorf("need at least 5 people and 2 samples each")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	m, err := config.ParseMode(*mode)
	if err != nil {
		return err
	}
	if *parties == 0 {
		*parties = defaultParties(m)
	}
	dir, err := os.MkdirTemp("", "idface-demo-")
	if err != nil {
		return err
	}
	procs := *parties
	if m == config.ModeHE || m == config.ModeBlind {
		procs++ // the key server or the decider
	}
	fmt.Fprintf(stdout, "idface demo: %s cluster of %d server processes in %s\n", *mode, procs, dir)
	cfg, err := cluster.Init(dir, cluster.Options{Mode: m, Parties: *parties, Beta: *beta, Tau: tau, Scheme: *scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := cluster.Up(ctx, cfg, exe, 60*time.Second); err != nil {
		cluster.Down(cfg)
		return err
	}
	if !*keep {
		defer func() {
			cluster.Down(cfg)
			os.RemoveAll(dir)
			fmt.Fprintln(stdout, "cluster stopped and removed")
		}()
	}
	fmt.Fprintf(stdout, "servers up: d = %d, alpha = %d, beta = %d, tau = %.2f (score threshold %d)\n", cfg.Dim(), cfg.Alpha(), cfg.Beta(), cfg.Tau(), cfg.Threshold())
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if err := runDemo(ctx, cfg, *people, *samples, *intra, *seed, stdout); err != nil {
		return err
	}
	nextSteps(stdout, m, dir, *keep)
	return nil
}

// modeBlurb says in a few words what each mode is, for nextSteps.
var modeBlurb = map[config.Mode]string{
	config.Mode2PC:   "2PCFace: two servers with XOR shares",
	config.ModeMPC:   "(mu,nu)-MPCFace: three or more servers (--parties)",
	config.ModeBlind: "blind mode: the entry learns only the answer, a decider the permuted scores",
	config.ModeHE:    "IDFace: encrypted database and a key server (--scheme paillier)",
}

func runDemo(ctx context.Context, cfg *config.Params, people, samples int, intra float64, seed uint64, stdout io.Writer) error {
	syn, err := experiments.NewSynthetic(people, samples, cfg.Dim(), intra, seed)
	if err != nil {
		return err
	}
	enrolled := people * 4 / 5
	var items []protocol.Item
	for i, x := range syn.Samples {
		if i%samples == 0 && syn.Labels[i] < enrolled {
			items = append(items, protocol.Item{ID: fmt.Sprintf("person-%04d", syn.Labels[i]), Template: x})
		}
	}
	cl, err := cluster.Client(cfg, "", "")
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now()
	batch := 1000
	if cfg.Mode() == config.ModeHE {
		batch = len(items) // one delta per group: encryption dominates
	}
	if _, err := cl.EnrollAll(ctx, len(items), func(i int) protocol.Item { return items[i] }, client.Bulk{Batch: batch}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "enrolled %d people (durable at every server) in %.2f s\n", len(items), time.Since(start).Seconds())

	var genuine, gAccept, gWrong, impostor, iAccept int
	var lat []float64
	var bytes uint64
	for i, x := range syn.Samples {
		p := syn.Labels[i]
		if i%samples == 0 && p < enrolled {
			continue
		}
		t0 := time.Now()
		r, err := cl.Identify(ctx, x, 1)
		if err != nil {
			return err
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		bytes = r.BytesTotal
		if p < enrolled {
			genuine++
			if r.Accepted {
				if r.Candidates[0].ID == fmt.Sprintf("person-%04d", p) {
					gAccept++
				} else {
					gWrong++
				}
			}
		} else {
			impostor++
			if r.Accepted {
				iAccept++
			}
		}
	}
	slices.Sort(lat)
	pct := func(a, b int) float64 { return 100 * float64(a) / float64(max(b, 1)) }
	fmt.Fprintf(stdout, "\n%-34s %10s\n", "identification", "result")
	fmt.Fprintf(stdout, "%-34s %10d\n", "genuine queries", genuine)
	fmt.Fprintf(stdout, "%-34s %9.1f%%\n", "  correctly identified", pct(gAccept, genuine))
	fmt.Fprintf(stdout, "%-34s %9.1f%%\n", "  wrongly identified", pct(gWrong, genuine))
	fmt.Fprintf(stdout, "%-34s %9.1f%%\n", "  rejected", pct(genuine-gAccept-gWrong, genuine))
	fmt.Fprintf(stdout, "%-34s %10d\n", "impostor queries", impostor)
	fmt.Fprintf(stdout, "%-34s %9.1f%%\n", "  correctly rejected", pct(impostor-iAccept, impostor))
	fmt.Fprintf(stdout, "%-34s %10.2f\n", "latency p50 (ms)", lat[len(lat)/2])
	fmt.Fprintf(stdout, "%-34s %10.2f\n", "latency p90 (ms)", lat[len(lat)*9/10])
	name, formula := experiments.IdentifyFormula(cfg, len(items))
	fmt.Fprintf(stdout, "%-34s %10d\n", "bytes per query (between servers)", bytes)
	fmt.Fprintf(stdout, "%-34s %10.0f\n", "  formula "+name, formula)
	return nil
}

// nextSteps tells a new user where to go from the demo.
func nextSteps(w io.Writer, m config.Mode, dir string, keep bool) {
	fmt.Fprintln(w, "\nnext steps:")
	if keep {
		fmt.Fprintf(w, "  idface cluster status --cluster %s  # the servers, still running\n", dir)
		fmt.Fprintf(w, "  idface identify --cluster %s --templates X.npy\n", dir)
		fmt.Fprintf(w, "  idface cluster down --cluster %s   # stop them, then remove the directory\n", dir)
	}
	for _, o := range config.Modes {
		if o != m {
			fmt.Fprintf(w, "  idface demo --mode %-6s   # %s\n", o, modeBlurb[o])
		}
	}
	fmt.Fprintln(w, `  a cluster of your own, with a threshold calibrated to a target FPIR: README "Using it"`)
	fmt.Fprintln(w, "  across organisations, each keeping its own key: docs/DEPLOY.md")
}
