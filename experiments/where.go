package experiments

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idface/idface/config"
)

// Where is where one identify's time went in the real cluster, for the
// single-client identify loop of a bench run (one identify at a time):
// from bench's own clock around each Client.Identify, and from the
// deltas of every server's /metrics scraped just before and just after
// that loop. Every *_ms field is a MEAN per identify over the loop's
// Identifies identifies (a counter's delta divided by Identifies, or by
// the requests it counts where said), not a median, so it is not
// comparable with identify_ms_p50 beside it but with ClientMs.
//
// A field whose counter a server does not export is left out (a mode
// without a decider has no decider wait, so no EntryOtherMs either);
// none is estimated. The servers' counters are the engine's own
// (modes/blind/holder.go: idface_blind_*; modes/replicated/holder.go:
// idface_repl_*) and the server's request histogram
// (server/server.go: idface_request_seconds by op).
//
// The parts of the client's time:
//
//	ClientMs = ClientSideMs + EntryMs
//	EntryMs  = EntryScoreMs + EntryPermuteMs + DeciderWaitMs + EntryOtherMs
//	DeciderWaitMs = HelpersBeyondEntryMs + DeciderWaitRestMs
type Where struct {
	// Identifies is the loop's identifies, the divisor of the means.
	Identifies int `json:"identifies"`
	// Entry is the server that answered them (the client's entry).
	Entry string `json:"entry"`
	// ClientMs: bench's clock around Client.Identify (the mean of the
	// latencies whose median is identify_ms_p50).
	ClientMs float64 `json:"client_ms"`
	// EntryMs: the entry's idface_request_seconds for op "identify"
	// (sum over count): from taking the request's stream to having
	// written its answer.
	EntryMs *float64 `json:"entry_ms,omitempty"`
	// ClientSideMs = ClientMs - EntryMs: the client's own work (the
	// query's signature, the request and answer's encoding) and the
	// QUIC round trip to the entry and back.
	ClientSideMs *float64 `json:"client_side_ms,omitempty"`
	// EntryScoreMs and EntryPermuteMs: the entry's score and permute
	// counters (its passes over its shares computing score shares; its
	// permuting and masking them), per identify.
	EntryScoreMs   *float64 `json:"entry_score_ms,omitempty"`
	EntryPermuteMs *float64 `json:"entry_permute_ms,omitempty"`
	// DeciderWaitMs: the entry's decider wait counter (blind), per
	// identify: from sending its score shares to the decider's answer.
	DeciderWaitMs *float64 `json:"decider_wait_ms,omitempty"`
	// EntryOtherMs = EntryMs - EntryScoreMs - EntryPermuteMs -
	// DeciderWaitMs: the entry's own overhead: reading the request, the
	// query's transform and seed, waiting for its pass to start, asking
	// the helpers, unpermuting the answer's positions, the row map, the
	// helpers' acknowledgements and writing the answer.
	EntryOtherMs *float64 `json:"entry_other_ms,omitempty"`
	// HelperScoreMs and HelperPermuteMs: the same counters at the other
	// share holders (the helpers), per identify, the mean over them.
	HelperScoreMs   *float64 `json:"helper_score_ms,omitempty"`
	HelperPermuteMs *float64 `json:"helper_permute_ms,omitempty"`
	// HelperQueryMs: a helper's idface_request_seconds for op "query"
	// (sum over count), the mean over the helpers: from the entry's query
	// arriving to the helper's acknowledgement, its vector sent to the
	// decider. Only where every helper answered exactly one query request
	// per identify (blind).
	HelperQueryMs *float64 `json:"helper_query_ms,omitempty"`
	// HelpersBeyondEntryMs = max(0, the slowest helper's HelperScore +
	// HelperPermute - the entry's EntryScore + EntryPermute), from the
	// means: the helpers are asked when the entry's pass starts, so their
	// kernels overlap the entry's and only what they take beyond the
	// entry's lies in the decider wait (from means, a lower bound of the
	// mean of the slowest helper's lag).
	HelpersBeyondEntryMs *float64 `json:"helpers_beyond_entry_ms,omitempty"`
	// DeciderWaitRestMs = DeciderWaitMs - HelpersBeyondEntryMs: the rest
	// of the wait: the query's trip to the helpers, the vectors over the
	// wire, the decider's sum and top-K, its answer's trip back, and
	// every process's scheduling (waiting for a core).
	DeciderWaitRestMs *float64 `json:"decider_wait_rest_ms,omitempty"`
	// QueriesPerPass: the queries the entry's passes over its shares
	// scored, over those passes (1: no pass was shared).
	QueriesPerPass *float64 `json:"queries_per_pass,omitempty"`
	// ClientCPUMs, EntryCPUMs, HelperCPUMs (the mean over the helpers)
	// and DeciderCPUMs: each process's time on a core per identify, all
	// its threads together (Linux's /proc/PID/task/*/schedstat, read just
	// before and after the loop, scrapes outside; the client is bench's
	// own process). CPU, not wall time: beside ClientMs they say how much
	// of an identify is work, and the ...RunQueueMs how much of the rest
	// is waiting for a core rather than for a message.
	ClientCPUMs  *float64 `json:"client_cpu_ms,omitempty"`
	EntryCPUMs   *float64 `json:"entry_cpu_ms,omitempty"`
	HelperCPUMs  *float64 `json:"helper_cpu_ms,omitempty"`
	DeciderCPUMs *float64 `json:"decider_cpu_ms,omitempty"`
	// ClientRunQueueMs, EntryRunQueueMs, HelperRunQueueMs and
	// DeciderRunQueueMs: the time the process's threads were ready to
	// run but waited for a core, per identify, summed over its threads
	// (two threads waiting at once count twice, so it may exceed the
	// wall time they waited).
	ClientRunQueueMs  *float64 `json:"client_run_queue_ms,omitempty"`
	EntryRunQueueMs   *float64 `json:"entry_run_queue_ms,omitempty"`
	HelperRunQueueMs  *float64 `json:"helper_run_queue_ms,omitempty"`
	DeciderRunQueueMs *float64 `json:"decider_run_queue_ms,omitempty"`
}

