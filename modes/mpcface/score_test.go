package mpcface

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/sharing"
)

// TestScoreBlockAnyWorkers (issue 16 item 6): a block scored by any number
// of scorers, including more scorers than words, gives the top k of one
// scorer over the whole block: the seam for a party whose rows are spread
// over shards or cores.
func TestScoreBlockAnyWorkers(t *testing.T) {
	const beta, k, words, parties = 8, 7, 37, 2
	r := rand.New(rand.NewPCG(3, 4))
	cols := make([][][]uint64, parties)
	for p := range cols {
		cols[p] = make([][]uint64, 2*beta)
		for i := range cols[p] {
			cols[p][i] = make([]uint64, words)
			for w := range cols[p][i] {
				cols[p][i][w] = r.Uint64()
			}
		}
	}
	live := make([]uint64, words)
	for w := range live {
		live[w] = r.Uint64() | r.Uint64() // most rows live
	}
	score := func(n int) []sharing.Match {
		sc := make([]*sharing.Scorer, n)
		for i := range sc {
			var err error
			if sc[i], err = sharing.NewScorer(beta, k, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := scoreBlock(sc, cols, 5, live); err != nil {
			t.Fatal(err)
		}
		parts := make([][]sharing.Match, n)
		for i := range sc {
			parts[i] = sc[i].Result()
		}
		return sharing.Merge(k, parts...)
	}
	want := score(1)
	if len(want) != k {
		t.Fatalf("one scorer found %d matches, want %d", len(want), k)
	}
	for _, n := range []int{2, 3, 5, 8, words, words + 4} {
		if got := score(n); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%d scorers: %v, one scorer: %v", n, got, want)
		}
	}
}
