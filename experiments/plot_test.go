package experiments

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// textY returns the y coordinate of the first SVG text element holding s.
func textY(t *testing.T, svg, s string) float64 {
	t.Helper()
	re := regexp.MustCompile(`<text[^>]*\by="([0-9.e+-]+)"[^>]*>` + regexp.QuoteMeta(s) + `</text>`)
	m := re.FindStringSubmatch(svg)
	if m == nil {
		re = regexp.MustCompile(`transform="[^"]*translate\([0-9.e+-]+,\s*([0-9.e+-]+)\)[^"]*"[^>]*>` + regexp.QuoteMeta(s) + `</text>`)
		m = re.FindStringSubmatch(svg)
	}
	if m == nil {
		t.Fatalf("no text %q in the SVG", s)
	}
	y, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// TestPlotReadable (issue 20 item 7): with one x value the axis still
// names it, a log axis within one decade shows numbers, and the legend is
// below the x axis's label, so it covers no data.
func TestPlotReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.svg")
	err := PlotLines(path, "one size", "enrolled identities", "seconds", true, true,
		Series{Label: "identify (idface)", X: []float64{65536}, Y: []float64{0.05}},
		Series{Label: "float32 search", X: []float64{65536}, Y: []float64{0.01}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	textY(t, svg, "65536") // the x tick label
	textY(t, svg, "0.05")  // a y label within one decade (log ticks would show 0.01 only)
	axis := textY(t, svg, "enrolled identities")
	if title := textY(t, svg, "one size"); title >= axis { // y grows downwards in the SVG's coordinates as gonum writes them
		t.Fatalf("the title at %.1f is not above the axis label at %.1f: the test's idea of the SVG's coordinates is wrong", title, axis)
	}
	for _, l := range []string{"identify (idface)", "float32 search"} {
		if y := textY(t, svg, l); y <= axis {
			t.Errorf("legend entry %q at y %.1f, not below the x axis label at %.1f", l, y, axis)
		}
	}
}
