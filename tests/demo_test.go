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
	for _, want := range []string{"genuine queries", "correctly identified", "impostor queries", "latency p50", "cluster stopped and removed", "next steps:", "idface demo --mode blind", "README \"Using it\""} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`correctly identified\s+([0-9.]+)%`).FindStringSubmatch(out)
	if v, _ := strconv.ParseFloat(m[1], 64); v < 95 {
		t.Fatalf("demo identified only %v%% of genuine queries:\n%s", v, out)
	}
}

// TestDemoModes runs the demo in blind mode and in HE mode over Paillier,
// smaller: the same summary, the genuine queries identified.
func TestDemoModes(t *testing.T) {
	for _, args := range [][]string{{"--mode", "blind"}, {"--mode", "he", "--scheme", "paillier"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := must(t, append([]string{"demo", "--people", "60", "--seed", "7"}, args...)...)
			m := regexp.MustCompile(`correctly identified\s+([0-9.]+)%`).FindStringSubmatch(out)
			if m == nil || !strings.Contains(out, "cluster stopped and removed") {
				t.Fatalf("demo output:\n%s", out)
			}
			if v, _ := strconv.ParseFloat(m[1], 64); v < 90 {
				t.Fatalf("demo identified only %v%% of genuine queries:\n%s", v, out)
			}
		})
	}
}
