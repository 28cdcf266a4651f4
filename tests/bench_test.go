package tests

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/idface/idface/harness/testutil"

	"github.com/idface/idface/experiments"
)

// BenchmarkCluster measures a real cluster of party processes: enrollment
// of IDFACE_BENCH_ROWS (default 1,000,000) templates and identification,
// next to the float32 brute-force search and the raw QUIC transfer of the
// same bytes, all in the same run. ns/op is one identify.
func BenchmarkCluster(b *testing.B) {
	rows := testutil.BenchRows(b)
	for _, c := range []struct {
		mode    string
		parties int
		beta    int
		hide    bool
		clients int
	}{{"2pc", 2, 63, false, 1}, {"mpc", 3, 63, false, 1}, {"blind", 2, 63, false, 1}, {"blind", 2, 63, false, 8},
		{"replicated", 3, 63, false, 1}, {"replicated", 3, 63, true, 1}, {"he", 1, 63, false, 1}, {"he", 1, 341, false, 1}} {
		name := fmt.Sprintf("mode=%s/mu=%d/rows=%d/beta=%d", c.mode, c.parties, rows, c.beta)
		if c.hide {
			name += "/hidden"
		}
		if c.clients > 1 {
			name += fmt.Sprintf("/clients=%d", c.clients)
		}
		b.Run(name, func(b *testing.B) {
			res, err := experiments.RunClusterBench(context.Background(), experiments.BenchOptions{
				Exe: idfaceBin, Mode: c.mode, Parties: c.parties, Beta: c.beta, IDs: rows, Queries: max(b.N, 15), Seed: 1,
				HideProbes: c.hide, Clients: c.clients,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.IdentifyP50*1e6, "ns/op")
			b.ReportMetric(res.IdentifyP50, "identify_ms_p50")
			b.ReportMetric(res.PlainFloatP50, "float_ms_p50")
			b.ReportMetric(res.WireFloorMs, "wire_ms")
			b.ReportMetric(res.EnrollS, "enroll_s")
			b.ReportMetric(res.BytesPerIdent/res.FormulaBytes, "bytes/formula")
			b.ReportMetric(res.RSSMBPerParty, "rss_MB")
			b.ReportMetric(res.ShareMB, "share_MB")
			if c.clients > 1 {
				b.ReportMetric(res.IdentifyPerS, "identify_per_s")
				b.ReportMetric(res.PlainFloatPerS, "plain_float_per_s")
			}
		})
	}
}

// TestBenchWhere: a blind bench run says where its single client's
// identifies went, from the servers' counters: every part is there, none
// is negative, and the parts fit in the client's time (tolerances for
// the different clocks only: nothing here depends on speed). A mode
// whose servers count no kernel time has no Where.
func TestBenchWhere(t *testing.T) {
	const n = 5
	res, err := experiments.RunClusterBench(context.Background(), experiments.BenchOptions{
		Exe: idfaceBin, Mode: "blind", Parties: 2, Dim: 128, Beta: 16, IDs: 2000, Queries: n, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Where
	if w == nil {
		t.Fatal("blind bench: no where")
	}
	if w.Identifies != n || w.Entry != "p1" || !(w.ClientMs > 0) {
		t.Fatalf("where: %d identifies through %q, client %v ms", w.Identifies, w.Entry, w.ClientMs)
	}
	// Differences of two clocks (the client's and the entry's, the
	// entry's request and its counters) may fall a little below zero.
	tol := 0.5 + 0.1*w.ClientMs
	for _, c := range []struct {
		name string
		v    *float64
		diff bool
	}{
		{"entry_ms", w.EntryMs, false}, {"client_side_ms", w.ClientSideMs, true}, {"entry_score_ms", w.EntryScoreMs, false},
		{"entry_permute_ms", w.EntryPermuteMs, false}, {"decider_wait_ms", w.DeciderWaitMs, false}, {"entry_other_ms", w.EntryOtherMs, true},
		{"helper_score_ms", w.HelperScoreMs, false}, {"helper_permute_ms", w.HelperPermuteMs, false}, {"helper_query_ms", w.HelperQueryMs, false},
		{"helpers_beyond_entry_ms", w.HelpersBeyondEntryMs, false}, {"decider_wait_rest_ms", w.DeciderWaitRestMs, true}, {"queries_per_pass", w.QueriesPerPass, false},
	} {
		switch {
		case c.v == nil:
			t.Errorf("where: no %s", c.name)
		case *c.v < 0 && !c.diff, *c.v < -tol:
			t.Errorf("where: %s = %v", c.name, *c.v)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if *w.QueriesPerPass < 1 {
		t.Errorf("%v queries per pass", *w.QueriesPerPass)
	}
	if parts := *w.EntryScoreMs + *w.EntryPermuteMs + *w.DeciderWaitMs; parts > *w.EntryMs+tol || *w.EntryMs > w.ClientMs+tol {
		t.Errorf("entry's score, permute and decider wait %v ms, its request %v, the client's %v", parts, *w.EntryMs, w.ClientMs)
	}
	if *w.HelperScoreMs+*w.HelperPermuteMs > *w.HelperQueryMs+tol {
		t.Errorf("helpers' kernels %v ms beyond their query requests' %v", *w.HelperScoreMs+*w.HelperPermuteMs, *w.HelperQueryMs)
	}
	if sum := *w.ClientSideMs + *w.EntryScoreMs + *w.EntryPermuteMs + *w.HelpersBeyondEntryMs + *w.DeciderWaitRestMs + *w.EntryOtherMs; sum > w.ClientMs+tol {
		t.Errorf("parts add up to %v ms, the client took %v", sum, w.ClientMs)
	}
	// Linux with schedstats: every process's time on a core.
	if _, err := os.Stat("/proc/self/schedstat"); err == nil {
		for name, v := range map[string]*float64{"client": w.ClientCPUMs, "entry": w.EntryCPUMs, "helper": w.HelperCPUMs, "decider": w.DeciderCPUMs,
			"entry run queue": w.EntryRunQueueMs} {
			if v == nil || *v < 0 {
				t.Errorf("where: %s's CPU %v", name, v)
			}
		}
	}

	res, err = experiments.RunClusterBench(context.Background(), experiments.BenchOptions{
		Exe: idfaceBin, Mode: "2pc", Parties: 2, Dim: 128, Beta: 16, IDs: 500, Queries: 2, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Where != nil {
		t.Errorf("2pc, whose servers count no kernel time: where %+v", res.Where)
	}
}
