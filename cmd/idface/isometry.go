package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/template"
)

func init() {
	register("isometry", "measure the distortion of T_alpha (paper App. B/C)", cmdIsometry)
}

func cmdIsometry(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("isometry", "idface isometry [--dim 512] [--alpha 341] [--pairs 200] [--sweep-alpha] [--json]\n\n"+
		"For every cosine c from -1 to 1 in steps of 0.05, draws random unit pairs with\n"+
		"cosine exactly c and reports the mean and max of |<T_a x, T_a y>/a - c|.\n"+
		"With --sweep-alpha: the mean over all c for every alpha from 1 to d.", stderr)
	dim := fs.Int("dim", 512, "template dimension d")
	alpha := fs.Int("alpha", 0, "nonzeros (default floor(2d/3))")
	pairs := fs.Int("pairs", 200, "random pairs per cosine")
	sweep := fs.Bool("sweep-alpha", false, "sweep alpha over 1..d instead")
	seed := fs.Uint64("seed", 1, "seed of the synthetic pairs")
	asJSON := fs.Bool("json", false, "print JSON")
	plotPath := fs.String("plot", "", "also draw the result as a PNG")
	if err := parse(fs, args); err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	if *sweep {
		rows, err := experiments.SweepAlpha(*dim, *pairs, *seed)
		if err != nil {
			return err
		}
		if *plotPath != "" {
			var x, y []float64
			for _, r := range rows {
				x, y = append(x, float64(r.Alpha)), append(y, r.MeanEps)
			}
			if err := experiments.PlotLines(*plotPath, fmt.Sprintf("mean distortion of T_alpha over c in [-1, 1], d = %d", *dim), "alpha", "mean distortion |cos(T(x),T(y)) - cos(x,y)|", false, false,
				experiments.Series{Label: "mean |<T x, T y>/alpha - c|", X: x, Y: y}); err != nil {
				return err
			}
		}
		if *asJSON {
			return enc.Encode(struct {
				Dim   int                    `json:"dim"`
				Sweep []experiments.SweepRow `json:"sweep"`
			}{*dim, rows})
		}
		best := rows[0]
		fmt.Fprintf(stdout, "%6s  %8s\n", "alpha", "mean_eps")
		for _, r := range rows {
			fmt.Fprintf(stdout, "%6d  %8.5f\n", r.Alpha, r.MeanEps)
			if r.MeanEps < best.MeanEps {
				best = r
			}
		}
		fmt.Fprintf(stdout, "minimum mean distortion %.5f at alpha = %d (floor(2d/3) = %d)\n", best.MeanEps, best.Alpha, template.DefaultAlpha(*dim))
		return nil
	}
	a := *alpha
	if a == 0 {
		a = template.DefaultAlpha(*dim)
	}
	rows, err := experiments.Isometry(*dim, a, *pairs, *seed)
	if err != nil {
		return err
	}
	if *plotPath != "" {
		var x, mean, mx []float64
		for _, r := range rows {
			x, mean, mx = append(x, r.Cos), append(mean, r.MeanEps), append(mx, r.MaxEps)
		}
		if err := experiments.PlotLines(*plotPath, fmt.Sprintf("distortion of T_alpha, d = %d, alpha = %d", *dim, a), "cosine c", "distortion |cos(T(x),T(y)) - c|", false, false,
			experiments.Series{Label: "mean distortion", X: x, Y: mean}, experiments.Series{Label: "max distortion", X: x, Y: mx}); err != nil {
			return err
		}
	}
	if *asJSON {
		return enc.Encode(struct {
			Dim   int                       `json:"dim"`
			Alpha int                       `json:"alpha"`
			Rows  []experiments.IsometryRow `json:"rows"`
		}{*dim, a, rows})
	}
	fmt.Fprintf(stdout, "d = %d, alpha = %d, %d pairs per cosine\n%6s  %8s  %8s\n", *dim, a, *pairs, "cos", "mean_eps", "max_eps")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%6.2f  %8.5f  %8.5f\n", r.Cos, r.MeanEps, r.MaxEps)
	}
	return nil
}
