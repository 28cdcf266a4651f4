package experiments

import (
	"testing"

	"github.com/idface/idface/template"
)

// TestCalibrate: the threshold is the least integer score whose FPIR on
// the split is at most the target, TPIR is measured at it, and Tau gives
// that threshold back through the cluster's own rule (MinAcceptScore for
// T_alpha x T_beta, LevelsMinAcceptScore for levels).
func TestCalibrate(t *testing.T) {
	s, err := NewSynthetic(400, 2, 128, 0.7, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range []LevelPair{
		{template.TernaryLevels(85), template.TernaryLevels(16)},
		{ThreeFoldLevels(85, 4), template.TernaryLevels(21)},
	} {
		for _, target := range []float64{1e-2, 1e-3} {
			c, err := Calibrate(s.Samples, s.Labels, lp, target)
			if err != nil {
				t.Fatal(err)
			}
			if c.GalleryIDs != 200 || c.Mated != 200 || c.NonMated != 400 {
				t.Fatalf("split %d/%d/%d", c.GalleryIDs, c.Mated, c.NonMated)
			}
			if c.FPIR > target || c.TPIR < 0.5 || c.TPIR > c.Rank1 {
				t.Errorf("%s x %s at %g: FPIR %v TPIR %v rank-1 %v", lp.Gallery, lp.Query, target, c.FPIR, c.TPIR, c.Rank1)
			}
			// The least such threshold: one below lets more through.
			below := *c
			below.Threshold--
			var fpirBelow float64
			for _, pt := range c.Curve {
				if pt.Threshold == below.Threshold {
					fpirBelow = pt.FPIR
				}
			}
			if fpirBelow <= target && fpirBelow > 0 {
				t.Errorf("threshold %d not the least: %d gives FPIR %v", c.Threshold, below.Threshold, fpirBelow)
			}
			tau, err := c.Tau()
			if err != nil {
				t.Fatal(err)
			}
			if got := template.LevelsMinAcceptScore(tau, lp.Gallery, lp.Query); got != c.Threshold {
				t.Errorf("tau %v gives %d, want %d", tau, got, c.Threshold)
			}
			if lp.Gallery.L() == 1 {
				if got := template.MinAcceptScore(tau, lp.Gallery.Support(), lp.Query.Support()); got != c.Threshold {
					t.Errorf("MinAcceptScore(%v) = %d, want %d", tau, got, c.Threshold)
				}
			}
		}
	}
	if _, err := Calibrate(s.Samples, s.Labels, LevelPair{template.TernaryLevels(85), template.TernaryLevels(16)}, 1); err == nil {
		t.Error("target 1 accepted")
	}
	if _, err := Calibrate(s.Samples[:3], []int{0, 1, 2}, LevelPair{template.TernaryLevels(85), template.TernaryLevels(16)}, 1e-3); err == nil {
		t.Error("a set without mated searches accepted")
	}
	if got := ThreeFoldLevels(341, 4).String(); got != "4:9,26,77,229" {
		t.Errorf("ThreeFoldLevels(341, 4) = %s", got)
	}
}

// TestCalibrateFor (issue 38 item 2): calibrated for a planned gallery of
// twice the split's ids, the threshold is the one the split gives for half
// the target (FPIR grows about linearly with the ids enrolled), and the
// planned size is recorded; for the split's own size it is Calibrate's.
func TestCalibrateFor(t *testing.T) {
	s, err := NewSynthetic(400, 2, 128, 0.7, 3)
	if err != nil {
		t.Fatal(err)
	}
	lp := LevelPair{template.TernaryLevels(85), template.TernaryLevels(16)}
	half, err := Calibrate(s.Samples, s.Labels, lp, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := CalibrateFor(s.Samples, s.Labels, lp, 0.1, 400)
	if err != nil {
		t.Fatal(err)
	}
	if planned.Threshold != half.Threshold || planned.Rows != 400 || planned.GalleryIDs != 200 || planned.TargetFPIR != 0.1 || planned.SplitTarget() != 0.05 {
		t.Errorf("for 400 ids at 0.1: threshold %d (0.05 on the split: %d), rows %d, split %d, target %v, split target %v",
			planned.Threshold, half.Threshold, planned.Rows, planned.GalleryIDs, planned.TargetFPIR, planned.SplitTarget())
	}
	own, err := CalibrateFor(s.Samples, s.Labels, lp, 0.05, 0)
	if err != nil {
		t.Fatal(err)
	}
	if own.Threshold != half.Threshold || own.Rows != 200 {
		t.Errorf("for the split's own size: threshold %d, rows %d; Calibrate: %d", own.Threshold, own.Rows, half.Threshold)
	}
	lower, err := Calibrate(s.Samples, s.Labels, lp, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("score >= %d for 0.1 on the split, >= %d for 0.1 with 400 ids", lower.Threshold, planned.Threshold)
	if lower.Threshold >= planned.Threshold {
		t.Errorf("0.1 for the split's 200 ids gives score >= %d, not lower than for 400 ids (%d)", lower.Threshold, planned.Threshold)
	}
}
