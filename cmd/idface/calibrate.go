package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/host/input"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/template"
)

func init() {
	register("calibrate", "choose the threshold for a target false-positive identification rate on labelled templates", cmdCalibrate)
}

// calibrationFile is what 'idface calibrate' writes and 'cluster init
// --calibration' reads.
type calibrationFile struct {
	Version int         `json:"version"` // 1
	Mode    config.Mode `json:"mode"`
	Alpha   int         `json:"alpha"`
	Beta    int         `json:"beta"`
	// Tau is the cosine threshold the cluster stores; it gives exactly
	// the score threshold Calibration.Threshold.
	Tau float64 `json:"tau"`
	config.Calibration
	Rank1       float64                        `json:"rank1"`
	Templates   string                         `json:"templates"`
	Curve       []experiments.CalibrationPoint `json:"curve"`
	Suggestions []suggestion                   `json:"suggestions,omitempty"`
}

// suggestion is another transform measured at the same target FPIR.
type suggestion struct {
	GalleryLevels string  `json:"gallery_levels"`
	QueryLevels   string  `json:"query_levels"`
	Threshold     int     `json:"threshold"`
	FPIR          float64 `json:"fpir"`
	TPIR          float64 `json:"tpir"`
}

func cmdCalibrate(args []string, stdout, stderr io.Writer) error {
	o, err := calibrateFlags(args, stderr)
	if err != nil {
		return err
	}
	xs, ls, err := readLabelled(o.tmpls, o.labels)
	if err != nil {
		return err
	}
	f, c, lp, err := o.calibrate(xs, ls, stderr)
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := store.WriteFile(o.out, append(js, '\n'), 0o644); err != nil {
		return err
	}
	o.report(stdout, f, c, lp, xs, ls)
	wrote, err := o.plots(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s; use it with: idface cluster init --cluster DIR --mode %s --calibration %s\n", wrote, o.mode, o.out)
	fmt.Fprintf(stdout, "  or on a cluster made before: idface cluster recalibrate --cluster DIR --calibration %s (a deployment: idface cluster assemble --out cluster.json --calibration %s with its members' descriptors, then restart its servers)\n", o.out, o.out)
	fmt.Fprintf(stdout, "the threshold holds its FPIR up to %d ids enrolled; identify, cluster status and the gateway's health warn an operator when more are\n", f.Calibration.PlannedRows())
	return nil
}

// calibrateOptions are calibrate's flags, checked.
type calibrateOptions struct {
	tmpls, labels, out, plot string
	target                   float64
	mode                     config.Mode
	alpha, beta, rows        int
	levels                   levelFlags
	every                    time.Duration
	stats                    urlsFlag
}

func calibrateFlags(args []string, stderr io.Writer) (*calibrateOptions, error) {
	fs := newFlags("calibrate", "idface calibrate --templates X --labels L.txt --target-fpir 1e-3 --out calibration.json [--rows N]\n"+
		"                 [--mode "+modeNames("|")+"] [--alpha A] [--beta B] [--gallery-levels L:a1,... --query-levels L:a1,...] [--plot FILE]\n\n"+
		"Chooses the cluster's threshold for a target false-positive identification\n"+
		"rate (FPIR) on your own labelled templates, scored exactly as the cluster\n"+
		"will score them (T_alpha x T_beta, or blind mode's levels). The templates\n"+
		"are split open-set: the first template of the first half of the people\n"+
		"(in order of first appearance) is enrolled; their other templates are\n"+
		"mated searches, every template of the other half a non-mated search. The\n"+
		"threshold is the least integer score at which at most the target share of\n"+
		"non-mated searches returns an id; the TPIR is the share of mated searches\n"+
		"that return the right id. Other transforms are measured at the same FPIR\n"+
		"as suggestions. Writes the calibration (JSON) and a plot of TPIR against\n"+
		"FPIR; give the JSON to 'idface cluster init --calibration'.\n\n"+
		"FPIR grows with the number of ids enrolled: calibrate with at least as\n"+
		"many people as you will enroll (so twice as many labelled people), or\n"+
		"give --rows N, the ids the cluster will hold: FPIR growing about linearly\n"+
		"with them, the threshold is then the least whose FPIR measured on the\n"+
		"split, times N over the ids the split enrolled, is at most the target.\n"+
		"The file records N; identify, cluster status and the gateway's health\n"+
		"warn an operator once more ids are enrolled than the threshold was\n"+
		"calibrated for. Measure with at least 1/target non-mated searches\n"+
		"(better 10/target; with --rows, target times the split's ids over N).\n\n"+
		input.Formats+"\nLabels: one per line, the same label for every template of one person.", stderr)
	o := &calibrateOptions{}
	fs.StringVar(&o.tmpls, "templates", "", "labelled templates: .npy, CSV or JSON lines")
	fs.StringVar(&o.labels, "labels", "", "one label (person) per template, one per line")
	fs.Float64Var(&o.target, "target-fpir", 0, "target false-positive identification rate, e.g. 1e-3")
	fs.StringVar(&o.out, "out", "", "calibration file to write (JSON)")
	fs.StringVar(&o.plot, "plot", "", "plot of TPIR against FPIR (.png, .svg or .pdf; default: --out with .png; \"none\" for no plot)")
	mode := fs.String("mode", "2pc", "the mode the cluster will run: "+modeNames(", "))
	fs.IntVar(&o.alpha, "alpha", 0, "enrollment weight (default floor(2d/3))")
	fs.IntVar(&o.beta, "beta", 0, fmt.Sprintf("query weight (default min(%d, alpha))", config.DefaultBeta))
	o.levels = addLevelFlags(fs)
	fs.IntVar(&o.rows, "rows", 0, "the number of ids the cluster will hold (default: the ids the split enrolls, half the labelled people)")
	fs.DurationVar(&o.every, "progress", 10*time.Second, "report progress on stderr this often (0: never): each transform scores every probe against the gallery")
	fs.Var(&o.stats, "stats", "a cluster's score statistics (the output of idface stats --json; repeatable, e.g. one a week): also plot them against the best scores of this calibration's searches, to show drift (PLOT-drift.png)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := required(fs, "templates", "labels", "target-fpir", "out"); err != nil {
		return nil, err
	}
	if !(o.target > 0 && o.target < 1) {
		return nil, fmt.Errorf("--target-fpir %v: want a rate between 0 and 1, such as 1e-3", o.target)
	}
	if o.rows < 0 {
		return nil, fmt.Errorf("--rows %d: want the number of ids the cluster will hold, such as 5000", o.rows)
	}
	m, err := config.ParseMode(*mode)
	if err != nil {
		return nil, err
	}
	if s, _ := config.Spec(m); !s.Levels && (*o.levels.gallery != "" || *o.levels.query != "") {
		return nil, fmt.Errorf("--gallery-levels and --query-levels: mode %s takes no levels (%s do)", m, levelModes())
	}
	o.mode = m
	return o, nil
}

// calibrate measures the transform the flags choose on the labelled
// templates xs (ls their people), and the others at the same target
// FPIR as suggestions: the calibration file, the chosen transform's
// calibration and the transform.
func (o *calibrateOptions) calibrate(xs [][]float32, ls []int, stderr io.Writer) (*calibrationFile, *experiments.Calibration, experiments.LevelPair, error) {
	d := len(xs[0])
	lp, a, b, err := calibrationTransform(o.mode, d, o.alpha, o.beta, *o.levels.gallery, *o.levels.query)
	if err != nil {
		return nil, nil, lp, err
	}
	alts := alternatives(o.mode, d, a, b, lp)
	prog := startStages(stderr, "calibrate: transform", 1+len(alts), o.every)
	defer prog.done()
	prog.next(fmt.Sprintf("gallery %s, query %s", lp.Gallery, lp.Query))
	c, err := experiments.CalibrateFor(xs, ls, lp, o.target, o.rows)
	if err != nil {
		return nil, nil, lp, err
	}
	if c.SplitTarget() >= 1 {
		return nil, nil, lp, fmt.Errorf("--rows %d is too few for the split's %d enrolled ids at FPIR %g (their FPIR would have to reach 1): give --rows above %.0f, or leave it out", c.Rows, c.GalleryIDs, o.target, o.target*float64(c.GalleryIDs))
	}
	tau, err := c.Tau()
	if err != nil {
		return nil, nil, lp, err
	}
	f := &calibrationFile{Version: 1, Mode: o.mode, Alpha: a, Beta: b, Tau: tau, Rank1: c.Rank1, Templates: o.tmpls, Curve: c.Curve,
		Calibration: config.Calibration{TargetFPIR: o.target, FPIR: c.FPIR, TPIR: c.TPIR, Threshold: c.Threshold, Dim: d,
			GalleryLevels: lp.Gallery.String(), QueryLevels: lp.Query.String(), GalleryIDs: c.GalleryIDs, Mated: c.Mated, NonMated: c.NonMated}}
	if o.rows > 0 {
		f.Calibration.Rows = o.rows
	}
	for _, alt := range alts {
		prog.next(fmt.Sprintf("gallery %s, query %s", alt.Gallery, alt.Query))
		ac, err := experiments.CalibrateFor(xs, ls, alt, o.target, o.rows)
		if err != nil {
			return nil, nil, lp, err
		}
		f.Suggestions = append(f.Suggestions, suggestion{GalleryLevels: alt.Gallery.String(), QueryLevels: alt.Query.String(),
			Threshold: ac.Threshold, FPIR: ac.FPIR, TPIR: ac.TPIR})
	}
	return f, c, lp, nil
}

// report prints what the calibration measured and chose.
func (o *calibrateOptions) report(stdout io.Writer, f *calibrationFile, c *experiments.Calibration, lp experiments.LevelPair, xs [][]float32, ls []int) {
	people := map[int]bool{}
	for _, l := range ls {
		people[l] = true
	}
	fmt.Fprintf(stdout, "%s: %d templates of %d people, d = %d; %d enrolled, %d mated and %d non-mated searches\n",
		o.tmpls, len(xs), len(people), f.Dim, c.GalleryIDs, c.Mated, c.NonMated)
	fmt.Fprintf(stdout, "mode %s, gallery %s, query %s (alpha = %d, beta = %d)\n", o.mode, lp.Gallery, lp.Query, f.Alpha, f.Beta)
	if o.rows > 0 {
		fmt.Fprintf(stdout, "target FPIR %g with %d ids enrolled: threshold score >= %d (tau = %.4f)\n", o.target, o.rows, c.Threshold, f.Tau)
		fmt.Fprintf(stdout, "  FPIR %.4g with the split's %d enrolled: %d of %d non-mated searches return an id; about %.2g with %d (FPIR grows about linearly with the ids enrolled)\n",
			c.FPIR, c.GalleryIDs, int(c.FPIR*float64(c.NonMated)+0.5), c.NonMated, c.FPIR*float64(o.rows)/float64(c.GalleryIDs), o.rows)
	} else {
		fmt.Fprintf(stdout, "target FPIR %g: threshold score >= %d (tau = %.4f)\n", o.target, c.Threshold, f.Tau)
		fmt.Fprintf(stdout, "  FPIR %.4g: %d of %d non-mated searches return an id\n", c.FPIR, int(c.FPIR*float64(c.NonMated)+0.5), c.NonMated)
	}
	fmt.Fprintf(stdout, "  TPIR %.2f%%: %d of %d mated searches return the right id (rank-1 %.2f%% at any threshold)\n",
		100*c.TPIR, int(c.TPIR*float64(c.Mated)+0.5), c.Mated, 100*c.Rank1)
	if split := c.SplitTarget(); float64(c.NonMated)*split < 1 {
		what := fmt.Sprintf("%g", split)
		if o.rows > 0 {
			what += fmt.Sprintf(" (the target for %d ids, with the split's %d)", o.rows, c.GalleryIDs)
		}
		fmt.Fprintf(stdout, "warning: %d non-mated searches cannot measure an FPIR of %s: the threshold lies just above all of them; calibrate with at least %.0f of them (better %.0f)\n",
			c.NonMated, what, 1/split, 10/split)
	}
	if len(f.Suggestions) > 0 {
		fmt.Fprintf(stdout, "other transforms at FPIR %g:\n", o.target)
		for _, s := range f.Suggestions {
			fmt.Fprintf(stdout, "  gallery %-16s query %-8s TPIR %6.2f%% (score >= %d)\n", s.GalleryLevels, s.QueryLevels, 100*s.TPIR, s.Threshold)
		}
	}
}

// plots draws the calibration's plot (unless --plot none) and, with
// --stats, the drift plot beside it, and says what was written: the
// calibration file and the plots.
func (o *calibrateOptions) plots(c *experiments.Calibration) (wrote string, err error) {
	plot := o.plot
	if plot == "" {
		plot = strings.TrimSuffix(o.out, ".json") + ".png"
	}
	wrote = o.out
	if plot == "none" {
		return wrote, nil
	}
	if err := plotCalibration(plot, c); err != nil {
		return "", err
	}
	wrote += " and " + plot
	if len(o.stats) > 0 {
		ext := filepath.Ext(plot)
		drift := strings.TrimSuffix(plot, ext) + "-drift" + ext
		if err := plotDrift(drift, c, o.stats); err != nil {
			return "", err
		}
		wrote += " and " + drift
	}
	return wrote, nil
}

// calibrationTransform is the transform a cluster of mode m would use
// with these flags (config.Weights' defaults), and its alpha and beta.
func calibrationTransform(m config.Mode, d, alpha, beta int, gl, ql string) (experiments.LevelPair, int, int, error) {
	var lp experiments.LevelPair
	for _, f := range []struct {
		spec   string
		lv     *template.Levels
		weight *int
	}{{gl, &lp.Gallery, &alpha}, {ql, &lp.Query, &beta}} {
		if f.spec == "" {
			continue
		}
		lv, err := template.ParseLevels(f.spec)
		if err != nil {
			return lp, 0, 0, err
		}
		*f.lv, *f.weight = lv, lv.Support()
	}
	d, a, b, err := config.Weights(d, alpha, beta)
	if err != nil {
		return lp, 0, 0, err
	}
	if lp.Gallery.L() == 0 {
		lp.Gallery = template.TernaryLevels(a)
	}
	if lp.Query.L() == 0 {
		lp.Query = template.TernaryLevels(b)
	}
	for _, lv := range []template.Levels{lp.Gallery, lp.Query} {
		if err := lv.Validate(d); err != nil {
			return lp, 0, 0, err
		}
	}
	return lp, a, b, nil
}

// alternatives are the transforms suggested besides lp: other query
// weights (63, 127, alpha: larger ones cost more per query), and in
// blind mode a four-level gallery (docs/BLIND-NOTES.md).
func alternatives(m config.Mode, d, a, b int, lp experiments.LevelPair) []experiments.LevelPair {
	var out []experiments.LevelPair
	seen := map[string]bool{lp.Gallery.String() + " " + lp.Query.String(): true}
	add := func(g, q template.Levels) {
		k := g.String() + " " + q.String()
		if seen[k] || g.Validate(d) != nil || q.Validate(d) != nil {
			return
		}
		seen[k] = true
		out = append(out, experiments.LevelPair{Gallery: g, Query: q})
	}
	for _, beta := range []int{63, 127, a} {
		if beta <= a {
			add(lp.Gallery, template.TernaryLevels(beta))
		}
	}
	if s, _ := config.Spec(m); s.Levels && a >= 8 {
		add(experiments.ThreeFoldLevels(a, 4), lp.Query)
		add(template.TernaryLevels(a), lp.Query)
	}
	return out
}

func plotCalibration(path string, c *experiments.Calibration) error {
	var curve, chosen experiments.Series
	curve.Label = fmt.Sprintf("gallery %s, query %s", c.Pair.Gallery, c.Pair.Query)
	for _, pt := range c.Curve {
		if pt.FPIR > 0 { // a log axis has no 0
			curve.X, curve.Y = append(curve.X, pt.FPIR), append(curve.Y, pt.TPIR)
		}
	}
	fpir := max(c.FPIR, 0.5/float64(c.NonMated)) // 0 measured: drawn at half a search
	chosen = experiments.Series{Label: fmt.Sprintf("threshold %d: FPIR %.2g, TPIR %.3f", c.Threshold, c.FPIR, c.TPIR), X: []float64{fpir}, Y: []float64{c.TPIR}}
	series := []experiments.Series{chosen}
	if len(curve.X) > 0 {
		series = []experiments.Series{curve, chosen}
	}
	return experiments.PlotLines(path, fmt.Sprintf("open-set identification, %d enrolled", c.GalleryIDs), "FPIR", "TPIR", true, false, series...)
}

// plotDrift draws, per bucket of a cluster's score statistics, the share
// of queries of each window read from the files (idface stats --json)
// beside the share of this calibration's mated and non-mated searches in
// the same buckets: rejected traffic whose mass moves towards the
// threshold means an FPIR above the calibrated one, accepted traffic
// that slides down a camera or an extractor that drifts.
func plotDrift(path string, c *experiments.Calibration, files []string) error {
	var windows []windowStats
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var ws []windowStats
		if err := json.Unmarshal(b, &ws); err != nil {
			return fmt.Errorf("--stats %s: %w (give the output of idface stats --json)", f, err)
		}
		for _, w := range ws {
			if w.Queries > 0 && len(w.Buckets) > 0 {
				w.Server = fmt.Sprintf("%s: %s", f, w.Server)
				windows = append(windows, w)
			}
		}
	}
	if len(windows) == 0 {
		return fmt.Errorf("--stats: no complete window in %s: wait until idface stats shows one", strings.Join(files, ", "))
	}
	edges, err := windowEdges(windows[0])
	if err != nil {
		return err
	}
	share := func(label string, scores []int) experiments.Series {
		sr := experiments.Series{Label: label}
		counts := make([]float64, len(edges)+1)
		for _, sc := range scores {
			b := 0
			for b < len(edges) && sc >= edges[b] {
				b++
			}
			counts[b]++
		}
		for b, n := range counts {
			sr.X, sr.Y = append(sr.X, float64(b)), append(sr.Y, n/float64(max(len(scores), 1)))
		}
		return sr
	}
	series := []experiments.Series{
		share(fmt.Sprintf("calibration: %d searches of enrolled people", c.Mated), c.BestMated),
		share(fmt.Sprintf("calibration: %d searches of strangers", c.NonMated), c.BestNonMated),
	}
	for _, w := range windows {
		if e, err := windowEdges(w); err != nil || !slices.Equal(e, edges) {
			return fmt.Errorf("--stats: the windows have other buckets (%s): give files of one cluster and threshold", w.Server)
		}
		sr := experiments.Series{Label: fmt.Sprintf("%s, window %d (%d queries)", w.Server, w.Windows, w.Queries)}
		for b, bk := range w.Buckets {
			sr.X, sr.Y = append(sr.X, float64(b)), append(sr.Y, float64(bk.Count)/float64(w.Queries))
		}
		series = append(series, sr)
	}
	title := fmt.Sprintf("best score per query, buckets below %v (and above); calibration threshold %d", edges, c.Threshold)
	return experiments.PlotLines(path, title, "bucket (by its upper bound, in order)", "share of queries", false, false, series...)
}

