package inproc_test

import (
	"context"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/harness/testutil"
	"github.com/idface/idface/protocol"
)

// BenchmarkHiddenIdentify is one hidden probe at a time through a whole
// replicated cluster in this process (memory network: no QUIC), at d =
// 512 with the hidden-probe defaults (k = 16), over IDFACE_BENCH_ROWS
// rows (default 10^6; 10^5 is enough for a profile of where the time
// beside the dense kernel goes: IDFACE_BENCH_CPUPROFILE=cpu.out profiles
// the identifies alone, not the enrollment). IDFACE_BENCH_BETA=63 takes
// the ternary forms at k = 8 instead; IDFACE_BENCH_CLIENTS=8 identifies
// from that many clients at once (the holders' batched passes).
func BenchmarkHiddenIdentify(b *testing.B) {
	n := testutil.BenchRows(b)
	beta, clients := envInt(b, "IDFACE_BENCH_BETA", 0), envInt(b, "IDFACE_BENCH_CLIENTS", 1)
	lit := inproc.Literal(config.Literal{Mode: config.ModeReplicated, Dim: 512, HideProbes: true, Beta: beta, Timeout: config.Duration(time.Minute)}, 3)
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
	scans, scanned := counter(b, c, "idface_repl_scans_total"), counter(b, c, "idface_repl_scanned_total")
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := next.Add(1); q <= int64(b.N); q = next.Add(1) {
				if _, err := cl.Identify(context.Background(), xs[n+int(q%8)], 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(first.Milliseconds()), "first-ms")
	b.ReportMetric((counter(b, c, "idface_repl_scanned_total")-scanned)/(counter(b, c, "idface_repl_scans_total")-scans), "probes/pass")
}

// counter is the value of a counter of p2's metrics.
func counter(b *testing.B, c *inproc.Cluster, name string) float64 {
	for line := range strings.Lines(c.Metrics("p2")) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatalf("p2 has no metric %s", name)
	return 0
}

// envInt is the integer in the environment variable name, or def.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		b.Fatalf("%s=%q: want a whole number", name, s)
	}
	return v
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
