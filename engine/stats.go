package engine

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
)

// ScoreStats gathers the best score of each query a server decides into
// fixed buckets and shows the counts only per window of Window queries:
// /metrics (idface_best_score_window, idface_best_score_windows_total)
// and `idface stats` see the last complete window, never a query's own
// score nor a window in progress. Only servers that see scores already
// keep them: a decider (masked scores in permuted order), the HE key
// server (decrypted scores). An operator watches the drift of a
// camera, an extractor or the FPIR without any server or client
// learning more of a query than it did (docs/SECURITY.md, "Score
// statistics").
type ScoreStats struct {
	mu      sync.Mutex
	window  int
	edges   []int // bucket b counts best scores < edges[b]; the last bucket the rest
	cur     []uint64
	n       int
	shown   *prometheus.GaugeVec
	windows prometheus.Counter
}

// StatsBuckets is the number of buckets: eighths of the threshold up to
// twice it, and one for the rest.
const StatsBuckets = 17

// NewScoreStats registers the statistics of a server of p (one series
// per bucket, labelled by its upper bound "le" as in a Prometheus
// histogram, and the count of complete windows).
func NewScoreStats(p *config.Params, reg prometheus.Registerer) *ScoreStats {
	s := &ScoreStats{window: p.StatsWindow(), edges: StatsEdges(p.Threshold()), cur: make([]uint64, StatsBuckets)}
	s.shown = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idface_best_score_window",
		Help: fmt.Sprintf("Queries of the last complete window (%d queries) whose best score is below le (le is an integer score; the threshold is %d); nothing per query.", s.window, p.Threshold())},
		[]string{"le"})
	for b := range StatsBuckets {
		s.shown.WithLabelValues(s.label(b)).Set(0)
	}
	s.windows = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_best_score_windows_total",
		Help: "Complete windows of best-score statistics (idface_best_score_window shows the last)."})
	reg.MustRegister(s.shown, s.windows)
	return s
}

// StatsEdges are the buckets' exclusive upper bounds for a threshold:
// threshold*j/8 for j = 1..16 (at least 1 apart); the last bucket has
// none.
func StatsEdges(threshold int) []int {
	step := max(threshold, 8) // a threshold of 0 or less: research clusters
	edges := make([]int, StatsBuckets-1)
	for j := range edges {
		edges[j] = max(step*(j+1)/8, j+1)
	}
	return edges
}

func (s *ScoreStats) label(b int) string {
	if b == len(s.edges) {
		return "+Inf"
	}
	return strconv.Itoa(s.edges[b])
}

// Observe adds one query's best score; every Window-th completes a window
// and shows it.
func (s *ScoreStats) Observe(best int) {
	if s == nil {
		return
	}
	b := 0
	for b < len(s.edges) && best >= s.edges[b] {
		b++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur[b]++
	if s.n++; s.n < s.window {
		return
	}
	for b, c := range s.cur {
		s.shown.WithLabelValues(s.label(b)).Set(float64(c))
		s.cur[b] = 0
	}
	s.n = 0
	s.windows.Inc()
}