// Sched is a process's time on a core and waiting for one (all its
// threads), or the growth of both over an interval.
type Sched struct{ CPU, RunQueue time.Duration }

// ClientProcess names bench's own process in Sched maps.
const ClientProcess = "client"

// ReadSched sums /proc/PID/task/*/schedstat (nanoseconds on a core, then
// waiting on a run queue): ok false where it cannot be read (not Linux,
// a kernel without schedstats, a process gone).
func ReadSched(pid int) (Sched, bool) {
	dirs, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(dirs) == 0 {
		return Sched{}, false
	}
	var s Sched
	for _, d := range dirs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, d.Name()))
		if err != nil {
			continue // a thread that ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return Sched{}, false
		}
		run, err1 := strconv.ParseInt(f[0], 10, 64)
		wait, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return Sched{}, false
		}
		s.CPU += time.Duration(run)
		s.RunQueue += time.Duration(wait)
	}
	return s, true
}

// ReadScheds reads ReadSched for each named process (pid 0: skipped).
func ReadScheds(pids map[string]int) map[string]Sched {
	out := map[string]Sched{}
	for name, pid := range pids {
		if pid <= 0 {
			continue
		}
		if s, ok := ReadSched(pid); ok {
			out[name] = s
		}
	}
	return out
}

// SchedDelta is each process's growth from before to after; a process
// read only once, or whose counts fell (a thread that ended took its
// counts with it), is left out.
func SchedDelta(before, after map[string]Sched) map[string]Sched {
	out := map[string]Sched{}
	for name, a := range after {
		b, ok := before[name]
		if ok && a.CPU >= b.CPU && a.RunQueue >= b.RunQueue {
			out[name] = Sched{CPU: a.CPU - b.CPU, RunQueue: a.RunQueue - b.RunQueue}
		}
	}
	return out
}

// Scrape is the /metrics page of each server that has a metrics
// address, by name: series ("name{labels}" as the server writes it) to
// value.
type Scrape map[string]map[string]float64

// kernelPrefixes are the engines whose share holders count their
// kernels' time: blind mode's, then replicated mode's.
var kernelPrefixes = []string{"idface_blind_", "idface_repl_"}

