package merge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/protocol"
)

// TestMergeRanks: every shard's scores ranked in one list, best first,
// the top K kept; equal scores of two shards take both orders over many
// merges; shards that disagree on K are refused.
func TestMergeRanks(t *testing.T) {
	part := func(topK int, scores ...int32) *protocol.DecideMerge {
		return &protocol.DecideMerge{TopK: uint16(topK), Scores: scores}
	}
	const no = protocol.NoRank
	for _, c := range []struct {
		parts []*protocol.DecideMerge
		want  [][]uint16
	}{
		{[]*protocol.DecideMerge{part(3, 9, 4), part(3, 7, 5, 1)}, [][]uint16{{0, no}, {1, 2, no}}},
		{[]*protocol.DecideMerge{part(5, 9, 4), part(5), part(5, 7)}, [][]uint16{{0, 2}, {}, {1}}},
		{[]*protocol.DecideMerge{part(1, 3), part(1, 8)}, [][]uint16{{no}, {0}}},
	} {
		got, err := mergeRanks(c.parts)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("%v: ranks %v, %v; want %v", c.parts, got, err, c.want)
		}
	}
	first := map[uint16]bool{}
	for range 64 {
		got, err := mergeRanks([]*protocol.DecideMerge{part(1, 5), part(1, 5)})
		if err != nil || slices.Contains(got[0], 0) == slices.Contains(got[1], 0) {
			t.Fatalf("a tie: ranks %v, %v; want one of the two first", got, err)
		}
		first[got[0][0]] = true
	}
	if len(first) != 2 {
		t.Fatalf("a tie between two shards came in one order 64 times")
	}
	if _, err := mergeRanks([]*protocol.DecideMerge{part(1, 5), part(2, 5)}); err == nil {
		t.Fatal("shards that disagree on top K merged")
	}
}

func name(k int) string { return fmt.Sprintf("p%d", k+1) }

// TestTable: a query completes with every holder's part, the entry's
// among them, and its waiter gets the answer; a part that contradicts the
// others fails it; a holder alone fills at most half the table; queries
// whose parts do not all come expire.
func TestTable(t *testing.T) {
	ctx := context.Background()
	tb := NewTable[int, string](2, time.Minute, name)
	id := [16]byte{1}
	q, perr := tb.Join(id, 10, 1, 100, -1, 0, 0)
	if perr != nil || tb.Add(q, 1, 11) {
		t.Fatalf("a helper's part: %v, or complete alone", perr)
	}
	if q2, perr := tb.Join(id, 10, 0, 100, 0, 5, 0); perr != nil || q2 != q || !tb.Add(q, 0, 10) {
		t.Fatalf("the entry's part: %v, or not complete", perr)
	}
	if q.TopK != 5 || q.Entry != 0 || !slices.Equal(q.Parts, []int{10, 11}) {
		t.Fatalf("query top %d, entry %d, parts %v", q.TopK, q.Entry, q.Parts)
	}
	tb.Finish(q, "answer", nil)
	if res, perr := tb.Wait(ctx, q); perr != nil || res != "answer" || tb.Len() != 0 {
		t.Fatalf("wait: %q, %v; %d pending", res, perr, tb.Len())
	}

	// Two holders that disagree on the rows: the query fails.
	q, _ = tb.Join([16]byte{2}, 10, 0, 1, 0, 1, 0)
	if _, perr := tb.Join([16]byte{2}, 11, 1, 1, -1, 0, 0); perr == nil || perr.Code != protocol.CodeBadRequest {
		t.Fatalf("rows that differ: %v", perr)
	}
	if _, perr := tb.Wait(ctx, q); perr == nil || !strings.Contains(perr.Msg, "row maps differ") || tb.Len() != 0 {
		t.Fatalf("the failed query's wait: %v; %d pending", perr, tb.Len())
	}

	// One holder alone: at most MaxQueries/2 orphans, named in the refusal.
	n := 0
	for i := range MaxQueries {
		if _, perr = tb.Join([16]byte{3, byte(i)}, 10, 1, 1, -1, 0, 0); perr != nil {
			break
		}
		n++
	}
	if n != MaxQueries/2 || perr == nil || perr.Code != protocol.CodeUnavailable || !strings.Contains(perr.Msg, "p2") {
		t.Fatalf("%d orphans taken, then %v", n, perr)
	}
	// The other holder's queries fill the rest, then the table is full.
	for i := range MaxQueries - n {
		if _, perr := tb.Join([16]byte{4, byte(i)}, 10, 0, 1, 0, 1, 0); perr != nil {
			t.Fatalf("query %d of p1: %v", i, perr)
		}
	}
	if _, perr := tb.Join([16]byte{5}, 10, 0, 1, 0, 1, 0); perr == nil || perr.Code != protocol.CodeUnavailable || !strings.Contains(perr.Msg, "the decider holds") {
		t.Fatalf("a full table: %v", perr)
	}
	tb.Expire(time.Now().Add(time.Second))
	if tb.Len() != 0 {
		t.Fatalf("%d queries left after they expired", tb.Len())
	}
}
