package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/host/input"
	"github.com/idface/idface/template"
)

func init() {
	register("eval", "verification and open-set identification accuracy, float vs ternary", cmdEval)
}

func cmdEval(args []string, stdout, stderr io.Writer) error {
	o, err := evalFlags(args, stderr)
	if err != nil {
		return err
	}
	xs, ls, err := o.read()
	if err != nil {
		return err
	}
	d := len(xs[0])
	a, bl, err := o.weights(d)
	if err != nil {
		return err
	}
	rs, err := o.evaluate(xs, ls, a, bl)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"dim": d, "templates": len(xs), "results": rs})
	}
	printEval(stdout, len(xs), d, rs)
	return nil
}

// evalOptions are eval's flags, checked.
type evalOptions struct {
	tmpl, labels, betas  string
	synthetic, rotate    bool
	people, samples, dim int
	intra, gamma         float64
	alpha, maxImp        int
	gLevels, qLevels     levelsFlag
	seed                 uint64
	asJSON               bool
}

func evalFlags(args []string, stderr io.Writer) (*evalOptions, error) {
	fs := newFlags("eval", "idface eval (--templates X --labels L.txt | --synthetic --people P --samples S --dim D [--intra 0.3] [--anisotropic G [--rotate]]) [--alpha A] [--beta B,...] [--gallery-levels L:a1,...]... [--query-levels L:a1,...]... [--json]\n\n"+
		"Verification: accuracy at the best threshold (balanced pairs), TAR at FAR\n"+
		"1e-3 and 1e-4, EER. Open-set identification (first sample of half the people\n"+
		"enrolled): rank-1, TPIR at FPIR 1e-2 and 1e-3. For float cosines and for the\n"+
		"ternary scores <T_alpha(x), T_beta(y)> of each beta. Labels: one per line.\n\n"+
		"Multi-level transforms (blind mode, docs/BLIND-NOTES.md): \"L:a1,...,aL\" maps the a1\n"+
		"largest |x_j| to sign*L, the next a2 to sign*(L-1), ...; \"1:341\" is T_341.\n"+
		"Each --gallery-levels x --query-levels pair adds a row scored <G(x), Q(y)>;\n"+
		"a missing side defaults to 1:alpha (gallery) or 1:beta for each beta (query).\n"+
		"--gallery-levels float keeps the gallery in float (<x, Q(y)>): the best any\n"+
		"gallery transform can do with that query.\n\n"+
		"The synthetic people's default margin (--intra 0.3) separates the rows:\n"+
		"at synth's 0.5, which the README's cluster recipe uses, every score\n"+
		"reaches 99.7-100% and the table tells nothing.", stderr)
	o := &evalOptions{}
	fs.StringVar(&o.tmpl, "templates", "", "N templates: .npy, CSV or JSON lines (see idface enroll --help)")
	fs.StringVar(&o.labels, "labels", "", "N labels, one per line")
	fs.BoolVar(&o.synthetic, "synthetic", false, "use synthetic people instead")
	fs.IntVar(&o.people, "people", 1000, "synthetic people")
	fs.IntVar(&o.samples, "samples", 4, "samples per synthetic person")
	fs.IntVar(&o.dim, "dim", 512, "synthetic dimension")
	fs.Float64Var(&o.intra, "intra", 0.3, "synthetic intra-class cosine (mean cosine between two samples of one person)")
	fs.IntVar(&o.alpha, "alpha", 0, "enrollment weight (default floor(2d/3))")
	fs.StringVar(&o.betas, "beta", "", "query weights (default alpha,127,63 where they fit)")
	fs.IntVar(&o.maxImp, "max-impostors", 2_000_000, "impostor pairs sampled for verification")
	fs.Var(&o.gLevels, "gallery-levels", "gallery (enrolled side) levels `L:a1,...,aL` or float; repeat the flag or separate specs with ';' for several")
	fs.Var(&o.qLevels, "query-levels", "query (probe side) levels `L:a1,...,aL`; repeat the flag or separate specs with ';' for several")
	fs.Float64Var(&o.gamma, "anisotropic", 0, "synthetic anisotropy `gamma`: coordinate j of every person's centre has standard deviation proportional to (j+1)^-gamma; within-person variation stays isotropic (0: isotropic people)")
	fs.BoolVar(&o.rotate, "rotate", false, "with --anisotropic, rotate the synthetic templates randomly (the spectrum off the axes)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic people")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	switch {
	case o.synthetic && o.tmpl == "":
	case !o.synthetic && (o.gamma != 0 || o.rotate):
		fmt.Fprintln(stderr, "idface eval: --anisotropic and --rotate shape --synthetic people only")
		fs.Usage()
		return nil, errUsage
	case !o.synthetic && o.tmpl != "" && o.labels != "":
	default:
		fmt.Fprintln(stderr, "idface eval: give --templates with --labels, or --synthetic")
		fs.Usage()
		return nil, errUsage
	}
	return o, nil
}

// read returns the templates and their people: synthetic, or read.
func (o *evalOptions) read() ([][]float32, []int, error) {
	if !o.synthetic {
		return readLabelled(o.tmpl, o.labels)
	}
	s, err := experiments.NewSyntheticWith(experiments.SyntheticOptions{People: o.people, Samples: o.samples,
		Dim: o.dim, Intra: o.intra, Seed: o.seed, Gamma: o.gamma, Rotate: o.rotate})
	if err != nil {
		return nil, nil, err
	}
	return s.Samples, s.Labels, nil
}

