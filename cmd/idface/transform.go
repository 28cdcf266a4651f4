package main

import (
	"fmt"
	"io"

	"github.com/idface/idface/host/input"
	"github.com/idface/idface/internal/codec/npy"
	"github.com/idface/idface/template"
)

func init() {
	register("transform", "apply T_alpha to templates: float .npy in, int8 .npy out", cmdTransform)
}

func cmdTransform(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("transform", "idface transform --alpha A --in X.npy|X.csv|X.jsonl --out Z.npy\n\n"+
		"Applies the almost-isometric ternary transform T_alpha to every template of\n"+
		"X (N templates of dimension d) and writes the N x d int8 result ({-1,0,1}).\n\n"+input.Formats, stderr)
	alpha := fs.Int("alpha", 0, "nonzeros per template (default floor(2d/3), 341 for d = 512)")
	in := fs.String("in", "", "input templates: .npy (float32 or float64), CSV or JSON lines")
	out := fs.String("out", "", "output .npy (N x d, int8)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "in", "out"); err != nil {
		return err
	}
	tm, err := input.ReadTemplates(*in, 0)
	if err != nil {
		return err
	}
	m := tm.M
	if m.I8 != nil {
		return fmt.Errorf("%s holds int8 values: transform wants float32 or float64 templates", *in)
	}
	a := *alpha
	if a == 0 {
		a = template.DefaultAlpha(m.Cols)
	}
	tr, err := template.NewTransformer(m.Cols, a)
	if err != nil {
		return err
	}
	res := &npy.Matrix{Rows: m.Rows, Cols: m.Cols, I8: make([]int8, 0, m.Rows*m.Cols)}
	z := template.NewTernary(m.Cols)
	row := make([]float64, 0, m.Cols)
	for i := 0; i < m.Rows; i++ {
		if err := template.Apply(tr, m.RowF64(i, row), z); err != nil {
			return fmt.Errorf("%s %s: %w", *in, tm.Where(i), err)
		}
		for j := 0; j < m.Cols; j++ {
			res.I8 = append(res.I8, z.At(j))
		}
	}
	if err := npy.WriteFile(*out, res); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "transformed %d templates (d = %d, alpha = %d) into %s\n", m.Rows, m.Cols, a, *out)
	return nil
}
