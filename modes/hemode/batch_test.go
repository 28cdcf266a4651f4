package hemode_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/modes/hemode"
)

// TestMergedPasses: concurrent identifies at a local server share one
// pass over its groups (the server is held while they arrive, so that
// they gather), and each answers exactly the plaintext's best rows, as it
// does alone; with two local servers, through each.
func TestMergedPasses(t *testing.T) {
	for _, mu := range []int{1, 2} {
		t.Run(fmt.Sprintf("local_servers=%d", mu), func(t *testing.T) {
			c := start(t, mu)
			xs := templates(120, 7)
			ids := make([]string, len(xs))
			for i := range ids {
				ids[i] = fmt.Sprintf("r-%d", i)
			}
			if err := c.Client("client", c.P.Party(mu-1).Name).Enroll(ctx(t), items(xs, "r")); err != nil {
				t.Fatal(err)
			}
			agree(t, c)
			const n = 6
			probes := templates(n, 8)
			probes[0], probes[2], probes[3], probes[5] = xs[9], xs[40], xs[77], xs[101] // genuine probes, and two strangers
			topK := func(i int) int { return []int{1, 3}[i%2] }
			entry := c.P.Party(0).Name
			e := c.Engine(entry)
			p0, q0 := hemode.Passes(e)
			release := hemode.Hold(e)
			got := make([][]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					r, err := c.Client("device", entry).Identify(ctx(t), probes[i], topK(i))
					if errs[i] = err; err == nil {
						for _, cd := range r.Candidates {
							got[i] = append(got[i], cd.ID)
						}
					}
				})
			}
			time.Sleep(300 * time.Millisecond) // the identifies reach the local server and wait for a pass
			release()
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			p1, q1 := hemode.Passes(e)
			passes, identifies := p1-p0-1, q1-q0-1 // less the hold's
			if identifies != n || passes >= n {
				t.Fatalf("%v identifies summed in %v passes, want %d in fewer", identifies, passes, n)
			}
			t.Logf("%v identifies in %v passes", identifies, passes)
			for i := range n {
				want := best(t, c.P, xs, ids, probes[i], topK(i))
				r, err := c.Client("device", c.P.Party(i%mu).Name).Identify(ctx(t), probes[i], topK(i)) // alone
				if err != nil {
					t.Fatal(err)
				}
				var alone []string
				for _, cd := range r.Candidates {
					alone = append(alone, cd.ID)
				}
				if !slices.Equal(got[i], want) || !slices.Equal(alone, want) {
					t.Fatalf("probe %d: merged %v, alone %v, plaintext %v", i, got[i], alone, want)
				}
			}
			for i, id := range map[int]string{0: "r-9", 2: "r-40", 3: "r-77", 5: "r-101"} {
				if len(got[i]) == 0 || got[i][0] != id {
					t.Fatalf("genuine probe %d: %v, want %s first", i, got[i], id)
				}
			}
			if err := hemode.CheckSumGroup(e); err != nil {
				t.Fatal(err)
			}
		})
	}
}