// weights are alpha and the betas to score at dimension d.
func (o *evalOptions) weights(d int) (int, []int, error) {
	a := o.alpha
	if a == 0 {
		a = 2 * d / 3
	}
	if o.betas != "" {
		bl, err := intList(o.betas)
		return a, bl, err
	}
	var bl []int
	for _, b := range []int{a, 127, 63} {
		if b <= a {
			bl = append(bl, b)
		}
	}
	return a, bl, nil
}

// evaluate scores float and ternary (alpha a, each beta of bl), then each
// pair of levels given.
func (o *evalOptions) evaluate(xs [][]float32, ls []int, a int, bl []int) ([]experiments.EvalResult, error) {
	rs, err := experiments.Evaluate(xs, ls, a, bl, o.maxImp, 1)
	if err != nil || len(o.gLevels) == 0 && len(o.qLevels) == 0 {
		return rs, err
	}
	gs, qs := []template.Levels(o.gLevels), []template.Levels(o.qLevels)
	if len(gs) == 0 {
		gs = []template.Levels{template.TernaryLevels(a)}
	}
	if len(qs) == 0 {
		for _, b := range bl {
			qs = append(qs, template.TernaryLevels(b))
		}
	}
	var lp []experiments.LevelPair
	for _, g := range gs {
		for _, q := range qs {
			lp = append(lp, experiments.LevelPair{Gallery: g, Query: q})
		}
	}
	lr, err := experiments.EvaluateLevels(xs, ls, lp, o.maxImp, 1)
	if err != nil {
		return nil, err
	}
	return append(rs, lr...), nil
}

// printEval prints eval's table: n templates of dimension d, one row a
// result.
func printEval(stdout io.Writer, n, d int, rs []experiments.EvalResult) {
	fmt.Fprintf(stdout, "%d templates of dimension %d; %d genuine and %d impostor pairs; gallery %d, %d mated and %d non-mated probes\n",
		n, d, rs[0].Genuine, rs[0].Impostor, rs[0].GallerySz, rs[0].Mated, rs[0].NonMated)
	names, width := make([]string, len(rs)), 18
	for i, r := range rs {
		switch r.Scores {
		case "ternary":
			names[i] = fmt.Sprintf("ternary (%d,%d)", r.Alpha, r.Beta)
		case "levels":
			names[i] = fmt.Sprintf("levels %s x %s", r.GalleryLevels, r.QueryLevels)
		default:
			names[i] = "float (plain)"
		}
		width = max(width, len(names[i]))
	}
	fmt.Fprintf(stdout, "%-*s %9s %10s %10s %8s %8s %10s %10s\n", width, "scores", "accuracy", "TAR@1e-3", "TAR@1e-4", "EER", "rank-1", "TPIR@1e-2", "TPIR@1e-3")
	for i, r := range rs {
		fmt.Fprintf(stdout, "%-*s %8.2f%% %9.2f%% %9.2f%% %7.2f%% %7.2f%% %9.2f%% %9.2f%%\n", width, names[i],
			100*r.Accuracy, 100*r.TAR1e3, 100*r.TAR1e4, 100*r.EER, 100*r.Rank1, 100*r.TPIR1e2, 100*r.TPIR1e3)
	}
}

// readLabelled reads templates and their labels (one per line, the same
// label for every template of one person) and numbers the labels.
func readLabelled(tmpls, labels string) ([][]float32, []int, error) {
	tm, err := input.ReadTemplates(tmpls, 0)
	if err != nil {
		return nil, nil, err
	}
	names, err := input.ReadLabels(labels)
	if err != nil {
		return nil, nil, err
	}
	if len(names) != tm.Rows() {
		return nil, nil, fmt.Errorf("%s holds %d templates but %s has %d labels: give one label per template, in the same order", tmpls, tm.Rows(), labels, len(names))
	}
	var xs [][]float32
	var ls []int
	idx := map[string]int{}
	for i := range tm.Rows() {
		if err := tm.Check(i); err != nil {
			return nil, nil, err
		}
		xs = append(xs, tm.Row(i, nil))
		if _, ok := idx[names[i]]; !ok {
			idx[names[i]] = len(idx)
		}
		ls = append(ls, idx[names[i]])
	}
	return xs, ls, nil
}

// levelsFlag collects multi-level specs from a repeatable flag; one value
// may hold several specs separated by ';'.
type levelsFlag []template.Levels

func (f *levelsFlag) String() string {
	var s []string
	for _, lv := range *f {
		if lv.L() == 0 {
			s = append(s, "float")
		} else {
			s = append(s, lv.String())
		}
	}
	return strings.Join(s, ";")
}

func (f *levelsFlag) Set(v string) error {
	for _, spec := range strings.Split(v, ";") {
		switch strings.TrimSpace(spec) {
		case "":
			continue
		case "float": // a float gallery (the zero Levels), see EvaluateLevels
			*f = append(*f, template.Levels{})
			continue
		}
		lv, err := template.ParseLevels(spec)
		if err != nil {
			return err
		}
		*f = append(*f, lv)
	}
	return nil
}
