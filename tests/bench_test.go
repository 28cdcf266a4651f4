package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/idface/idface/internal/testutil"

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
	}{{"2pc", 2, 63}, {"mpc", 3, 63}, {"blind", 2, 63}, {"he", 1, 63}, {"he", 1, 341}} {
		b.Run(fmt.Sprintf("mode=%s/mu=%d/rows=%d/beta=%d", c.mode, c.parties, rows, c.beta), func(b *testing.B) {
			res, err := experiments.RunClusterBench(context.Background(), experiments.BenchOptions{
				Exe: idfaceBin, Mode: c.mode, Parties: c.parties, Beta: c.beta, IDs: rows, Queries: max(b.N, 15), Seed: 1,
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
		})
	}
}
