package wan

import (
	"math"
	"testing"
	"time"

	"github.com/idface/idface/config"
)

func TestParseLink(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Link
		back string
	}{
		{"rtt=20ms,rate=1gbit", Link{20 * time.Millisecond, 1e9}, "rtt=20ms,rate=1gbit"},
		{"rate=100mbit, rtt=1ms", Link{time.Millisecond, 1e8}, "rtt=1ms,rate=100mbit"},
		{"rtt=50ms,rate=10Gbit", Link{50 * time.Millisecond, 1e10}, "rtt=50ms,rate=10gbit"},
		{"rtt=0s", Link{}, "rtt=0s"},
		{"rate=2.5gbit", Link{0, 25e8}, "rtt=0s,rate=2500mbit"},
	} {
		got, err := ParseLink(c.in)
		if err != nil || got != c.want || got.String() != c.back {
			t.Errorf("ParseLink(%q) = %+v %v (%q), want %+v (%q)", c.in, got, err, got.String(), c.want, c.back)
		}
	}
	for _, bad := range []string{"", "rtt", "rtt=20", "rtt=-1ms", "rtt=1h", "rate=fast", "rate=1gbps", "rate=0gbit",
		"rtt=1ms,rtt=2ms", "delay=1ms", "rtt=1ms,,rate=1gbit", "rate=1e400gbit"} {
		if l, err := ParseLink(bad); err == nil {
			t.Errorf("ParseLink(%q) = %+v, want an error", bad, l)
		}
	}
}

func TestIdentifyFloor(t *testing.T) {
	link := Link{RTT: 20 * time.Millisecond, Rate: 1e9}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for _, c := range []struct {
		mode  config.Mode
		mu    int
		bytes float64
		link  Link
		want  Floor
	}{
		// 2pc, 200,000 rows, beta 63: 3,150,128 bytes of blocks into the
		// entry: 20 ms + 25.2 ms.
		{config.Mode2PC, 2, 3150128, link, Floor{1, 3150128, 20 + 25.201024}},
		{config.ModeMPC, 3, 6300256, link, Floor{1, 6300256, 20 + 50.402048}},
		{config.ModeHE, 1, 1e6, link, Floor{1, 1e6, 28}},
		// Blind, 200,000 rows, k = 8: two shares of 200 KB. The helper's
		// starts half a round trip later and decides: 1.5 RTT + 1.6 ms.
		{config.ModeBlind, 2, 400000, link, Floor{1.5, 200000, 31.6}},
		// At 100 Mbit/s both shares queue at the decider's link: the
		// entry's share starts at RTT/2, both take 32 ms: RTT + 32 ms.
		{config.ModeBlind, 2, 400000, Link{20 * time.Millisecond, 1e8}, Floor{1, 400000, 52}},
		// No rate limit: round trips only.
		{config.Mode2PC, 2, 3150128, Link{RTT: 50 * time.Millisecond}, Floor{1, 3150128, 50}},
	} {
		got, err := IdentifyFloor(c.mode, c.mu, c.bytes, c.link)
		if err != nil || got.RTTs != c.want.RTTs || !near(got.Bytes, c.want.Bytes) || !near(got.Ms, c.want.Ms) {
			t.Errorf("%s mu=%d %v bytes over %v: %+v %v, want %+v", c.mode, c.mu, c.bytes, c.link, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		mode  config.Mode
		mu    int
		bytes float64
	}{{config.Mode2PC, 0, 1}, {config.Mode2PC, 2, -1}, {config.ModeBlind, 1, 1}, {"plain", 1, 1}} {
		if f, err := IdentifyFloor(bad.mode, bad.mu, bad.bytes, link); err == nil {
			t.Errorf("IdentifyFloor(%+v) = %+v, want an error", bad, f)
		}
	}
}
