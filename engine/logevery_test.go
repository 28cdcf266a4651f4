package engine

import (
	"testing"
	"time"
)

// TestLogEvery: the first event of a key is logged, the next ones within
// the interval are held back and counted, each key on its own; once the
// interval has passed the next is logged with the count.
func TestLogEvery(t *testing.T) {
	l := LogEvery{Every: time.Hour}
	if n, ok := l.Due("a"); !ok || n != 1 {
		t.Fatalf("first event: %d %v", n, ok)
	}
	for range 5 {
		if _, ok := l.Due("a"); ok {
			t.Fatal("an event within the interval was let through")
		}
	}
	if n, ok := l.Due("b"); !ok || n != 1 {
		t.Fatalf("another key's first event: %d %v", n, ok)
	}
	l.Every = time.Nanosecond
	time.Sleep(time.Millisecond)
	if n, ok := l.Due("a"); !ok || n != 6 {
		t.Fatalf("after the interval: %d %v, want the 5 held back and this one", n, ok)
	}
	var zero LogEvery // every 10 s
	zero.Due("x")
	if _, ok := zero.Due("x"); ok {
		t.Fatal("the zero value let a second event through at once")
	}
}
