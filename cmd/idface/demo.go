package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/protocol"
)

func init() {
	register("demo", "run a temporary local cluster end to end and print a summary", cmdDemo)
}

func cmdDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "idface demo [--mode "+modeNames("|")+"] [--parties MU] [--people 500] [--samples 3] [--scheme bgv|paillier]\n\n"+
		"Starts a temporary cluster of real party processes on 127.0.0.1, enrolls\n"+
		"synthetic people (sample 0 of 80% of them), identifies the other samples\n"+
		"(genuine) and every sample of the rest (impostors), prints accuracy,\n"+
		"latency and bytes per query, and removes everything.\n\n"+
		"With --json the summary is one object on stdout (mode, servers, dim, alpha,\n"+
		"beta, tau, threshold, seed, enrolled, enroll_seconds, genuine, correct,\n"+
		"wrong, rejected, impostor, impostor_accepted, p50_ms, p90_ms,\n"+
		"bytes_per_query, formula, formula_bytes) and the progress goes to stderr.", stderr)
	mode := fs.String("mode", "2pc", modeNames(", "))
	parties := fs.Int("parties", 0, "number of parties mu (share holders or local servers; default: the mode's)")
	people := fs.Int("people", 500, "synthetic people")
	samples := fs.Int("samples", 3, "samples per person (>= 2)")
	intra := fs.Float64("intra", 0.6, "mean cosine between samples of one person")
	tau := fs.Float64("tau", 0, "bare cosine threshold (default: the synthetic default of 'cluster init', FPIR 1e-3 on synthetic people)")
	beta := fs.Int("beta", 63, "query weight")
	keep := fs.Bool("keep", false, "keep the cluster directory and leave the parties running")
	seed := fs.Uint64("seed", 0, "seed of the synthetic people (default: from the clock)")
	scheme := addSchemeFlag(fs)
	hide := hideProbesFlag(fs)
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	info := stdout // progress and the human summary
	if *asJSON {
		info = stderr
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
	spec, _ := config.Spec(m) // parsed: registered
	if *parties == 0 {
		*parties = spec.DefaultParties
	}
	dir, err := os.MkdirTemp("", "idface-demo-")
	if err != nil {
		return err
	}
	procs := len(spec.Members(*parties))
	fmt.Fprintf(info, "idface demo: %s cluster of %d server processes in %s\n", *mode, procs, dir)
	lit := config.Literal{Mode: m, Beta: *beta, Tau: tau}
	if !given(fs, "tau") {
		if err := applyDefaultCalibration(&lit); err != nil {
			return err
		}
	}
	cfg, err := cluster.Init(dir, cluster.Options{Mode: m, Parties: *parties, Beta: *beta, Tau: lit.Tau, Calibration: lit.Calibration, Scheme: *scheme, HideProbes: *hide})
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
			fmt.Fprintln(info, "cluster stopped and removed")
		}()
	}
	fmt.Fprintf(info, "servers up: d = %d, alpha = %d, beta = %d, tau = %.4f (score threshold %d)\n", cfg.Dim(), cfg.Alpha(), cfg.Beta(), cfg.Tau(), cfg.Threshold())
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	r, err := runDemo(ctx, cfg, *people, *samples, *intra, *seed, info)
	if err != nil {
		return err
	}
	r.Mode, r.Servers, r.Seed = string(m), procs, *seed
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(r); err != nil {
			return err
		}
	} else {
		r.print(stdout)
	}
	nextSteps(info, m, dir, *keep, *hide)
	return nil
}

// demoResult is the demo's summary ('demo --json').
type demoResult struct {
	Mode             string  `json:"mode"`
	Servers          int     `json:"servers"`
	Dim              int     `json:"dim"`
	Alpha            int     `json:"alpha"`
	Beta             int     `json:"beta"`
	Tau              float64 `json:"tau"`
	Threshold        int     `json:"threshold"`
	Seed             uint64  `json:"seed"`
	Enrolled         int     `json:"enrolled"`
	EnrollSeconds    float64 `json:"enroll_seconds"`
	Genuine          int     `json:"genuine"`
	Correct          int     `json:"correct"`
	Wrong            int     `json:"wrong"`
	Rejected         int     `json:"rejected"`
	Impostor         int     `json:"impostor"`
	ImpostorAccepted int     `json:"impostor_accepted"`
	P50Ms            float64 `json:"p50_ms"`
	P90Ms            float64 `json:"p90_ms"`
	BytesPerQuery    uint64  `json:"bytes_per_query"`
	Formula          string  `json:"formula"`
	FormulaBytes     float64 `json:"formula_bytes"`
}

