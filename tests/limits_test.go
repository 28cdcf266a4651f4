package tests

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/protocol"
)

// TestStreamFlood: one client opens 10,000 streams that each announce a
// request and then stall (a slow-loris). The party holds at most its
// per-peer budget of them, refuses the rest at once, and keeps serving
// another client; its memory stays bounded. (In 0d4c0ae streams and
// concurrent requests per peer were unlimited.)
func TestStreamFlood(t *testing.T) {
	dir, cfg := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 30, 9)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:1])
	pid, _ := cluster.Running(cfg, "p1")
	rssBefore := rss(t, pid)

	flood := dialAs(t, cfg, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var refused, opened atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2000)
	for range 10000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s, err := flood.Open(ctx, "p1")
			if err != nil {
				return
			}
			opened.Add(1)
			defer s.Finish()
			s.SetDeadline(time.Now().Add(3 * time.Second))
			// A header announcing an identify, then a stall.
			s.Write(append(binary.BigEndian.AppendUint32(nil, 1000), protocol.Version, byte(protocol.TIdentify)))
			b, err := s.ReadFrame(1 << 16)
			if err == nil && strings.Contains(string(b), "limit") {
				refused.Add(1)
			}
		})
	}
	// Meanwhile another client is served.
	time.Sleep(time.Second)
	t0 := time.Now()
	must(t, "identify", "--cluster", dir, "--client", "device", "--templates", q)
	served := time.Since(t0)
	wg.Wait()
	if refused.Load() < opened.Load()/2 {
		t.Fatalf("%d of %d stalled streams were refused; the per-peer budget is 64", refused.Load(), opened.Load())
	}
	if served > 20*time.Second {
		t.Fatalf("another client waited %v during the flood", served)
	}
	if grew := rss(t, pid) - rssBefore; grew > 200 {
		t.Fatalf("the party's memory grew by %.0f MB during the flood", grew)
	}
	t.Logf("%d streams opened, %d refused at once; another client served in %v", opened.Load(), refused.Load(), served.Round(time.Millisecond))
}

func rss(t *testing.T, pid int) float64 {
	t.Helper()
	return experiments.RSSMB(pid)
}
