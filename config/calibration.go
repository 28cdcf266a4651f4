package config

import (
	"fmt"
	"math"
)

// PlannedRows is the number of ids the threshold holds its target FPIR
// for: Rows when the calibration was made for a planned size, else the
// ids its split enrolled.
func (c Calibration) PlannedRows() int {
	if c.Rows > 0 {
		return c.Rows
	}
	return c.GalleryIDs
}

// ExpectedFPIR is the FPIR to expect with live ids enrolled: each
// enrolled id is one more chance for a stranger to pass, so it grows
// about linearly with them (1 - (1-target)^(live/planned), at most 1).
func (c Calibration) ExpectedFPIR(live int) float64 {
	n := c.PlannedRows()
	if n <= 0 || live <= 0 {
		return c.TargetFPIR
	}
	return -math.Expm1(float64(live) / float64(n) * math.Log1p(-c.TargetFPIR))
}

// WarnMargin is how far the expected FPIR may exceed the target before
// an operator is warned: at 1.5x, about half as many ids again as the
// threshold was calibrated for (FPIR growing about linearly with them).
// A few ids over is noise in the measurement, not a reason to warn on
// every identify, status and health check.
const WarnMargin = 1.5

// Warning says what more live ids than the calibration was made for do
// to the false-positive rate, and what to do; "" while the expected FPIR
// is within WarnMargin times the target. Operators learn the live count
// (protocol.HealthOK.Live); devices do not, so only an operator's
// identify, status or gateway can warn.
func (c Calibration) Warning(live int) string {
	n := c.PlannedRows()
	if n <= 0 || live <= n || c.ExpectedFPIR(live) <= WarnMargin*c.TargetFPIR {
		return ""
	}
	how := fmt.Sprintf("calibrated with %d", n)
	switch {
	case c.Synthetic != "":
		how = fmt.Sprintf("the default, calibrated with %d synthetic people", n)
	case c.Rows > 0:
		how = fmt.Sprintf("calibrated for %d (idface calibrate --rows)", n)
	}
	return fmt.Sprintf("%d ids enrolled, the threshold was %s: expected FPIR about %.2g, over %gx the target %g (it grows about linearly with the ids enrolled); "+
		"%s: idface calibrate --rows %d or more --out calibration.json, then idface cluster recalibrate --cluster DIR --calibration calibration.json "+
		"(a deployment: idface cluster assemble --out cluster.json --calibration calibration.json with its members' descriptors, then restart its servers)",
		live, how, c.ExpectedFPIR(live), WarnMargin, c.TargetFPIR, c.advice(), live)
}

// advice says what to calibrate on.
func (c Calibration) advice() string {
	if c.Synthetic != "" {
		return "calibrate on your own labelled features for the size you will reach"
	}
	return "calibrate for the size you will reach"
}
