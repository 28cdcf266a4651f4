package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/experiments/hers"
	"github.com/idface/idface/experiments/wan"
)

func init() {
	register("bench", "measure enrollment and identification time against database size", cmdBench)
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	o, err := benchFlags(args, stderr)
	if err != nil {
		return err
	}
	runs, sizes, link, err := o.plan()
	if err != nil {
		return err
	}
	// The templates of a large run are most of this process's heap (8 GB
	// at 4 x 10^6): collect at 25% growth, not 100%, so that the client
	// and the servers fit on one machine. GOGC in the environment wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	var results []*experiments.BenchResult
	for _, run := range runs {
		for _, n := range sizes {
			if n < 1 || n > 20_000_000 {
				return fmt.Errorf("--ids %d: want 1..20000000", n)
			}
			res, err := o.run(exe, run, n, link, stderr)
			if err != nil {
				return err
			}
			results = append(results, res)
			if o.asJSON {
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				benchPrint(stdout, res, link)
			}
		}
	}
	if len(runs) > 1 && !o.asJSON {
		benchTable(stdout, results)
	}
	if o.plot != "" {
		return benchPlot(o.plot, runs[0], results, stderr)
	}
	return nil
}

// benchOptions are bench's flags.
type benchOptions struct {
	mode, ids, plot, link string
	scheme, down          string
	extrapolate, parties  int
	alpha, beta, queries  int
	clients, shards       int
	batch                 batchFlags
	hide, asJSON          bool
	set                   map[string]bool // the flags given on the command line
}