func (r demoResult) print(w io.Writer) {
	pct := func(a, b int) float64 { return 100 * float64(a) / float64(max(b, 1)) }
	fmt.Fprintf(w, "\n%-34s %10s\n", "identification", "result")
	fmt.Fprintf(w, "%-34s %10d\n", "genuine queries", r.Genuine)
	fmt.Fprintf(w, "%-34s %9.1f%%\n", "  correctly identified", pct(r.Correct, r.Genuine))
	fmt.Fprintf(w, "%-34s %9.1f%%\n", "  wrongly identified", pct(r.Wrong, r.Genuine))
	fmt.Fprintf(w, "%-34s %9.1f%%\n", "  rejected", pct(r.Rejected, r.Genuine))
	fmt.Fprintf(w, "%-34s %10d\n", "impostor queries", r.Impostor)
	fmt.Fprintf(w, "%-34s %9.1f%%\n", "  correctly rejected", pct(r.Impostor-r.ImpostorAccepted, r.Impostor))
	fmt.Fprintf(w, "%-34s %10.2f\n", "latency p50 (ms)", r.P50Ms)
	fmt.Fprintf(w, "%-34s %10.2f\n", "latency p90 (ms)", r.P90Ms)
	fmt.Fprintf(w, "%-34s %10d\n", "bytes per query (between servers)", r.BytesPerQuery)
	fmt.Fprintf(w, "%-34s %10.0f\n", "  formula "+r.Formula, r.FormulaBytes)
}

// runDemo enrolls and identifies; progress goes to info.
func runDemo(ctx context.Context, cfg *config.Params, people, samples int, intra float64, seed uint64, info io.Writer) (demoResult, error) {
	r := demoResult{Dim: cfg.Dim(), Alpha: cfg.Alpha(), Beta: cfg.Beta(), Tau: cfg.Tau(), Threshold: cfg.Threshold()}
	syn, err := experiments.NewSynthetic(people, samples, cfg.Dim(), intra, seed)
	if err != nil {
		return r, err
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
		return r, err
	}
	defer cl.Close()
	start := time.Now()
	md, err := modes.Of(cfg)
	if err != nil {
		return r, err
	}
	batch := md.Batch(cfg, len(items), 1000)
	if _, err := cl.EnrollAll(ctx, len(items), func(i int) protocol.Item { return items[i] }, client.Bulk{Batch: batch}); err != nil {
		return r, err
	}
	r.Enrolled, r.EnrollSeconds = len(items), time.Since(start).Seconds()
	fmt.Fprintf(info, "enrolled %d people (durable at every server) in %.2f s\n", len(items), r.EnrollSeconds)

	fmt.Fprintf(info, "identifying %d queries, one at a time (the enrolled people's other samples, and people never enrolled)...\n", len(syn.Samples)-len(items))
	var lat []float64
	for i, x := range syn.Samples {
		p := syn.Labels[i]
		if i%samples == 0 && p < enrolled {
			continue
		}
		t0 := time.Now()
		a, err := cl.Identify(ctx, x, 1)
		if err != nil {
			return r, err
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		r.BytesPerQuery = a.BytesTotal
		if p < enrolled {
			r.Genuine++
			if a.Accepted {
				if a.Candidates[0].ID == fmt.Sprintf("person-%04d", p) {
					r.Correct++
				} else {
					r.Wrong++
				}
			}
		} else {
			r.Impostor++
			if a.Accepted {
				r.ImpostorAccepted++
			}
		}
	}
	slices.Sort(lat)
	r.Rejected = r.Genuine - r.Correct - r.Wrong
	r.P50Ms, r.P90Ms = lat[len(lat)/2], lat[len(lat)*9/10]
	r.Formula, r.FormulaBytes = experiments.IdentifyFormula(cfg, len(items))
	return r, nil
}

// nextSteps tells a new user where to go from the demo.
func nextSteps(w io.Writer, m config.Mode, dir string, keep, hidden bool) {
	fmt.Fprintln(w, "\nnext steps:")
	if keep {
		fmt.Fprintf(w, "  idface cluster status --cluster %s  # the servers, still running\n", dir)
		fmt.Fprintf(w, "  idface identify --cluster %s --templates X.npy\n", dir)
		fmt.Fprintf(w, "  idface cluster down --cluster %s   # stop them, then remove the directory\n", dir)
	}
	for _, o := range config.Modes() {
		if s, _ := config.Spec(o); o != m {
			fmt.Fprintf(w, "  idface demo --mode %-6s   # %s\n", o, s.Summary)
		}
	}
	for _, o := range config.Modes() {
		if s, _ := config.Spec(o); !hidden && s.HideProbes {
			fmt.Fprintf(w, "  idface demo --mode %s --hide-probes   # no server sees a probe: devices seal its shares to the holders\n", o)
		}
	}
	fmt.Fprintln(w, `  a cluster of your own, with a threshold calibrated to a target FPIR: README "Using it"`)
	fmt.Fprintln(w, "  across organisations, each keeping its own key: docs/DEPLOY.md")
}
