package inproc_test

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/template"
)

var (
	windowLine  = regexp.MustCompile(`(?m)^idface_best_score_window\{le="([^"]+)"\} (\d+)$`)
	windowsLine = regexp.MustCompile(`(?m)^idface_best_score_windows_total (\d+)$`)
)

// shownWindow is the last complete window a /metrics page shows: the
// count of complete windows and the count per bucket bound.
func shownWindow(t *testing.T, page string) (int, map[string]int) {
	t.Helper()
	m := windowsLine.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no idface_best_score_windows_total in\n%s", page)
	}
	n, _ := strconv.Atoi(m[1])
	counts := map[string]int{}
	for _, b := range windowLine.FindAllStringSubmatch(page, -1) {
		c, _ := strconv.Atoi(b[2])
		counts[b[1]] = c
	}
	if len(counts) != engine.StatsBuckets {
		t.Fatalf("%d buckets shown, want %d", len(counts), engine.StatsBuckets)
	}
	return n, counts
}

// TestScoreStatistics: the server that sees scores (the decider, the key
// server) shows the best scores of a window of queries only once the
// window is complete, and then exactly: the window's buckets are those
// of the queries' best scores (from the answers of a research cluster
// in blind and replicated mode, from the plaintext in mode he); the
// 101st query changes nothing shown.
func TestScoreStatistics(t *testing.T) {
	const dim, window = 64, config.MinStatsWindow
	tau := 0.2
	for _, tc := range []struct {
		name, helper string
		lit          config.Literal
		mu           int
	}{
		{"blind", "decider", config.Literal{Mode: config.ModeBlind, Dim: dim, Tau: &tau, RevealScores: true}, 2},
		{"replicated", "decider", config.Literal{Mode: config.ModeReplicated, Dim: dim, Tau: &tau, RevealScores: true}, 3},
		{"he", "key", config.Literal{Mode: config.ModeHE, Dim: dim, Beta: 16, Tau: &tau}, 1}, // best scores from the plaintext
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.lit.StatsWindow = window
			tc.lit.Timeout = config.Duration(20 * time.Second)
			c := inproc.Start(t, inproc.Literal(tc.lit, tc.mu))
			xs := inproc.Templates(40, dim, 5)
			if err := c.Client("client", "p1").Enroll(inproc.Ctx(t, time.Minute), inproc.Items(xs, "r")); err != nil {
				t.Fatal(err)
			}
			probes := inproc.Templates(window+1, dim, 6)
			copy(probes, xs[:20]) // half enrolled people, half strangers
			edges := engine.StatsEdges(c.P.Threshold())
			want := map[string]int{}
			dev := c.Client("device", "p1")
			for i, y := range probes {
				if i == window-1 {
					if n, counts := shownWindow(t, c.Metrics(tc.helper)); n != 0 || counts["+Inf"]+counts[strconv.Itoa(edges[0])] != 0 {
						t.Fatalf("a window in progress is shown: %d windows, %v", n, counts)
					}
				}
				a, err := dev.Identify(inproc.Ctx(t, time.Minute), y, 1)
				if err != nil {
					t.Fatal(err)
				}
				if i >= window {
					continue
				}
				var best int
				switch {
				case tc.lit.Mode == config.ModeHE: // <T_alpha(x), T_beta(y)>, decrypted by the key server
					ty, _ := template.Transform(y, c.P.Beta())
					best = math.MinInt
					for _, x := range xs {
						tx, _ := template.Transform(x, c.P.Alpha())
						best = max(best, tx.Dot(ty))
					}
				case len(a.Candidates) == 0 || a.ScoresHidden:
					t.Fatalf("query %d: a research cluster answered no best score: %+v", i, a)
				default:
					best = int(a.Candidates[0].Score)
				}
				b := 0
				for b < len(edges) && best >= edges[b] {
					b++
				}
				le := "+Inf"
				if b < len(edges) {
					le = strconv.Itoa(edges[b])
				}
				want[le]++
			}
			n, counts := shownWindow(t, c.Metrics(tc.helper))
			for le, k := range counts {
				if k != want[le] {
					t.Fatalf("window shown %v, the answers' best scores %v", counts, want)
				}
			}
			if n != 1 {
				t.Fatalf("%d windows complete after %d queries", n, window+1)
			}
			t.Logf("%s: %v", tc.helper, fmt.Sprint(counts))
		})
	}
}
