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

// Warning says what more live ids than the calibration was made for do
// to the false-positive rate, and what to do; "" when live is within it.
// Operators learn the live count (protocol.HealthOK.Live); devices do
// not, so only an operator's identify, status or gateway can warn.
func (c Calibration) Warning(live int) string {
	n := c.PlannedRows()
	if n <= 0 || live <= n {
		return ""
	}
	how := fmt.Sprintf("calibrated with %d", n)
	if c.Rows > 0 {
		how = fmt.Sprintf("calibrated for %d (idface calibrate --rows)", n)
	}
	return fmt.Sprintf("%d ids enrolled, the threshold was %s: expected FPIR about %.2g (target %g; it grows about linearly with the ids enrolled); "+
		"calibrate for the size you will reach (idface calibrate --rows %d or more) and give the new file to idface cluster assemble --calibration",
		live, how, c.ExpectedFPIR(live), c.TargetFPIR, live)
}
