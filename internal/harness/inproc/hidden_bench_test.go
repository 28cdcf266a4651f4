package inproc_test

import (
	"context"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine/replicated"
	"github.com/idface/idface/internal/harness/inproc"
	"github.com/idface/idface/internal/harness/testutil"
	"github.com/idface/idface/protocol"
)

// BenchmarkHiddenIdentify is one hidden probe at a time through a whole
// replicated cluster in this process (memory network: no QUIC), at d =
// 512 with the hidden-probe defaults (k = 16), over IDFACE_BENCH_ROWS
// rows (default 10^6; 10^5 is enough for a profile of where the time
// beside the dense kernel goes: IDFACE_BENCH_CPUPROFILE=cpu.out profiles
// the identifies alone, not the enrollment).
func BenchmarkHiddenIdentify(b *testing.B) {
	n := testutil.BenchRows(b)
	lit := inproc.Literal(config.Literal{Mode: replicated.Mode, Dim: 512, HideProbes: true, Timeout: config.Duration(time.Minute)}, 3)
	c := inproc.Start(b, lit)
	xs := inproc.Templates(n+8, 512, 7)
	item := func(i int) protocol.Item { return protocol.Item{ID: "r-" + itoa(i), Template: xs[i]} }
	if _, err := c.Client("client", "p1").EnrollAll(context.Background(), n, item, client.Bulk{Batch: c.P.MaxEnrollBatch(), Timeout: time.Minute}); err != nil {
		b.Fatal(err)
	}
	cl := c.Client("device", "p1")
	// The first probe after an enrollment also builds each holder's
	// check sums (every row once); reported apart, not timed below.
	t0 := time.Now()
	if _, err := cl.Identify(context.Background(), xs[n], 1); err != nil {
		b.Fatal(err)
	}
	first := time.Since(t0)
	if path := os.Getenv("IDFACE_BENCH_CPUPROFILE"); path != "" { // identify alone, not the enrollment
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	b.ReportAllocs()
	b.ResetTimer()
	q := 0
	for b.Loop() {
		if _, err := cl.Identify(context.Background(), xs[n+q%8], 1); err != nil {
			b.Fatal(err)
		}
		q++
	}
	b.ReportMetric(float64(first.Milliseconds()), "first-ms")
}

func itoa(i int) string {
	var buf [20]byte
	at := len(buf)
	for {
		at--
		buf[at] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(buf[at:])
		}
	}
}
