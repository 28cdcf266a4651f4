//go:build !race

// The race detector slows lattigo's encryption some fifty times: one HE
// batch then takes minutes and the host's stalls reach seconds, so this
// test runs without it (.ci/run runs it on its own; the HE shard tests of
// modes/hemode run with it beside busy loops).

package inproc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

// busyLoops starts n processes that spin until the test ends: the load of
// a shared CI host.
func busyLoops(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Skipf("no shell to load the host with: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// loadRows is how many rows TestEnrollUnderLoad enrolls (IDFACE_LOAD_ROWS
// overrides it).
func loadRows(t *testing.T) int {
	if s := os.Getenv("IDFACE_LOAD_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			t.Fatalf("IDFACE_LOAD_ROWS=%q: give a row count of at least 100", s)
		}
		return n
	}
	return 100_000
}

// TestEnrollUnderLoad: slow is not down. Beside four busy loops (twice as
// many spinning processes as this host may have cores), a bulk enrollment
// of 10^5 rows into an HE cluster of three shards and into a replicated
// cluster commits every batch, with a request timeout far below what one
// batch takes on a loaded host: the servers report progress while they
// work (protocol.Working), so neither the client nor the sequencer takes
// a slow peer for a dead one and rolls a change back. Then every
// enrolled row checked is found among the best by its own template (at
// d = 64 other rows may tie with it).
func TestEnrollUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("enrolls 10^5 rows twice")
	}
	const dim = 64
	n := loadRows(t)
	tau := 0.25
	for _, tc := range []struct {
		name string
		lit  config.Literal
		mu   int
	}{
		{"he/shards=3", config.Literal{Mode: config.ModeHE, Dim: dim, Beta: 16, Tau: &tau, Shards: 3}, 2},
		{"replicated", config.Literal{Mode: config.ModeReplicated, Dim: dim, Tau: &tau}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 3 * time.Second
			tc.lit.Timeout = config.Duration(timeout)
			c := inproc.Start(t, inproc.Literal(tc.lit, tc.mu))
			busyLoops(t, 4)
			item := func(i int) protocol.Item {
				r := rand.New(rand.NewPCG(uint64(i), 0x10ad))
				x := make([]float32, dim)
				for j := range x {
					x[j] = float32(r.NormFloat64())
				}
				return protocol.Item{ID: fmt.Sprintf("r-%d", i), Template: x}
			}
			start := time.Now()
			done, err := c.Client("client", "p1").EnrollAll(context.Background(), n, item, client.Bulk{Batch: c.P.MaxEnrollBatch(), Timeout: timeout})
			t.Logf("%d rows in %v (request timeout %v)", done, time.Since(start).Round(time.Millisecond), timeout)
			if err != nil || done != n {
				t.Fatalf("enrolled %d of %d beside busy loops: %v", done, n, err)
			}
			cl := c.Client("device", "p2")
			for _, i := range []int{0, n / 3, n - 1} {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				a, err := cl.Identify(ctx, item(i).Template, 10)
				cancel()
				if err != nil || !a.Accepted || !slices.ContainsFunc(a.Candidates, func(c protocol.Candidate) bool { return c.ID == item(i).ID }) {
					t.Fatalf("row %d: %+v, %v", i, a, err)
				}
			}
		})
	}
}
