package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/idface/idface/internal/harness/testutil"

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
