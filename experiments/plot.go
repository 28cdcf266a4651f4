package experiments

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

// PlotLines draws series on (optionally log) axes into a PNG (or SVG/PDF by
// the file's extension). The legend goes below the plot, where it covers
// no data; with a single x value the axis still names it.
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
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	colors := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}}
	xs := map[float64]bool{}
	for i, s := range series {
		if len(s.X) != len(s.Y) || len(s.X) == 0 {
			return fmt.Errorf("experiments: series %q has %d x and %d y values", s.Label, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for k := range s.X {
			pts[k].X, pts[k].Y = s.X[k], s.Y[k]
			xs[s.X[k]] = true
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := colors[i%len(colors)]
		line.Color, points.Color = c, c
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		legend.Add(s.Label, line, points)
	}
	// Log axes label powers of ten only: data within one decade get
	// ordinary ticks instead, so that the axis shows numbers.
	if logX && span(series, func(s Series) []float64 { return s.X }) < 10 {
		p.X.Tick.Marker = plot.DefaultTicks{}
	}
	if logY && span(series, func(s Series) []float64 { return s.Y }) < 10 {
		p.Y.Tick.Marker = plot.DefaultTicks{}
	}
	if len(xs) == 1 { // one x value: an axis around it, labelled with it
		for x := range xs {
			p.X.Min, p.X.Max = x-1, x+1
			if logX {
				p.X.Min, p.X.Max = x/2, x*2
			}
			p.X.Tick.Marker = plot.ConstantTicks{{Value: x, Label: strconv.FormatFloat(x, 'g', -1, 64)}}
		}
	}
	w, h := 7*vg.Inch, 4.5*vg.Inch
	below := legendHeight(legend, len(series))
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	c, err := draw.NewFormattedCanvas(w, h+below, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, 0, below, 0))
	legend.Draw(draw.Crop(dc, vg.Inch/2, 0, 0, -h))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// span is the ratio of the largest to the smallest value of the series.
func span(series []Series, of func(Series) []float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range of(s) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return hi / lo
}

// legendHeight is the strip below the plot that n legend entries take.
func legendHeight(l plot.Legend, n int) vg.Length {
	line := l.TextStyle.Font.Size * 1.5
	return vg.Length(n)*line + l.TextStyle.Font.Size
}
