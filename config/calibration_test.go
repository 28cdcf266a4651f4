package config_test

import (
	"math"
	"strings"
	"testing"

	"github.com/idface/idface/config"
)

// TestCalibrationWarning (issue 38 item 2): a threshold calibrated with
// 1,000 ids enrolled, with 5,000 enrolled, lets about five times the
// target FPIR through; the warning says so, with the FPIR to expect and
// the command that calibrates for the size reached. Within the
// calibrated size, or for a size planned with calibrate --rows, none.
func TestCalibrationWarning(t *testing.T) {
	c := config.Calibration{TargetFPIR: 1e-3, GalleryIDs: 1000}
	if w := c.Warning(1000); w != "" {
		t.Errorf("1000 of 1000: %q", w)
	}
	if got := c.ExpectedFPIR(5000); math.Abs(got-0.005) > 1e-4 {
		t.Errorf("expected FPIR with 5000 of 1000: %v, want about 0.005", got)
	}
	w := c.Warning(5000)
	for _, want := range []string{"5000 ids enrolled, the threshold was calibrated with 1000", "expected FPIR about 0.005, over 1.5x the target 0.001", "idface calibrate --rows 5000"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	planned := c
	planned.Rows = 8000
	if planned.PlannedRows() != 8000 || planned.Warning(5000) != "" {
		t.Errorf("planned for 8000, 5000 enrolled: rows %d, warning %q", planned.PlannedRows(), planned.Warning(5000))
	}
	if w := planned.Warning(16000); !strings.Contains(w, "calibrated for 8000 (idface calibrate --rows)") || !strings.Contains(w, "about 0.002") {
		t.Errorf("planned for 8000, 16000 enrolled: %q", w)
	}
	if got := c.ExpectedFPIR(1e9); got > 1 {
		t.Errorf("expected FPIR %v: a rate is at most 1", got)
	}
}

// TestCalibrationWarningMargin (issue 47 item 6): 1,003 ids against a
// threshold calibrated with 1,000 is noise, not a warning on every
// identify, status and health check; the warning comes once the expected
// FPIR exceeds the target by config.WarnMargin, and names the command
// that recalibrates a running local cluster, as calibrate's own advice
// does. A synthetic default says to calibrate on one's own features.
func TestCalibrationWarningMargin(t *testing.T) {
	c := config.Calibration{TargetFPIR: 1e-3, GalleryIDs: 1000}
	for _, live := range []int{1003, 1200, 1490} {
		if w := c.Warning(live); w != "" {
			t.Errorf("%d of 1000 (expected FPIR %.3g, within %gx the target): warned %q", live, c.ExpectedFPIR(live), config.WarnMargin, w)
		}
	}
	w := c.Warning(1510)
	for _, want := range []string{"1510 ids enrolled", "over 1.5x the target 0.001", "idface calibrate --rows 1510", "idface cluster recalibrate --cluster DIR --calibration calibration.json"} {
		if !strings.Contains(w, want) {
			t.Errorf("1510 of 1000: warning %q lacks %q", w, want)
		}
	}
	syn := c
	syn.Synthetic = "idface synth --people 2000 --samples 2 --dim 512 --seed 1000"
	if w := syn.Warning(5000); !strings.Contains(w, "the default, calibrated with 1000 synthetic people") || !strings.Contains(w, "on your own labelled features") {
		t.Errorf("synthetic default, 5000 of 1000: %q", w)
	}
}