// windowEdges are a window's bucket bounds (the last bucket has none).
func windowEdges(w windowStats) ([]int, error) {
	var edges []int
	for _, b := range w.Buckets {
		if b.Below == "+Inf" {
			continue
		}
		n, err := strconv.Atoi(b.Below)
		if err != nil {
			return nil, fmt.Errorf("a bucket bound %q in %s", b.Below, w.Server)
		}
		edges = append(edges, n)
	}
	return edges, nil
}

// applyCalibration reads a calibration file into the settings of a new
// configuration: its weights (and blind mode's levels) and the tau that
// gives its threshold. set names the flags given, which must agree.
func applyCalibration(path string, lit *config.Literal, set map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f calibrationFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: not a calibration file: %w", path, err)
	}
	if f.Version != 1 || f.TargetFPIR == 0 {
		return fmt.Errorf("%s: not a calibration file of this build (version %d): run idface calibrate", path, f.Version)
	}
	g, gerr := template.ParseLevels(f.GalleryLevels)
	q, qerr := template.ParseLevels(f.QueryLevels)
	if err := errors.Join(gerr, qerr); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ternary := g.L() == 1 && q.L() == 1
	spec, err := config.Spec(lit.Mode)
	if err != nil {
		return err
	}
	if !ternary && !spec.Levels {
		return fmt.Errorf("%s calibrates levels (gallery %s, query %s): use %s (modes that take levels), or calibrate again with --mode %s", path, g, q, levelModes(), lit.Mode)
	}
	want := config.Literal{Dim: f.Dim, Alpha: g.Support(), Beta: q.Support(), Tau: &f.Tau}
	if spec.Levels {
		want.GalleryLevels, want.QueryLevels = g.String(), q.String()
	}
	if flag, ok := differing(set, []flagCheck{
		{"dim", lit.Dim == want.Dim},
		{"alpha", lit.Alpha == want.Alpha},
		{"beta", lit.Beta == want.Beta},
		{"tau", lit.Tau != nil && *lit.Tau == f.Tau},
		{"gallery-levels", lit.GalleryLevels == want.GalleryLevels || lit.GalleryLevels == ""},
		{"query-levels", lit.QueryLevels == want.QueryLevels || lit.QueryLevels == ""},
	}); ok {
		return fmt.Errorf("--%s differs from the calibration %s: leave it out, or calibrate again with it", flag, path)
	}
	lit.Dim, lit.Alpha, lit.Beta, lit.Tau = want.Dim, want.Alpha, want.Beta, want.Tau
	lit.GalleryLevels, lit.QueryLevels = want.GalleryLevels, want.QueryLevels
	sum := sha256.Sum256(b)
	cal := f.Calibration
	cal.Source = hex.EncodeToString(sum[:])
	lit.Calibration = &cal
	return nil
}

