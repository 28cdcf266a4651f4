package netlab

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Shape is a rate limit on a host's link, applied in both directions with
// a token bucket filter (tc tbf): what leaves the host and what the bridge
// delivers to it.
type Shape struct {
	// Rate in bits per second.
	Rate uint64
	// Burst is the bucket in bytes; default DefaultBurst(Rate). Bytes
	// beyond the bucket's worth of a late timer are tokens lost: a bucket
	// smaller than the rate times the qdisc watchdog's lateness delivers
	// less than Rate.
	Burst int
	// Latency bounds how long a packet waits in the queue before it is
	// dropped (the queue holds Rate*Latency+Burst bytes); default
	// DefaultLatency.
	Latency time.Duration
}

// DefaultLatency is the queue of a shaped link: 20 ms. A QUIC sender in
// slow start overshoots the path; a queue of 20 ms absorbs the overshoot
// at the round trips measured here (1 to 50 ms) instead of dropping it
// (every loss costs a round trip and halves the window), yet is short
// enough that a full queue does not dwarf the propagation delay, as a
// modern access link's buffer.
const DefaultLatency = 20 * time.Millisecond

// DefaultBurst is the bucket for a rate: 500 microseconds at that rate,
// at least 4 KiB (two full-size frames). tbf releases the queue from an
// hrtimer; on a shared machine the timer fires up to a few hundred
// microseconds late, and a bucket smaller than that lateness's worth of
// bytes loses tokens, so a 10 Gbit/s link would deliver well under 10
// Gbit/s. A larger bucket lets a burst leave at the veth's (unlimited)
// speed; 500 us bounds that error to 0.5 ms on any transfer, below the
// smallest round trip measured. 100 Mbit/s: 6.25 KB; 1 Gbit/s: 62.5 KB;
// 10 Gbit/s: 625 KB.
func DefaultBurst(rate uint64) int {
	return max(4<<10, int(rate/8/2000))
}

func (s Shape) withDefaults() Shape {
	if s.Burst == 0 {
		s.Burst = DefaultBurst(s.Rate)
	}
	if s.Latency == 0 {
		s.Latency = DefaultLatency
	}
	return s
}

// tbf is the qdisc's arguments after "root".
func (s Shape) tbf() []string {
	s = s.withDefaults()
	return []string{"tbf", "rate", fmt.Sprintf("%dbit", s.Rate), "burst", strconv.Itoa(s.Burst),
		"latency", fmt.Sprintf("%dus", s.Latency.Microseconds())}
}

// Shape limits the host's link to s.Rate each way (replacing an earlier
// limit). Links without a Shape run at the speed of the machine.
func (h *Host) Shape(s Shape) error {
	if s.Rate < 8000 {
		return fmt.Errorf("netlab: rate %d bit/s: want at least 8 kbit/s", s.Rate)
	}
	if s.Burst < 0 || s.Latency < 0 {
		return fmt.Errorf("netlab: burst %d and latency %v: want positive values (0: default)", s.Burst, s.Latency)
	}
	// Out of the host: eth0 inside its namespace. Into it: the bridge's
	// end of its veth pair, which sends towards the host.
	if err := run("tc", append([]string{"-n", h.NS, "qdisc", "replace", "dev", "eth0", "root"}, s.tbf()...)...); err != nil {
		return fmt.Errorf("netlab: shaping %s (is tc installed, with tbf?): %w", h.Name, err)
	}
	if err := run("tc", append([]string{"qdisc", "replace", "dev", h.outer, "root"}, s.tbf()...)...); err != nil {
		return fmt.Errorf("netlab: shaping %s: %w", h.Name, err)
	}
	return nil
}

// ParseRate reads a rate the way tc writes it: a number and a unit, bit,
// kbit, mbit, gbit or tbit (decimal: 1gbit is 10^9 bit/s), case ignored;
// "100mbit", "1gbit", "2.5gbit".
func ParseRate(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mult   float64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}
	for _, u := range units {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) || v*u.mult > 1e15 {
			break
		}
		return uint64(math.Round(v * u.mult)), nil
	}
	return 0, fmt.Errorf("rate %q: want a number and bit, kbit, mbit, gbit or tbit, as 100mbit, 1gbit, 10gbit", s)
}

// FormatRate writes a rate the way ParseRate reads it, in the largest unit
// that keeps it whole when it can.
func FormatRate(bps uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if bps >= u.mult && bps%u.mult == 0 {
			return fmt.Sprintf("%d%s", bps/u.mult, u.suffix)
		}
	}
	if bps >= 1e6 {
		return strconv.FormatFloat(float64(bps)/1e6, 'f', -1, 64) + "mbit"
	}
	return fmt.Sprintf("%dbit", bps)
}
