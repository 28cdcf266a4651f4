package experiments

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWhereFromCounters: Where's means are the counters' deltas over the
// identifies, its parts add up to the client's time, a series the first
// scrape lacks (a request op's first count) grew from 0, and what no
// server counts is left out, not guessed.
func TestWhereFromCounters(t *testing.T) {
	page := func(text string) map[string]float64 { return parsePage(t, text) }
	holder := func(score, permute, wait, passes, passed float64) string {
		return "# HELP x\n# TYPE x counter\n" + strings.Join([]string{
			"idface_blind_score_seconds_total " + ftoa(score),
			"idface_blind_permute_seconds_total " + ftoa(permute),
			"idface_blind_decider_wait_seconds_total " + ftoa(wait),
			"idface_blind_passes_total " + ftoa(passes),
			"idface_blind_passed_total " + ftoa(passed),
		}, "\n") + "\n"
	}
	before := Scrape{
		"p1": page(holder(1, 1, 1, 10, 10) + `idface_request_seconds_sum{op="health"} 0.5` + "\n"),
		"p2": page(holder(2, 2, 0, 10, 10) + `idface_request_seconds_sum{op="query"} 1` + "\n" + `idface_request_seconds_count{op="query"} 10` + "\n"),
		"K":  page(`idface_request_seconds_count{op="decide"} 20` + "\n"),
	}
	// 4 identifies: the entry scored 4 ms, permuted 2 ms, waited 20 ms
	// in all, and answered them in 32 ms; the helper 8 ms, 4 ms, and its
	// 4 query requests took 16 ms.
	after := Scrape{
		"p1": page(holder(1.004, 1.002, 1.020, 13, 14) + `idface_request_seconds_sum{op="identify"} 0.032` + "\n" + `idface_request_seconds_count{op="identify"} 4` + "\n"),
		"p2": page(holder(2.008, 2.004, 0, 14, 14) + `idface_request_seconds_sum{op="query"} 1.016` + "\n" + `idface_request_seconds_count{op="query"} 14` + "\n"),
		"K":  page(`idface_request_seconds_count{op="decide"} 28` + "\n"),
	}
	sched := map[string]Sched{"p1": {CPU: 8 * time.Millisecond, RunQueue: 4 * time.Millisecond}, ClientProcess: {CPU: 2 * time.Millisecond}}
	w := WhereFrom(before, after, sched, "p1", "K", 4, 10)
	if w == nil {
		t.Fatal("no Where from blind holders' counters")
	}
	for _, c := range []struct {
		name string
		got  *float64
		want float64
	}{
		{"entry", w.EntryMs, 8}, {"client side", w.ClientSideMs, 2}, {"entry score", w.EntryScoreMs, 1}, {"entry permute", w.EntryPermuteMs, 0.5},
		{"decider wait", w.DeciderWaitMs, 5}, {"entry other", w.EntryOtherMs, 1.5}, {"helper score", w.HelperScoreMs, 2}, {"helper permute", w.HelperPermuteMs, 1},
		{"helper query", w.HelperQueryMs, 4}, {"beyond", w.HelpersBeyondEntryMs, 1.5}, {"rest", w.DeciderWaitRestMs, 3.5}, {"queries per pass", w.QueriesPerPass, 4.0 / 3},
		{"entry cpu", w.EntryCPUMs, 2}, {"entry run queue", w.EntryRunQueueMs, 1}, {"client cpu", w.ClientCPUMs, 0.5},
	} {
		if c.got == nil || math.Abs(*c.got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := *w.ClientSideMs + *w.EntryScoreMs + *w.EntryPermuteMs + *w.DeciderWaitMs + *w.EntryOtherMs; math.Abs(got-w.ClientMs) > 1e-9 {
		t.Errorf("parts add up to %v, client %v", got, w.ClientMs)
	}
	// Not read, so not reported: the helper's and the decider's processes.
	if w.HelperCPUMs != nil || w.DeciderCPUMs != nil || w.DeciderRunQueueMs != nil {
		t.Errorf("times of processes never read: %v %v %v", w.HelperCPUMs, w.DeciderCPUMs, w.DeciderRunQueueMs)
	}

	// A mode without a decider wait counter: no wait, no entry overhead.
	noWait := func(s Scrape) Scrape {
		out := Scrape{}
		for name, p := range s {
			out[name] = map[string]float64{}
			for k, v := range p {
				if !strings.Contains(k, "decider_wait") {
					out[name][k] = v
				}
			}
		}
		return out
	}
	w = WhereFrom(noWait(before), noWait(after), nil, "p1", "", 4, 10)
	if w == nil || w.EntryMs == nil || w.DeciderWaitMs != nil || w.EntryOtherMs != nil || w.DeciderWaitRestMs != nil || w.EntryCPUMs != nil {
		t.Errorf("without a decider wait: %+v", w)
	}
	// An entry that did not answer every identify: no entry time.
	if w := WhereFrom(before, after, nil, "p1", "K", 5, 10); w == nil || w.EntryMs != nil || w.ClientSideMs != nil || w.HelperQueryMs != nil {
		t.Errorf("5 identifies, 4 answered: %+v", w)
	}
	// Servers that count no kernel time: no Where.
	if w := WhereFrom(Scrape{"p1": {}}, Scrape{"p1": {identifyCount: 4}}, nil, "p1", "", 4, 10); w != nil {
		t.Errorf("no kernel counters: %+v", w)
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// parsePage is a /metrics page's series, or the test's end.
func parsePage(t *testing.T, text string) map[string]float64 {
	t.Helper()
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReadSched: this process's threads have run (and ReadScheds skips
// a process it cannot read).
func TestReadSched(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	s, ok := ReadSched(os.Getpid())
	if !ok {
		t.Skip("no schedstat in this kernel")
	}
	if s.CPU <= 0 || s.RunQueue < 0 {
		t.Fatalf("%+v", s)
	}
	got := ReadScheds(map[string]int{"me": os.Getpid(), "none": 0})
	if _, ok := got["none"]; ok || len(got) != 1 {
		t.Fatalf("%v", got)
	}
	d := SchedDelta(map[string]Sched{"me": {CPU: s.CPU + time.Hour}}, got)
	if len(d) != 0 {
		t.Errorf("counts that fell kept: %v", d)
	}
}

// TestLoadedFrom: the clients' run's queries per pass are every holder's
// together, the CPU means are per identify, the decider's is its own and
// the servers' excludes the client; a mode that counts no passes leaves
// them out.
func TestLoadedFrom(t *testing.T) {
	page := func(text string) map[string]float64 { return parsePage(t, text) }
	holder := func(score, permute, passes, passed float64) map[string]float64 {
		return page(strings.Join([]string{
			"idface_repl_score_seconds_total " + ftoa(score),
			"idface_repl_permute_seconds_total " + ftoa(permute),
			"idface_repl_passes_total 3",
			"idface_repl_passed_total 3",
			"idface_repl_scans_total " + ftoa(passes),
			"idface_repl_scanned_total " + ftoa(passed),
		}, "\n") + "\n")
	}
	before := Scrape{"p1": holder(0, 0, 0, 0), "p2": holder(1, 1, 10, 10), "K": page("x 1\n")}
	// 8 identifies: p1 passed 2 times over 8 queries, p2 4 times over 8.
	after := Scrape{"p1": holder(0.008, 0.004, 2, 8), "p2": holder(1.008, 1.004, 14, 18), "K": page("x 1\n")}
	sched := map[string]Sched{
		"p1": {CPU: 16 * time.Millisecond}, "p2": {CPU: 32 * time.Millisecond}, "K": {CPU: 8 * time.Millisecond},
		ClientProcess: {CPU: 800 * time.Millisecond},
	}
	l := LoadedFrom(before, after, sched, "K", 8)
	for _, c := range []struct {
		name string
		got  *float64
		want float64
	}{
		{"queries per pass", l.QueriesPerPass, 16.0 / 6}, {"holder score", l.HolderScoreMs, 1}, {"holder permute", l.HolderPermuteMs, 0.5},
		{"holder cpu", l.HolderCPUMs, 3}, {"decider cpu", l.DeciderCPUMs, 1}, {"server cpu", l.ServerCPUMs, 7},
	} {
		if c.got == nil || math.Abs(*c.got-c.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	none := Scrape{"p1": page("idface_repl_score_seconds_total 1\n")}
	if l := LoadedFrom(none, none, nil, "", 8); l.QueriesPerPass != nil {
		t.Errorf("queries per pass %v from holders that count no passes", *l.QueriesPerPass)
	}
	if LoadedFrom(before, after, sched, "K", 0) != nil {
		t.Error("a Loaded of 0 identifies")
	}
}
