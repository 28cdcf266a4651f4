package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idface/idface/config"
)

func init() {
	register("stats", "show the best-score statistics of the last complete window (drift of cameras, extractors, FPIR)", cmdStats)
}

// windowStats is one server's last complete window of best scores
// (engine.ScoreStats).
type windowStats struct {
	Server    string   `json:"server"`
	Windows   int      `json:"windows"` // complete windows so far; 0: none yet
	Queries   int      `json:"queries"` // in the last complete window
	Threshold int      `json:"threshold,omitempty"`
	Buckets   []bucket `json:"buckets"`
}

type bucket struct {
	Below string `json:"below"` // the bucket's exclusive upper bound ("+Inf": the rest)
	Count int    `json:"count"`
}

func cmdStats(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stats", "idface stats --cluster DIR [--json]\nidface stats --config cluster.json [--json]\nidface stats --url http://127.0.0.1:PORT/metrics [--url ...]\n\n"+
		"Shows, for each server that sees scores already (the decider of blind and\n"+
		"replicated clusters, the key server of an HE cluster, and their shards),\n"+
		"how many queries of its last complete window had their best score in each\n"+
		"bucket (eighths of the threshold up to twice it). Windows hold\n"+
		"stats_window queries (cluster.json; default 1000, at least 100); nothing\n"+
		"is shown per query, nor of a window in progress (docs/SECURITY.md,\n"+
		"\"Score statistics\"). A shift of the mass of rejected queries towards\n"+
		"the threshold means a higher FPIR than calibrated; of accepted ones\n"+
		"away from it, a camera or extractor that drifts.\n\n"+
		"The numbers come from the servers' /metrics (loopback only): a local\n"+
		"cluster made with --metrics has them; elsewhere give each metrics URL.", stderr)
	dir := clusterDirFlag(fs, "local cluster directory")
	cfgPath := fs.String("config", "", "cluster configuration file, instead of --cluster")
	var urls urlsFlag
	fs.Var(&urls, "url", "a server's metrics URL (repeatable), instead of the configuration's metrics addresses")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	type source struct{ name, url string }
	var srcs []source
	threshold := 0
	switch {
	case len(urls) > 0 && *dir == "" && *cfgPath == "":
		for _, u := range urls {
			srcs = append(srcs, source{u, u})
		}
	case len(urls) == 0 && (*dir == "") != (*cfgPath == ""):
		path := *dir
		if path == "" {
			path = *cfgPath
		}
		cfg, err := config.Load(path)
		if err != nil {
			return err
		}
		threshold = cfg.Threshold()
		var helper config.Member
		if d, ok := cfg.Decider(); ok {
			helper = d
		} else if k, ok := cfg.KeyServer(); ok {
			helper = k
		} else {
			return fmt.Errorf("a %s cluster keeps no score statistics: only a decider (blind, replicated) or a key server (he) sees scores, and the entry of 2pc/mpc shows them to no one but itself", cfg.Mode())
		}
		if helper.Metrics == "" {
			return fmt.Errorf("%s has no metrics address in the configuration: give it one (cluster init --metrics for a local cluster), or pass its metrics URL with --url", helper.Name)
		}
		srcs = append(srcs, source{helper.Name, "http://" + helper.Metrics + "/metrics"})
		if cfg.Shards() > 1 {
			fmt.Fprintf(stderr, "idface stats: %s has %d shards, each with windows of its own rows' best scores: pass each shard's metrics URL with --url to see them\n", helper.Name, cfg.Shards())
		}
	default:
		fmt.Fprintln(stderr, "idface stats: give --cluster DIR, --config FILE, or one or more --url")
		fs.Usage()
		return errUsage
	}
	var out []windowStats
	for _, s := range srcs {
		ws, err := fetchStats(s.url)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		ws.Server, ws.Threshold = s.name, threshold
		out = append(out, ws)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, ws := range out {
		if ws.Windows == 0 {
			fmt.Fprintf(stdout, "%s: no complete window yet (a window holds the configured stats_window queries)\n", ws.Server)
			continue
		}
		fmt.Fprintf(stdout, "%s: last complete window of %d queries (%d windows so far)", ws.Server, ws.Queries, ws.Windows)
		if ws.Threshold > 0 {
			fmt.Fprintf(stdout, "; threshold score %d", ws.Threshold)
		}
		fmt.Fprintln(stdout)
		top := 1
		for _, b := range ws.Buckets {
			top = max(top, b.Count)
		}
		lo := "-"
		for _, b := range ws.Buckets {
			label := fmt.Sprintf("[%s, %s)", lo, b.Below)
			if b.Below == "+Inf" {
				label = fmt.Sprintf(">= %s", lo)
			}
			fmt.Fprintf(stdout, "  best score %-12s %7d  %s\n", label, b.Count, strings.Repeat("#", b.Count*40/top))
			lo = b.Below
		}
	}
	return nil
}

// fetchStats reads a server's last complete window from its metrics.
func fetchStats(url string) (windowStats, error) {
	var ws windowStats
	if !strings.HasPrefix(url, "http://") {
		return ws, fmt.Errorf("metrics URL %q: give http://HOST:PORT/metrics (metrics serve on loopback)", url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ws, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ws, fmt.Errorf("reading its metrics: %w (is it running, with a metrics address?)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ws, fmt.Errorf("its metrics answered %s", resp.Status)
	}
	return parseStats(io.LimitReader(resp.Body, 64<<20))
}

// parseStats finds idface_best_score_window and
// idface_best_score_windows_total in the Prometheus text format.
func parseStats(r io.Reader) (windowStats, error) {
	var ws windowStats
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "idface_best_score_windows_total "):
			v, err := strconv.ParseFloat(strings.TrimPrefix(line, "idface_best_score_windows_total "), 64)
			if err != nil || v < 0 {
				return ws, fmt.Errorf("metrics: a malformed line %q", line)
			}
			ws.Windows, found = int(v), true
		case strings.HasPrefix(line, `idface_best_score_window{le="`):
			rest := strings.TrimPrefix(line, `idface_best_score_window{le="`)
			le, val, ok := strings.Cut(rest, `"} `)
			v, err := strconv.ParseFloat(val, 64)
			if !ok || err != nil || v < 0 {
				return ws, fmt.Errorf("metrics: a malformed line %q", line)
			}
			if le != "+Inf" {
				if _, err := strconv.Atoi(le); err != nil {
					return ws, fmt.Errorf("metrics: a malformed bucket %q", le)
				}
			}
			ws.Buckets = append(ws.Buckets, bucket{le, int(v)})
			ws.Queries += int(v)
		}
	}
	if err := sc.Err(); err != nil {
		return ws, fmt.Errorf("reading its metrics: %w", err)
	}
	if !found || len(ws.Buckets) == 0 {
		return ws, errors.New("its metrics have no score statistics: it is not a decider or key server of this release")
	}
	sort.Slice(ws.Buckets, func(i, j int) bool { return bucketBound(ws.Buckets[i].Below) < bucketBound(ws.Buckets[j].Below) })
	return ws, nil
}

func bucketBound(le string) int {
	if le == "+Inf" {
		return int(^uint(0) >> 1)
	}
	n, _ := strconv.Atoi(le)
	return n
}

// urlsFlag is a repeatable string flag.
type urlsFlag []string

func (u *urlsFlag) String() string     { return strings.Join(*u, ",") }
func (u *urlsFlag) Set(s string) error { *u = append(*u, s); return nil }
