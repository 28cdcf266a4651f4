package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// TestDefaultCalibrationTable measures every default of the table again
// (measureDefaultCalibration, the code of 'idface calibrate') and
// compares: the table is a cache of that measurement, never a number
// chosen by hand. On a change, paste the line it prints.
func TestDefaultCalibrationTable(t *testing.T) {
	for key, want := range defaultCalTable {
		var d int
		var g, q string
		if _, err := fmt.Sscanf(key, "%d %s %s", &d, &g, &q); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		gl, gerr := template.ParseLevels(g)
		ql, qerr := template.ParseLevels(q)
		if gerr != nil || qerr != nil {
			t.Fatalf("key %q: %v %v", key, gerr, qerr)
		}
		lp := experiments.LevelPair{Gallery: gl, Query: ql}
		if got := defaultCalKey(d, lp); got != key {
			t.Fatalf("key %q is written %q", key, got)
		}
		got, err := measureDefaultCalibration(d, lp)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q: table %+v, measured now:\n\t%q: {Tau: %v, Threshold: %d, FPIR: %v, TPIR: %v},", key, want, key, got.Tau, got.Threshold, got.FPIR, got.TPIR)
		}
	}
}

// TestDefaultThresholdFindsPeople (issue 47 item 2): a blind cluster made
// by 'cluster init' without --calibration or --tau, with 1,000 people of
// 'idface synth --people 1000 --samples 2' enrolled by their sample 0,
// finds them by their sample 1 and accepts almost none of 1,000 strangers
// ('--seed 3'). With the bare default tau 0.3 it found 446 of them.
func TestDefaultThresholdFindsPeople(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := idface("cluster", "init", "--cluster", dir, "--mode", "blind", "--parties", "2"); code != 0 {
		t.Fatal(errs)
	}
	p, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := inproc.Start(t, inproc.Literal(p.Literal(), 2))
	const n = 1000
	people, err := experiments.NewSynthetic(n, 2, p.Dim(), 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	strangers, err := experiments.NewSynthetic(n, 1, p.Dim(), 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]protocol.Item, n)
	for i := range items {
		items[i] = protocol.Item{ID: fmt.Sprintf("person-%d", i), Template: people.Samples[2*i]}
	}
	ctx := inproc.Ctx(t, 5*time.Minute)
	cl := c.Client("client", "")
	if err := cl.Enroll(ctx, items); err != nil {
		t.Fatal(err)
	}
	accepted := func(probes func(i int) []float32, want func(i int) string) (int, int) {
		var right, any atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				ok, err := cl.Identify(ctx, probes(i), 1)
				if err != nil {
					errs <- err
					return
				}
				if ok.Accepted {
					any.Add(1)
					if len(ok.Candidates) > 0 && ok.Candidates[0].ID == want(i) {
						right.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return int(right.Load()), int(any.Load())
	}
	found, _ := accepted(func(i int) []float32 { return people.Samples[2*i+1] }, func(i int) string { return items[i].ID })
	_, wrong := accepted(func(i int) []float32 { return strangers.Samples[i] }, func(int) string { return "" })
	t.Logf("tau %.4f (score >= %d): %d of %d enrolled people found, %d of %d strangers accepted", p.Tau(), p.Threshold(), found, n, wrong, n)
	if found < 990 || wrong > 5 {
		t.Errorf("the default threshold found %d of %d enrolled people (want at least 990) and accepted %d of %d strangers (want at most 5)", found, n, wrong, n)
	}
}