// tauFlag is the --tau flag of 'cluster init' and 'cluster assemble':
// given, a bare cosine threshold; left out, the calibration file's or
// the synthetic default (applyDefaultCalibration).
func tauFlag(fs *flag.FlagSet) *float64 {
	return fs.Float64("tau", 0, "bare cosine threshold, calibrated to nothing (default: --calibration's, else the transform's synthetic default for FPIR 1e-3)")
}

// calibrationFlag is the --calibration flag of 'cluster init' and
// 'cluster assemble'.
func calibrationFlag(fs *flag.FlagSet) *string {
	return fs.String("calibration", "", "a file from 'idface calibrate': sets --dim, --alpha, --beta (blind: the levels) and the tau that gives its threshold for the target FPIR")
}

// thresholdMeaning says what the cluster's threshold means, in FPIR when
// it was calibrated.
func thresholdMeaning(cfg *config.Params) string {
	if c, ok := cfg.Calibration(); ok {
		if c.Synthetic != "" {
			return fmt.Sprintf("threshold score >= %d (tau = %.4f), the default for this transform: FPIR %g with %d ids enrolled on synthetic people (%s; FPIR %.2g on %d searches for people not enrolled, TPIR %.1f%%), not on your features: calibrate on them (idface calibrate) and apply it (idface cluster recalibrate)",
				c.Threshold, cfg.Tau(), c.TargetFPIR, c.GalleryIDs, c.Synthetic, c.FPIR, c.NonMated, 100*c.TPIR)
		}
		if c.Rows > 0 {
			return fmt.Sprintf("threshold score >= %d for FPIR %g with up to %d ids enrolled: calibrated with %d ids enrolled, FPIR %.2g on %d searches for people not enrolled, TPIR %.1f%%",
				c.Threshold, c.TargetFPIR, c.Rows, c.GalleryIDs, c.FPIR, c.NonMated, 100*c.TPIR)
		}
		return fmt.Sprintf("threshold score >= %d for FPIR %g: calibrated with %d ids enrolled, FPIR %.2g on %d searches for people not enrolled, TPIR %.1f%%",
			c.Threshold, c.TargetFPIR, c.GalleryIDs, c.FPIR, c.NonMated, 100*c.TPIR)
	}
	return fmt.Sprintf("threshold tau = %.3f (score >= %d), not calibrated to a false-positive rate: see idface calibrate", cfg.Tau(), cfg.Threshold())
}

// levelModes lists the modes that take gallery and query levels.
func levelModes() string {
	var out []string
	for _, m := range config.Modes() {
		if s, _ := config.Spec(m); s.Levels {
			out = append(out, "--mode "+string(m))
		}
	}
	return strings.Join(out, ", ")
}
