package txnbase

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idface/idface/internal/codec/rowmap"
)

// TestPage: a row map's pages list its live ids once each in byte order
// (a deleted slot's id only where it is live again), whatever the
// segments and the page size.
func TestPage(t *testing.T) {
	m := NewRowMap([16]byte{1}, 3)
	r := rand.New(rand.NewPCG(1, 2))
	live := map[string]bool{}
	for i := range 500 {
		seg, id := r.IntN(3), fmt.Sprintf("id-%d", r.IntN(300))
		if live[id] {
			ref, _ := m.Lookup(id)
			m.Remove(ref, id)
			delete(live, id)
			continue
		}
		m.Reserve(seg, id)
		if i%7 != 0 { // a reserved slot not committed stays out
			m.Commit(rowmap.Ref{Seg: seg, Seq: m.Len(seg) - 1})
			live[id] = true
		}
	}
	var want []string
	for id := range live {
		want = append(want, id)
	}
	slices.Sort(want)
	for _, limit := range []int{1, 3, 10, 1000} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			var got []string
			after := ""
			for {
				ids, more := m.Page(after, limit)
				got = append(got, ids...)
				if !more {
					break
				}
				if len(ids) != limit {
					t.Fatalf("a page of %d with more after it", len(ids))
				}
				after = ids[len(ids)-1]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("listed %d ids, want %d: %q", len(got), len(want), got)
			}
			for _, id := range []string{"id-1", "id-2", "nobody"} {
				if m.Has(id) != live[id] {
					t.Errorf("Has(%q) = %v", id, !live[id])
				}
			}
		})
	}
}
