package abis

import (
	"context"
	"errors"
	"testing"
)

// TestJobsCount: held requests and the broker's queue are counted once
// each, the asking request not at all; a browse that fails fails the
// count rather than answering a smaller one.
func TestJobsCount(t *testing.T) {
	var j jobs
	if n, err := j.count(context.Background()); err != nil || n != 0 {
		t.Fatalf("nothing held: %d, %v", n, err)
	}
	j.take("asking")
	j.take("a")
	j.take("b")
	j.done("b")
	if n, _ := j.count(context.Background()); n != 1 {
		t.Fatalf("a and the asking request held: %d, want 1", n)
	}
	queue := []string{"asking", "a", "c", "d", ""}
	j.serving(func(_ context.Context, skip func(string) bool) (int, error) {
		n := 0
		for _, id := range queue {
			if id == "" || !skip(id) {
				n++
			}
		}
		return n, nil
	})
	if n, _ := j.count(context.Background()); n != 4 {
		t.Fatalf("a held, c, d and one without an id queued: %d, want 4", n)
	}
	j.serving(func(context.Context, func(string) bool) (int, error) { return 0, errors.New("no end") })
	if _, err := j.count(context.Background()); err == nil {
		t.Fatal("a failed browse was counted")
	}
}
