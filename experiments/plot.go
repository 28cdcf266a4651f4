package experiments

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one line of a plot: label and (x, y) points.
type Series struct {
	Label string
	X, Y  []float64
}

// PlotLines draws series on log-log axes into a PNG (or SVG/PDF by the
// file's extension).
func PlotLines(path, title, xlabel, ylabel string, logX, logY bool, series ...Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	colors := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}}
	for i, s := range series {
		if len(s.X) != len(s.Y) || len(s.X) == 0 {
			return fmt.Errorf("experiments: series %q has %d x and %d y values", s.Label, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for k := range s.X {
			pts[k].X, pts[k].Y = s.X[k], s.Y[k]
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := colors[i%len(colors)]
		line.Color, points.Color = c, c
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(s.Label, line, points)
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
