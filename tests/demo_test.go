package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDemo runs the README's main command. With 700 people it sends more
// than 1,024 requests over one client connection and one party-to-party
// connection, which once exhausted quic-go's stream limit and hung.
func TestDemo(t *testing.T) {
	out := must(t, "demo", "--people", "700", "--seed", "5")
	for _, want := range []string{"genuine queries", "correctly identified", "impostor queries", "latency p50", "cluster stopped and removed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`correctly identified\s+([0-9.]+)%`).FindStringSubmatch(out)
	if v, _ := strconv.ParseFloat(m[1], 64); v < 95 {
		t.Fatalf("demo identified only %v%% of genuine queries:\n%s", v, out)
	}
}