const (
	identifySum   = `idface_request_seconds_sum{op="identify"}`
	identifyCount = `idface_request_seconds_count{op="identify"}`
	querySum      = `idface_request_seconds_sum{op="query"}`
	queryCount    = `idface_request_seconds_count{op="query"}`
)

// ParseMetrics reads a Prometheus text page: every sample's series (the
// metric's name and its labels as written) to its value. Comments and
// lines it cannot read are skipped.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series' last space (a label's value may
		// hold spaces; the text format puts no timestamp here).
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(line[:i])] = v
	}
	return out, sc.Err()
}

// ScrapeCluster reads every server's /metrics (those of cfg's servers
// with a metrics address; none: an empty Scrape).
func ScrapeCluster(ctx context.Context, cfg *config.Params) (Scrape, error) {
	out := Scrape{}
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, s := range cfg.Servers() {
		if s.Metrics == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Metrics+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s's metrics: %w", s.Name, err)
		}
		page, err := ParseMetrics(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("%s's metrics: %w", s.Name, err)
		}
		out[s.Name] = page
	}
	return out, nil
}

// scrapeSettled scrapes the cluster after a loop of n identifies through
// entry until the entry has counted all n (a server observes a request
// just after writing its answer, so the client may be quicker) and the
// idface_ series have stopped moving between two scrapes, for at most
// a second; the last scrape.
func scrapeSettled(ctx context.Context, cfg *config.Params, before Scrape, entry string, n int) (Scrape, error) {
	deadline := time.Now().Add(time.Second)
	var last Scrape
	for {
		s, err := ScrapeCluster(ctx, cfg)
		if err != nil {
			return nil, err
		}
		counted := s[entry][identifyCount]-before[entry][identifyCount] >= float64(n)
		if counted && last != nil && sameIdface(last, s) || time.Now().After(deadline) {
			return s, nil
		}
		if counted {
			last = s
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sameIdface: a and b hold the same idface_ series with the same values.
func sameIdface(a, b Scrape) bool {
	for name, pa := range a {
		pb := b[name]
		eq := func(m map[string]float64) map[string]float64 {
			out := map[string]float64{}
			for k, v := range m {
				if strings.HasPrefix(k, "idface_") {
					out[k] = v
				}
			}
			return out
		}
		if !maps.Equal(eq(pa), eq(pb)) {
			return false
		}
	}
	return len(a) == len(b)
}

// WhereFrom computes Where from the scrapes before and after a loop of n
// identifies through entry that took clientMs each on average, and the
// processes' Sched over the loop (SchedDelta; the client's under
// ClientProcess); decider names the cluster's decider ("" if none). Nil
// when the servers count no kernel time (no share holder exports a
// kernel prefix's score counter) or n < 1.
func WhereFrom(before, after Scrape, sched map[string]Sched, entry, decider string, n int, clientMs float64) *Where {
	if n < 1 {
		return nil
	}
	prefix := ""
	for _, p := range kernelPrefixes {
		if _, ok := after[entry][p+"score_seconds_total"]; ok {
			prefix = p
			break
		}
	}
	if prefix == "" {
		return nil
	}
	g := growth{before, after, n}
	w := &Where{Identifies: n, Entry: entry, ClientMs: clientMs}
	var entryCount float64
	w.EntryMs, entryCount = g.perRequest(entry, identifySum, identifyCount)
	if entryCount != float64(n) { // another server answered some: not this loop's entry alone
		w.EntryMs = nil
	}
	if w.EntryMs != nil {
		w.ClientSideMs = ptr(clientMs - *w.EntryMs)
	}
	w.EntryScoreMs = g.perIdentify(entry, prefix+"score_seconds_total")
	w.EntryPermuteMs = g.perIdentify(entry, prefix+"permute_seconds_total")
	w.DeciderWaitMs = g.perIdentify(entry, prefix+"decider_wait_seconds_total")
	if w.EntryMs != nil && w.EntryScoreMs != nil && w.EntryPermuteMs != nil && w.DeciderWaitMs != nil {
		w.EntryOtherMs = ptr(*w.EntryMs - *w.EntryScoreMs - *w.EntryPermuteMs - *w.DeciderWaitMs)
	}
	if passes, queries := passesOf(before, after, entry, prefix); passes > 0 {
		w.QueriesPerPass = ptr(queries / passes)
	}
	// The helpers: the other servers that count the same kernels.
	var helpers []string
	for name, page := range after {
		if _, ok := page[prefix+"score_seconds_total"]; ok && name != entry {
			helpers = append(helpers, name)
		}
	}
	w.helpers(g, helpers, prefix)
	w.cpu(sched, n, helpers, entry, decider)
	return w
}

// growth is the servers' counters over a loop of n identifies.
type growth struct {
	before, after Scrape
	n             int
}

// delta is a series' growth at server over the loop; ok false where the
// last scrape lacks it. A series the first lacks started during the loop
// from 0: a labelled child of a counter or histogram (a request's op)
// exists from its first count on.
func (g growth) delta(server, series string) (float64, bool) {
	a, ok := g.after[server][series]
	return a - g.before[server][series], ok
}

// perIdentify is a series' growth in milliseconds per identify.
func (g growth) perIdentify(server, series string) *float64 {
	if d, ok := g.delta(server, series); ok {
		return ptr(1000 * d / float64(g.n))
	}
	return nil
}

// perRequest is a histogram's mean in milliseconds over the loop, and
// its count.
func (g growth) perRequest(server, sum, count string) (*float64, float64) {
	s, oks := g.delta(server, sum)
	c, okc := g.delta(server, count)
	if !oks || !okc || c <= 0 {
		return nil, 0
	}
	return ptr(1000 * s / c), c
}

// passPairs are the counters of passes over a holder's shares and of the
// queries they held: checked passes, and hidden-probe scans (a
// replicated holder counts both; a run moves one of them).
var passPairs = [][2]string{{"passes_total", "passed_total"}, {"scans_total", "scanned_total"}}

// passesOf is server's passes over its shares during the run and the
// queries they held, from the first pair of counters that moved.
func passesOf(before, after Scrape, server, prefix string) (passes, queries float64) {
	for _, pair := range passPairs {
		q, ok := after[server][prefix+pair[1]]
		if d := after[server][prefix+pair[0]] - before[server][prefix+pair[0]]; d > 0 && ok {
			return d, q - before[server][prefix+pair[1]]
		}
	}
	return 0, 0
}

// meanOver is the mean of f over names; nil if names is empty or f is
// nil for any.
func meanOver(names []string, f func(string) *float64) *float64 {
	if len(names) == 0 {
		return nil
	}
	sum := 0.0
	for _, h := range names {
		v := f(h)
		if v == nil {
			return nil
		}
		sum += *v
	}
	return ptr(sum / float64(len(names)))
}

// helpers sets the helpers' means, and how much of the decider wait their
// kernels beyond the entry's explain.
func (w *Where) helpers(g growth, helpers []string, prefix string) {
	w.HelperScoreMs = meanOver(helpers, func(h string) *float64 { return g.perIdentify(h, prefix+"score_seconds_total") })
	w.HelperPermuteMs = meanOver(helpers, func(h string) *float64 { return g.perIdentify(h, prefix+"permute_seconds_total") })
	w.HelperQueryMs = meanOver(helpers, func(h string) *float64 {
		ms, count := g.perRequest(h, querySum, queryCount)
		if count != float64(g.n) {
			return nil
		}
		return ms
	})
	if w.DeciderWaitMs == nil || w.EntryScoreMs == nil || w.EntryPermuteMs == nil || len(helpers) == 0 {
		return
	}
	slowest := math.Inf(-1)
	for _, h := range helpers {
		s, p := g.perIdentify(h, prefix+"score_seconds_total"), g.perIdentify(h, prefix+"permute_seconds_total")
		if s == nil || p == nil {
			return
		}
		slowest = max(slowest, *s+*p)
	}
	beyond := max(0, slowest-*w.EntryScoreMs-*w.EntryPermuteMs)
	w.HelpersBeyondEntryMs = ptr(beyond)
	w.DeciderWaitRestMs = ptr(*w.DeciderWaitMs - beyond)
}

// cpu sets each process's time on a core and waiting for one, per
// identify, from schedstat.
func (w *Where) cpu(sched map[string]Sched, n int, helpers []string, entry, decider string) {
	cpu := func(name string) *float64 {
		if s, ok := sched[name]; ok {
			return ptr(Millis(s.CPU) / float64(n))
		}
		return nil
	}
	runq := func(name string) *float64 {
		if s, ok := sched[name]; ok {
			return ptr(Millis(s.RunQueue) / float64(n))
		}
		return nil
	}
	w.HelperCPUMs, w.HelperRunQueueMs = meanOver(helpers, cpu), meanOver(helpers, runq)
	w.ClientCPUMs, w.ClientRunQueueMs = cpu(ClientProcess), runq(ClientProcess)
	w.EntryCPUMs, w.EntryRunQueueMs = cpu(entry), runq(entry)
	if decider != "" {
		w.DeciderCPUMs, w.DeciderRunQueueMs = cpu(decider), runq(decider)
	}
}

func ptr(v float64) *float64 { return &v }

// Loaded is a run of many clients at once seen from the servers' counters
// and schedstat over the run (bench --clients): whether the passes over
// the shares were shared, and what an identify cost every process.
type Loaded struct {
	// Identifies is the run's identifies, the divisor of the means.
	Identifies int `json:"identifies"`
	// QueriesPerPass: the queries every share holder's passes scored,
	// over those passes, all holders together (1: no pass was shared;
	// nil where the mode counts no passes).
	QueriesPerPass *float64 `json:"queries_per_pass,omitempty"`
	// HolderCPUMs (the mean over the share holders), DeciderCPUMs and
	// ServerCPUMs (every server process together): time on a core per
	// identify, all threads.
	HolderCPUMs  *float64 `json:"holder_cpu_ms,omitempty"`
	DeciderCPUMs *float64 `json:"decider_cpu_ms,omitempty"`
	ServerCPUMs  *float64 `json:"server_cpu_ms,omitempty"`
	// HolderScoreMs and HolderPermuteMs: the share holders' score and
	// permute counters per identify, the mean over the holders.
	HolderScoreMs   *float64 `json:"holder_score_ms,omitempty"`
	HolderPermuteMs *float64 `json:"holder_permute_ms,omitempty"`
}

// LoadedFrom is Loaded from the scrapes and schedstat deltas around a
// run of n identifies; nil when n < 1.
func LoadedFrom(before, after Scrape, sched map[string]Sched, decider string, n int) *Loaded {
	if n < 1 {
		return nil
	}
	l := &Loaded{Identifies: n}
	var holders []string
	prefix := ""
	for name, page := range after {
		for _, p := range kernelPrefixes {
			if _, ok := page[p+"score_seconds_total"]; ok {
				holders, prefix = append(holders, name), p
				break
			}
		}
	}
	delta := func(server, series string) float64 { return after[server][series] - before[server][series] }
	if len(holders) > 0 {
		var passes, queries, score, permute float64
		for _, h := range holders {
			p, q := passesOf(before, after, h, prefix)
			passes, queries = passes+p, queries+q
			score += delta(h, prefix+"score_seconds_total")
			permute += delta(h, prefix+"permute_seconds_total")
		}
		if passes > 0 {
			l.QueriesPerPass = ptr(queries / passes)
		}
		hs := float64(len(holders))
		l.HolderScoreMs = ptr(1000 * score / hs / float64(n))
		l.HolderPermuteMs = ptr(1000 * permute / hs / float64(n))
	}
	var holderCPU, serverCPU float64
	cpuHolders := 0
	for name, s := range sched {
		if name == ClientProcess {
			continue
		}
		serverCPU += Millis(s.CPU)
		for _, h := range holders {
			if h == name {
				holderCPU += Millis(s.CPU)
				cpuHolders++
			}
		}
		if name == decider {
			l.DeciderCPUMs = ptr(Millis(s.CPU) / float64(n))
		}
	}
	if len(sched) > 1 {
		l.ServerCPUMs = ptr(serverCPU / float64(n))
	}
	if cpuHolders > 0 {
		l.HolderCPUMs = ptr(holderCPU / float64(cpuHolders) / float64(n))
	}
	return l
}