func benchFlags(args []string, stderr io.Writer) (*benchOptions, error) {
	fs := newFlags("bench", "idface bench --mode plain|"+modeNames("|")+"|hers [--parties MU] --ids N[,N...] [--alpha 341] [--beta 63] [--queries 20]\n"+
		"             [--scheme bgv|paillier] [--extrapolate N] [--link rtt=20ms,rate=1gbit] [--json] [--plot out.png]\n\n"+
		"For each size: synthetic templates, a fresh local cluster of that mode (real\n"+
		"processes; in-process for plain), enrollment time and identification latency,\n"+
		"plus in the same process the float32 brute-force search and the raw QUIC\n"+
		"transfer of the same bytes. --plot draws both times against the size (the\n"+
		"paper's figure enr_and_idf); without --ids it uses 2^13..2^20.\n\n"+
		"--link runs every server in its own network namespace (needs root): any two\n"+
		"servers are rtt apart (a delay relay in a router namespace), each server's\n"+
		"link is limited to rate both ways (tc tbf), and the client sits beside the\n"+
		"entry server; the identify latency is shown next to its floor on that link.\n\n"+
		"--mode hers is the paper's HERS baseline (column-wise encrypted matrix, d\n"+
		"scalar multiplications per 4096 identities) in this process. --extrapolate\n"+
		"adds a linear extrapolation to N rows, marked as such (for sizes that do\n"+
		"not fit in memory or time here).\n\n"+
		"--mode takes a comma-separated list, and 'all' (plain, then every mode at\n"+
		"its default size, and each mode that hides probes again with them, as\n"+
		"MODE+hidden): every run reports the same fields, and a table of them all\n"+
		"ends the output (Markdown, as in docs/RESULTS.md).", stderr)
	o := &benchOptions{set: map[string]bool{}}
	fs.StringVar(&o.mode, "mode", "2pc", "plain (float32 search), "+modeNames(", ")+" or hers (the paper's baseline); a comma-separated list, MODE+hidden for a mode with --hide-probes, or all")
	scheme := addSchemeFlag(fs)
	fs.IntVar(&o.extrapolate, "extrapolate", 0, "also report the run scaled linearly to this many rows (marked extrapolated)")
	fs.IntVar(&o.parties, "parties", 0, "number of parties mu (share holders or local servers; default: the mode's, 1 for plain and hers)")
	fs.StringVar(&o.ids, "ids", "", "database sizes, comma-separated")
	fs.IntVar(&o.alpha, "alpha", 341, "enrollment weight")
	fs.IntVar(&o.beta, "beta", 63, "query weight")
	fs.IntVar(&o.queries, "queries", 20, "identifications per size")
	fs.IntVar(&o.clients, "clients", 1, "also run this many clients identifying at once (--queries each) and report identifications per second beside the float32 search's single-query rate")
	o.batch = addBatchFlags(fs)
	fs.IntVar(&o.shards, "shards", 0, "run every server as a coordinator and this many shard servers (rows split by id)")
	fs.StringVar(&o.down, "down", "", "a mode that answers with a server down (replicated): kill this server (as p3) after the healthy loops and measure again without it: the first query after the kill, the single-query p50 and, with --clients, the rate")
	fs.BoolVar(&o.hide, "hide-probes", false, "mode "+modesThat(hidesProbes)+": a hidden-probe cluster (devices seal the query's shares; docs/HIDDEN-PROBES.md); without --beta its default transforms, a dense 4-bit query and the 4-level gallery at k = 16")
	fs.BoolVar(&o.asJSON, "json", false, "one JSON object per size")
	fs.StringVar(&o.plot, "plot", "", "write a plot (PNG) of the times")
	fs.StringVar(&o.link, "link", "", "run the servers across a WAN: rtt=DURATION,rate=RATE (as rtt=20ms,rate=1gbit; rates 100mbit, 1gbit, 10gbit)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	o.scheme = *scheme
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

// plan checks the flags and returns the runs (each mode with its size and
// weights), the database sizes and the WAN link (nil: none).
func (o *benchOptions) plan() ([]benchRun, []int, *wan.Link, error) {
	var link *wan.Link
	if o.link != "" {
		l, err := wan.ParseLink(o.link)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--link: %w", err)
		}
		if err := wan.Check(l); err != nil {
			return nil, nil, nil, err
		}
		link = &l
	}
	sizes, err := o.sizes()
	if err != nil {
		return nil, nil, nil, err
	}
	runs, err := benchRuns(o.mode, o.hide)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(runs) > 1 && o.plot != "" {
		return nil, nil, nil, fmt.Errorf("--plot draws one mode: give one --mode")
	}
	if len(runs) > 1 && o.parties != 0 {
		return nil, nil, nil, fmt.Errorf("--parties is for one mode: each mode of a list runs at its default size")
	}
	for i := range runs {
		if err := runs[i].check(o, link); err != nil {
			return nil, nil, nil, err
		}
	}
	return runs, sizes, link, nil
}

// sizes reads --ids; without it, --plot's sizes 2^13..2^20.
func (o *benchOptions) sizes() ([]int, error) {
	if o.ids != "" {
		return intList(o.ids)
	}
	if o.plot == "" {
		return nil, fmt.Errorf("give --ids (or --plot for the paper's sizes 2^13..2^20)")
	}
	sizes := []int{}
	for k := 13; k <= 20; k++ {
		sizes = append(sizes, 1<<k)
	}
	return sizes, nil
}

// run measures one mode at one size, with a progress bar on stderr.
func (o *benchOptions) run(exe string, run benchRun, n int, link *wan.Link, stderr io.Writer) (*experiments.BenchResult, error) {
	bar := progressbar.NewOptions(n, progressbar.OptionSetWriter(stderr), progressbar.OptionShowCount(),
		progressbar.OptionSetDescription(fmt.Sprintf("%s %s: enrolling", run.mode, experiments.SizeLabel(n))),
		progressbar.OptionThrottle(200*time.Millisecond))
	bo := experiments.BenchOptions{Exe: exe, Mode: run.mode, Parties: run.parties, Alpha: run.alpha, Beta: run.beta,
		IDs: n, Queries: o.queries, Seed: 1, Scheme: o.scheme, HideProbes: run.hide, Clients: o.clients, Shards: o.shards, Down: o.down, BatchMax: *o.batch.max, BatchWait: *o.batch.wait, Progress: func(done, _ int) { bar.Set(done) }}
	var res *experiments.BenchResult
	var err error
	switch {
	case run.mode == "plain":
		res, err = experiments.RunPlainBench(bo)
	case run.mode == "hers":
		res, err = hers.Run(bo)
	case link != nil:
		res, err = wan.Run(context.Background(), bo, *link)
	default:
		res, err = experiments.RunClusterBench(context.Background(), bo)
	}
	bar.Finish()
	fmt.Fprintln(stderr)
	if err != nil {
		return nil, err
	}
	res.Complete()
	if o.extrapolate > 0 {
		experiments.Extrapolate(res, o.extrapolate)
	}
	return res, nil
}

// benchPrint writes one run's result as text.
func benchPrint(stdout io.Writer, res *experiments.BenchResult, link *wan.Link) {
	fmt.Fprintf(stdout, "%s mu=%d ids=%d alpha=%d beta=%d: enroll %.2f s, identify p50 %.2f ms (p90 %.2f), float32 %.2f ms, wire floor %.2f ms, %.0f bytes/identify, %.0f MB RSS/party\n",
		benchLabel(res), res.Parties, res.IDs, res.Alpha, res.Beta, res.EnrollS, res.IdentifyP50, res.IdentifyP90, res.PlainFloatP50, res.WireFloorMs, res.BytesPerIdent, res.RSSMBPerParty)
	if res.Scheme != "" {
		fmt.Fprintf(stdout, "  scheme %s, %d rows per column group, storage %.1f MB\n", res.Scheme, res.GroupRows, res.ShareMB)
	}
	if k := res.Kernels; k != nil {
		fmt.Fprintf(stdout, "  kernels' critical path %.2f ms (score %.2f, permute and mask %.2f, a vector over QUIC %.2f, decide %.2f, unpermute %.2f): identify p50 is %.2fx it\n",
			k.TotalMs, k.ScoreMs, k.PermuteMs, k.WireMs, k.DecideMs, k.UnpermuteMs, res.IdentifyP50/k.TotalMs)
		fmt.Fprintf(stdout, "  with each holder's kernels on its share of this machine's cores (%d of %d, as the %d holders score at once; a lower bound) %.2f ms (score %.2f, permute and mask %.2f): identify p50 is %.2fx it\n",
			k.HolderCores, runtime.GOMAXPROCS(0), res.Parties, k.SharedTotalMs, k.ScoreSharedMs, k.PermuteSharedMs, res.IdentifyP50/k.SharedTotalMs)
	}
	if w := res.Where; w != nil {
		benchPrintWhere(stdout, w)
	}
	if res.Clients > 1 {
		fmt.Fprintf(stdout, "  %d clients at once: %.1f identifications/s; float32 one query at a time: %.1f/s (%.2fx)\n",
			res.Clients, res.IdentifyPerS, res.PlainFloatPerS, res.IdentifyPerS/res.PlainFloatPerS)
		if l := res.Loaded; l != nil {
			benchPrintLoaded(stdout, l)
		}
	}
	if res.Down != "" {
		fmt.Fprintf(stdout, "  %s down: first query after the kill %.0f ms; identify p50 %.2f ms (%.2fx healthy; %d of %d degraded)",
			res.Down, res.DownFirstMS, res.DownP50MS, res.DownP50MS/res.IdentifyP50, res.DownDegraded, res.DownQueries)
		if res.Clients > 1 {
			fmt.Fprintf(stdout, "; %d clients: %.1f identifications/s (%.2fx healthy)", res.Clients, res.DownIdentifyPerS, res.DownIdentifyPerS/res.IdentifyPerS)
		}
		fmt.Fprintln(stdout)
	}
	if x := res.Extrapolated; x != nil {
		fmt.Fprintf(stdout, "  EXTRAPOLATED to %d rows (x%.1f, not measured): enroll %.0f s, identify %.0f ms, storage %.0f MB, %.0f bytes/identify\n",
			x.IDs, x.Factor, x.EnrollS, x.IdentifyP50, x.ShareMB, x.BytesPerIdent)
	}
	if link != nil {
		fmt.Fprintf(stdout, "  link %s: identify p50 %.2f ms, min %.2f ms; floor %.2f ms (%.1f RTT + %.0f bytes at the rate); relay drops %d\n",
			res.Link, res.IdentifyP50, res.IdentifyMin, res.WANFloorMs, res.FloorRTTs, res.FloorBytes, res.RelayDrops)
	}
}

// benchPrintWhere writes where the single client's identifies went
// (experiments.Where): the parts the servers counted, each left out
// where a counter was missing.
func benchPrintWhere(stdout io.Writer, w *experiments.Where) {
	ms := func(label string, v *float64) string {
		if v == nil {
			return ""
		}
		return fmt.Sprintf("%s %.2f", label, *v)
	}
	join := func(parts ...string) string {
		var out []string
		for _, p := range parts {
			if p != "" {
				out = append(out, p)
			}
		}
		return strings.Join(out, ", ")
	}
	fmt.Fprintf(stdout, "  where an identify went (means over the %d identifies above, from the servers' /metrics; not medians): client %.2f ms = %s\n",
		w.Identifies, w.ClientMs, join(ms("client side and the round trip to the entry", w.ClientSideMs), ms("entry "+w.Entry, w.EntryMs)))
	if line := join(ms("score", w.EntryScoreMs), ms("permute and mask", w.EntryPermuteMs), ms("waiting for the decider", w.DeciderWaitMs), ms("its own overhead", w.EntryOtherMs)); line != "" {
		fmt.Fprintf(stdout, "    at the entry: %s\n", line)
	}
	if line := join(ms("score", w.HelperScoreMs), ms("permute and mask", w.HelperPermuteMs), ms("from the query to their vector sent", w.HelperQueryMs)); line != "" {
		fmt.Fprintf(stdout, "    at the helpers (mean): %s\n", line)
	}
	if line := join(ms("the helpers' kernels beyond the entry's", w.HelpersBeyondEntryMs), ms("the rest (the query to the helpers, the vectors over the wire, the decider, the answer back, scheduling)", w.DeciderWaitRestMs)); line != "" {
		fmt.Fprintf(stdout, "    in the decider wait: %s\n", line)
	}
	if w.QueriesPerPass != nil {
		fmt.Fprintf(stdout, "    queries per pass over the entry's shares %.2f\n", *w.QueriesPerPass)
	}
	if line := join(ms("client", w.ClientCPUMs), ms("entry", w.EntryCPUMs), ms("helper (mean)", w.HelperCPUMs), ms("decider", w.DeciderCPUMs)); line != "" {
		fmt.Fprintf(stdout, "    on a core, all threads: %s\n", line)
	}
	if line := join(ms("client", w.ClientRunQueueMs), ms("entry", w.EntryRunQueueMs), ms("helper (mean)", w.HelperRunQueueMs), ms("decider", w.DeciderRunQueueMs)); line != "" {
		fmt.Fprintf(stdout, "    ready but waiting for a core, summed over threads: %s\n", line)
	}
}

// benchPlot draws enrollment and identification time against the size
// (the paper's figure enr_and_idf) for one mode's results.
func benchPlot(path string, run benchRun, results []*experiments.BenchResult, stderr io.Writer) error {
	var x, enr, idf, flt []float64
	for _, r := range results {
		x = append(x, float64(r.IDs))
		enr = append(enr, r.EnrollS)
		idf = append(idf, r.IdentifyP50/1000)
		flt = append(flt, r.PlainFloatP50/1000)
	}
	title := fmt.Sprintf("idface %s (alpha=%d, beta=%d): time against database size", run.mode, run.alpha, run.beta)
	if err := experiments.PlotLines(path, title, "enrolled identities", "seconds", true, true,
		experiments.Series{Label: "enrollment (all)", X: x, Y: enr},
		experiments.Series{Label: "identification p50", X: x, Y: idf},
		experiments.Series{Label: "float32 search (no protection)", X: x, Y: flt}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "plot written to %s\n", path)
	return nil
}

// benchRun is one mode of a bench command, with its own size and weights.
type benchRun struct {
	mode        string
	hide        bool
	parties     int
	alpha, beta int
	spec        *config.ModeSpec // nil for plain and hers
}

// benchRuns reads --mode: one mode, a comma-separated list (MODE+hidden:
// with --hide-probes), or all.
func benchRuns(list string, hide bool) ([]benchRun, error) {
	var names []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m == "all" {
			names = append(names, "plain")
			for _, mode := range config.Modes() {
				names = append(names, string(mode))
				if s, _ := config.Spec(mode); hidesProbes(s) {
					names = append(names, string(mode)+"+hidden")
				}
			}
			continue
		}
		names = append(names, m)
	}
	var runs []benchRun
	for _, name := range names {
		r := benchRun{mode: name, hide: hide}
		if m, ok := strings.CutSuffix(name, "+hidden"); ok {
			r.mode, r.hide = m, true
		}
		switch r.mode {
		case "plain", "hers": // in this process
		default:
			spec, err := config.Spec(config.Mode(r.mode))
			if err != nil {
				return nil, fmt.Errorf("--mode %q: want plain, %s or hers (or a list of them, or all)", name, modeNames(", "))
			}
			r.spec = spec
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// check validates the flags against what the run's mode can do, and sets
// its size and weights.
func (r *benchRun) check(o *benchOptions, link *wan.Link) error {
	r.parties, r.alpha, r.beta = o.parties, o.alpha, o.beta
	spec := r.spec
	switch {
	case spec == nil: // plain and hers, in this process
		if r.parties == 0 {
			r.parties = 1
		}
	case r.parties == 0: // a registered mode: a cluster of its default size unless told
		r.parties = spec.DefaultParties
	}
	if link != nil && r.mode == "plain" {
		return fmt.Errorf("--link: mode plain has no servers to put across a WAN")
	}
	if link != nil && r.mode == "hers" {
		return fmt.Errorf("--link: mode hers runs in this process")
	}
	if o.clients < 1 || o.clients > 256 {
		return fmt.Errorf("--clients %d: want 1..256", o.clients)
	}
	if o.down != "" && (spec == nil || !spec.Outage || link != nil || o.shards > 1) {
		return fmt.Errorf("--down is for a local, unsharded cluster of a mode that answers with a server down (%s)", modesThat(func(s *config.ModeSpec) bool { return s.Outage }))
	}
	if o.clients > 1 && (spec == nil || link != nil) {
		return fmt.Errorf("--clients is for a cluster on this machine (not plain, hers or --link)")
	}
	if o.shards > 1 && (spec == nil || !spec.Shards || link != nil) {
		return fmt.Errorf("--shards is for a cluster on this machine (not plain, hers or --link)")
	}
	if r.hide && (spec == nil || !spec.HideProbes) {
		return fmt.Errorf("--hide-probes is for --mode %s", modesThat(hidesProbes))
	}
	if r.hide && !o.set["beta"] { // the cluster's hidden-probe defaults (a dense 4-bit query)
		r.beta = 0
		if !o.set["alpha"] {
			r.alpha = 0
		}
	}
	if o.scheme != "" && (spec == nil || len(spec.Schemes) == 0) {
		return fmt.Errorf("--scheme is for --mode %s", modesThat(takesScheme))
	}
	return nil
}

// benchLabel names a run's mode and what sets it apart.
func benchLabel(r *experiments.BenchResult) string {
	mode := r.Mode
	if r.HideProbes {
		mode += " (hidden probes)"
	}
	if r.Scheme != "" {
		mode += " " + r.Scheme
	}
	return mode
}

// benchTable prints every run's uniform fields as one Markdown table.
func benchTable(w io.Writer, results []*experiments.BenchResult) {
	fmt.Fprintln(w, "\n| mode | parties | rows | enroll s | identify p50 ms | p90 ms | x float32 | identifies/s | x float32 rate | bytes/row | RSS MB/party | kernel path ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		kp := "-"
		if r.Kernels != nil {
			kp = fmt.Sprintf("%.2f", r.Kernels.TotalMs)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.0f | %s |\n",
			benchLabel(r), r.Parties, r.IDs, r.EnrollS, r.IdentifyP50, r.IdentifyP90, r.IdentifyP50/r.PlainFloatP50,
			r.IdentifyPerS, r.IdentifyPerS/r.PlainFloatPerS, r.BytesPerRow, r.RSSMBPerParty, kp)
	}
}

// modesThat names the registered modes that have a capability, for a
// flag's help or refusal: "replicated", "blind or replicated".
func modesThat(has func(*config.ModeSpec) bool) string {
	var out []string
	for _, m := range config.Modes() {
		if s, _ := config.Spec(m); has(s) {
			out = append(out, string(m))
		}
	}
	return strings.Join(out, " or ")
}

// The capabilities that flags name modes by.
func hidesProbes(s *config.ModeSpec) bool { return s.HideProbes }
func takesScheme(s *config.ModeSpec) bool { return len(s.Schemes) > 0 }
func takesLevels(s *config.ModeSpec) bool { return s.Levels }

// benchPrintLoaded prints what the clients' run cost the servers.
func benchPrintLoaded(stdout io.Writer, l *experiments.Loaded) {
	var parts []string
	if l.QueriesPerPass != nil {
		parts = append(parts, fmt.Sprintf("queries per pass over the shares %.2f", *l.QueriesPerPass))
	}
	if l.HolderScoreMs != nil && l.HolderPermuteMs != nil {
		parts = append(parts, fmt.Sprintf("a holder's score %.2f and permute %.2f ms per identify", *l.HolderScoreMs, *l.HolderPermuteMs))
	}
	var cpu []string
	for _, c := range []struct {
		name string
		v    *float64
	}{{"holder (mean)", l.HolderCPUMs}, {"decider", l.DeciderCPUMs}, {"all servers", l.ServerCPUMs}} {
		if c.v != nil {
			cpu = append(cpu, fmt.Sprintf("%s %.2f", c.name, *c.v))
		}
	}
	if len(cpu) > 0 {
		parts = append(parts, "on a core per identify (ms): "+strings.Join(cpu, ", "))
	}
	if len(parts) > 0 {
		fmt.Fprintf(stdout, "    under the clients (%d identifies): %s\n", l.Identifies, strings.Join(parts, "; "))
	}
}
