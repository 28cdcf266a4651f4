package blind_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/blind"
	"github.com/idface/idface/protocol"
)

// TestMergedPasses: concurrent identifies, through both entries, share
// passes over each holder's shares (the holders are held while they
// arrive, so that they gather), and every answer equals the same
// identify run alone: the same scores in the same order, the same ids
// where untied, the same decision, for rings of 8 and 16 bits and top K
// from 1 to every row.
func TestMergedPasses(t *testing.T) {
	for _, c := range []struct {
		mu      int
		gallery string
		beta    int
		bits    int
	}{{2, "", 21, 8}, {3, "4:20,20,20,25", 63, 16}} {
		t.Run(fmt.Sprintf("mu=%d/gallery=%s/k=%d", c.mu, c.gallery, c.bits), func(t *testing.T) {
			cl := start(t, c.mu, config.Literal{GalleryLevels: c.gallery, Beta: c.beta, RevealScores: true, BatchMax: 4})
			if got := cl.P.Ring().Bits; got != c.bits {
				t.Fatalf("ring of %d bits, want %d", got, c.bits)
			}
			xs := templates(300, 61)
			if err := cl.Client("client", "").Enroll(ctx(t), items(xs, "r")); err != nil {
				t.Fatal(err)
			}
			if err := cl.Client("client", "").Delete(ctx(t), "r-3"); err != nil {
				t.Fatal(err)
			}
			cl.WaitSettled()
			const n = 12
			probes := templates(n, 62)
			probes[0], probes[5] = xs[7], xs[3] // a genuine probe, and one of a deleted row
			topK := func(i int) int { return []int{1, 5, 300}[i%3] }
			entry := func(i int) string { return cl.P.Party(i % c.mu).Name }
			var before [2]float64
			for k := range c.mu {
				p, q := blind.Passes(cl.Engine(cl.P.Party(k).Name))
				before[0], before[1] = before[0]+p, before[1]+q
			}
			var releases []func()
			for k := range c.mu {
				releases = append(releases, blind.Hold(cl.Engine(cl.P.Party(k).Name)))
			}
			merged := make([]*protocol.IdentifyOK, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { merged[i], errs[i] = cl.Client("client", entry(i)).Identify(ctx(t), probes[i], topK(i)) })
			}
			time.Sleep(300 * time.Millisecond) // the identifies reach their entries and wait for a pass
			for _, r := range releases {
				r()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			var after [2]float64
			for k := range c.mu {
				p, q := blind.Passes(cl.Engine(cl.P.Party(k).Name))
				after[0], after[1] = after[0]+p, after[1]+q
			}
			passes, queries := after[0]-before[0]-float64(c.mu), after[1]-before[1]-float64(c.mu) // less the holds' passes
			if queries != n*float64(c.mu) || passes >= queries {
				t.Fatalf("%v queries scored in %v passes over %d holders: want %d queries, in fewer passes", queries, passes, c.mu, n*c.mu)
			}
			t.Logf("%v queries in %v passes", queries, passes)
			deleted := map[int]bool{3: true}
			for i := range n {
				alone, err := cl.Client("client", entry(i)).Identify(ctx(t), probes[i], topK(i))
				if err != nil {
					t.Fatal(err)
				}
				inproc.SameAnswer(t, cl.P, plain(t, cl.P, xs, probes[i]), deleted, merged[i], alone)
				if want := min(topK(i), len(xs)-1); len(alone.Candidates) != want {
					t.Fatalf("probe %d: %d candidates, want %d", i, len(alone.Candidates), want)
				}
			}
			if !merged[0].Accepted || merged[0].Candidates[0].ID != "r-7" {
				t.Fatalf("the genuine probe: %+v", merged[0])
			}
			for k := range c.mu {
				if err := blind.CheckMergedPass(cl.Engine(cl.P.Party(k).Name)); err != nil {
					t.Fatalf("%s: %v", cl.P.Party(k).Name, err)
				}
			}
		})
	}
}

// TestHelperRaceRunsAgain (from a review): a helper's query that matched
// the entry's rows when it arrived waits behind other passes while an
// enrollment commits; at its pass the rows have moved on and it is
// refused, and the entry runs the query again under a fresh id, so the
// identify is answered.
func TestHelperRaceRunsAgain(t *testing.T) {
	cl := start(t, 2, config.Literal{Beta: 21, BatchMax: 1})
	xs := templates(50, 61)
	if err := cl.Client("client", "").Enroll(ctx(t), items(xs, "r")); err != nil {
		t.Fatal(err)
	}
	cl.WaitSettled()
	entry, helper := cl.P.Party(0).Name, cl.P.Party(1).Name
	he := cl.Engine(helper)
	releaseA := blind.Hold(he)                 // a pass of other queries, running
	bStarted, releaseB := blind.HoldQueued(he) // the next one, queued
	time.Sleep(50 * time.Millisecond)
	cStarted, releaseC := blind.HoldQueued(he)
	time.Sleep(50 * time.Millisecond)
	var idErr, enErr error
	done, enDone := make(chan struct{}), make(chan struct{})
	go func() {
		_, idErr = cl.Client("client", entry).Identify(ctx(t), xs[3], 1)
		close(done)
	}()
	time.Sleep(300 * time.Millisecond) // the helper matched the digest and queued behind B
	go func() {
		enErr = cl.Client("client", "").Enroll(ctx(t), items(templates(1, 99), "n"))
		close(enDone)
	}()
	time.Sleep(300 * time.Millisecond)
	releaseA()
	<-bStarted
	time.Sleep(300 * time.Millisecond) // the enrollment commits at the helper while B runs
	releaseB()
	<-cStarted
	time.Sleep(300 * time.Millisecond)
	releaseC()
	<-done
	<-enDone
	if enErr != nil {
		t.Fatal(enErr)
	}
	if idErr != nil {
		t.Fatalf("identify refused: %v", idErr)
	}
}

// TestAbandonedQueriesDropped: identifies whose clients gave up while
// they waited for a pass are not scored (the server ends a request's
// context when its requester stops reading), and never reach a helper.
func TestAbandonedQueriesDropped(t *testing.T) {
	cl := start(t, 2, config.Literal{Beta: 21})
	xs := templates(40, 63)
	if err := cl.Client("client", "").Enroll(ctx(t), items(xs, "r")); err != nil {
		t.Fatal(err)
	}
	cl.WaitSettled()
	entry, helper := cl.P.Party(0).Name, cl.P.Party(1).Name
	_, e0 := blind.Passes(cl.Engine(entry))
	_, h0 := blind.Passes(cl.Engine(helper))
	release := blind.Hold(cl.Engine(entry))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx(t), 150*time.Millisecond)
			defer cancel()
			if _, err := cl.Client("client", entry).Identify(c, xs[i], 1); err == nil {
				t.Error("an identify answered while its entry was held")
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // the entry hears its requesters stopped reading
	release()
	r, err := cl.Client("client", entry).Identify(ctx(t), xs[5], 1)
	if err != nil || !r.Accepted || r.Candidates[0].ID != "r-5" {
		t.Fatalf("after the abandoned ones: %v %+v", err, r)
	}
	_, e1 := blind.Passes(cl.Engine(entry))
	_, h1 := blind.Passes(cl.Engine(helper))
	if e1-e0 != 2 || h1-h0 != 1 { // the hold's and the last identify's; the last one's
		t.Fatalf("the entry scored %v queries and the helper %v: want 2 and 1 (the abandoned ones dropped)", e1-e0, h1-h0)
	}
}
