package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/internal/npy"
)

func init() {
	register("eval", "verification and open-set identification accuracy, float vs ternary", cmdEval)
}

func cmdEval(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval", "idface eval (--templates X.npy --labels L.txt | --synthetic --people P --samples S --dim D [--intra 0.5]) [--alpha A] [--beta B,...] [--json]\n\n"+
		"Verification: accuracy at the best threshold (balanced pairs), TAR at FAR\n"+
		"1e-3 and 1e-4, EER. Open-set identification (first sample of half the people\n"+
		"enrolled): rank-1, TPIR at FPIR 1e-2 and 1e-3. For float cosines and for the\n"+
		"ternary scores <T_alpha(x), T_beta(y)> of each beta. Labels: one per line.", stderr)
	tmpl := fs.String("templates", "", "N x d templates (.npy)")
	labels := fs.String("labels", "", "N labels, one per line")
	synthetic := fs.Bool("synthetic", false, "use synthetic people instead")
	people := fs.Int("people", 1000, "synthetic people")
	samples := fs.Int("samples", 4, "samples per synthetic person")
	dim := fs.Int("dim", 512, "synthetic dimension")
	intra := fs.Float64("intra", 0.5, "synthetic intra-class cosine")
	alpha := fs.Int("alpha", 0, "enrollment weight (default floor(2d/3))")
	betas := fs.String("beta", "", "query weights (default alpha,127,63 where they fit)")
	maxImp := fs.Int("max-impostors", 2_000_000, "impostor pairs sampled for verification")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	var xs [][]float32
	var ls []int
	switch {
	case *synthetic && *tmpl == "":
		s, err := experiments.NewSynthetic(*people, *samples, *dim, *intra, 1)
		if err != nil {
			return err
		}
		xs, ls = s.Samples, s.Labels
	case !*synthetic && *tmpl != "" && *labels != "":
		m, err := npy.ReadFile(*tmpl)
		if err != nil {
			return err
		}
		names, err := readIDs(*labels)
		if err != nil {
			return err
		}
		if len(names) != m.Rows {
			return fmt.Errorf("%s has %d rows but %s has %d labels", *tmpl, m.Rows, *labels, len(names))
		}
		idx := map[string]int{}
		for i := 0; i < m.Rows; i++ {
			xs = append(xs, m.RowF32(i, nil))
			if _, ok := idx[names[i]]; !ok {
				idx[names[i]] = len(idx)
			}
			ls = append(ls, idx[names[i]])
		}
	default:
		fmt.Fprintln(stderr, "idface eval: give --templates with --labels, or --synthetic")
		fs.Usage()
		return errUsage
	}
	d := len(xs[0])
	a := *alpha
	if a == 0 {
		a = 2 * d / 3
	}
	var bl []int
	if *betas == "" {
		for _, b := range []int{a, 127, 63} {
			if b <= a {
				bl = append(bl, b)
			}
		}
	} else {
		var err error
		if bl, err = intList(*betas); err != nil {
			return err
		}
	}
	rs, err := experiments.Evaluate(xs, ls, a, bl, *maxImp, 1)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"dim": d, "templates": len(xs), "results": rs})
	}
	fmt.Fprintf(stdout, "%d templates of dimension %d; %d genuine and %d impostor pairs; gallery %d, %d mated and %d non-mated probes\n",
		len(xs), d, rs[0].Genuine, rs[0].Impostor, rs[0].GallerySz, rs[0].Mated, rs[0].NonMated)
	fmt.Fprintf(stdout, "%-18s %9s %10s %10s %8s %8s %10s %10s\n", "scores", "accuracy", "TAR@1e-3", "TAR@1e-4", "EER", "rank-1", "TPIR@1e-2", "TPIR@1e-3")
	for _, r := range rs {
		name := "float (plain)"
		if r.Scores == "ternary" {
			name = fmt.Sprintf("ternary (%d,%d)", r.Alpha, r.Beta)
		}
		fmt.Fprintf(stdout, "%-18s %8.2f%% %9.2f%% %9.2f%% %7.2f%% %7.2f%% %9.2f%% %9.2f%%\n", name,
			100*r.Accuracy, 100*r.TAR1e3, 100*r.TAR1e4, 100*r.EER, 100*r.Rank1, 100*r.TPIR1e2, 100*r.TPIR1e3)
	}
	return nil
}
