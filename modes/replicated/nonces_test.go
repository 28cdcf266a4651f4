package replicated

import (
	"strings"
	"testing"
	"time"
)

// TestProbeNonces: a nonce runs once within the window; a probe made
// before the holder started is refused (the table is in memory); a full
// table refuses new probes until the oldest leave the window, then takes
// them again (the prune point never passes the cap, so a full table is
// always pruned).
func TestProbeNonces(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	n := probeNonces{start: now.Unix() - 10}
	if err := n.use([16]byte{1}, now.Unix(), now, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := n.use([16]byte{1}, now.Unix(), now, "p1"); err == nil || !strings.Contains(err.Error(), "seen this hidden probe before") {
		t.Fatalf("a nonce twice: %v", err)
	}
	if err := n.use([16]byte{2}, now.Unix()-11, now, "p1"); err == nil || !strings.Contains(err.Error(), "before p1 started") {
		t.Fatalf("a probe of before the start: %v", err)
	}
	// Fill the table with probes of the window's first second.
	old := now.Unix() - 9
	for i := len(n.seen); i < maxProbeNonces; i++ {
		n.seen[[16]byte{0xff, byte(i), byte(i >> 8), byte(i >> 16)}] = old
	}
	n.pruneAt = 4096
	if err := n.use([16]byte{3}, now.Unix(), now, "p1"); err == nil || !strings.Contains(err.Error(), "retry shortly") {
		t.Fatalf("a full table: %v", err)
	}
	if n.pruneAt > maxProbeNonces {
		t.Fatalf("prune point %d above the cap %d: the table would never be pruned again", n.pruneAt, maxProbeNonces)
	}
	later := time.Unix(old, 0).Add(ProbeWindow + 2*time.Second)
	if err := n.use([16]byte{3}, later.Unix(), later, "p1"); err != nil {
		t.Fatalf("once the oldest left the window: %v", err)
	}
	if len(n.seen) > 2 {
		t.Fatalf("%d nonces kept after the window passed", len(n.seen))
	}
}
