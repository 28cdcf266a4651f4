package experiments

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
)

// TestBlindKernelPath: every kernel of the path is timed (none skipped,
// so none is zero) and the path is their sum, for both rings.
func TestBlindKernelPath(t *testing.T) {
	for _, c := range []struct {
		gallery string
		bits    int
	}{{"", 8}, {"4:20,20,20,25", 16}} {
		p, err := config.New(inproc.Literal(config.Literal{Mode: config.ModeBlind, Dim: 128, Beta: 63, GalleryLevels: c.gallery}, 2), "")
		if err != nil {
			t.Fatal(err)
		}
		if p.Ring().Bits != c.bits {
			t.Fatalf("gallery %q: a ring of %d bits, want %d", c.gallery, p.Ring().Bits, c.bits)
		}
		if _, err := BlindKernelPath(context.Background(), p, 0, 4, 3); err == nil {
			t.Fatal("no rows: measured")
		}
		kp, err := BlindKernelPath(context.Background(), p, 3000, 4, 3)
		if err != nil {
			t.Fatal(err)
		}
		parts := []float64{kp.ScoreMs, kp.PermuteMs, kp.WireMs, kp.DecideMs, kp.UnpermuteMs, kp.ScoreSharedMs, kp.PermuteSharedMs}
		sum := 0.0
		for i, v := range parts {
			if !(v > 0) {
				t.Fatalf("ring of %d bits: kernel %d took %v ms", p.Ring().Bits, i, v)
			}
			sum += v
		}
		sum -= kp.ScoreSharedMs + kp.PermuteSharedMs
		if math.Abs(sum-kp.TotalMs) > 1e-9 {
			t.Fatalf("total %v, kernels sum to %v", kp.TotalMs, sum)
		}
		if want := max(1, runtime.GOMAXPROCS(0)/p.Mu()); kp.HolderCores != want {
			t.Fatalf("a holder's cores %d, want %d", kp.HolderCores, want)
		}
		if shared := kp.TotalMs - kp.ScoreMs - kp.PermuteMs + kp.ScoreSharedMs + kp.PermuteSharedMs; math.Abs(shared-kp.SharedTotalMs) > 1e-9 {
			t.Fatalf("shared total %v, its kernels sum to %v", kp.SharedTotalMs, shared)
		}
	}
}
