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
	for _, want := range []string{"5000 ids enrolled, the threshold was calibrated with 1000", "expected FPIR about 0.005 (target 0.001", "idface calibrate --rows 5000"} {
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
