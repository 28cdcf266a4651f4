package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idface/idface/config"
)

// TestCalibrationInit: 'cluster init --calibration' sets the weights and
// the tau whose score threshold is the calibrated one, records the
// target FPIR, and refuses flags or modes that contradict the file; a
// configuration whose tau no longer gives the calibrated threshold is
// refused (issue 20 item 1).
func TestCalibrationInit(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	run := func(args ...string) string {
		t.Helper()
		code, out, errs := idface(args...)
		if code != 0 {
			t.Fatalf("idface %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	run("synth", "--people", "400", "--samples", "2", "--dim", "128", "--intra", "0.7", "--out", p("dev.npy"), "--labels", p("labels.txt"))
	out := run("calibrate", "--templates", p("dev.npy"), "--labels", p("labels.txt"), "--target-fpir", "0.01", "--out", p("cal.json"), "--beta", "21")
	if !strings.Contains(out, "target FPIR 0.01: threshold score >= ") || !strings.Contains(out, "TPIR") {
		t.Fatalf("calibrate said:\n%s", out)
	}
	if _, err := os.Stat(p("cal.png")); err != nil {
		t.Fatalf("no plot: %v", err)
	}
	var f calibrationFile
	b, _ := os.ReadFile(p("cal.json"))
	if err := json.Unmarshal(b, &f); err != nil || f.Dim != 128 || f.Alpha != 85 || f.Beta != 21 || f.Threshold < 1 || len(f.Suggestions) == 0 {
		t.Fatalf("calibration file: %+v %v", f, err)
	}
	run("cluster", "init", "--cluster", p("c"), "--mode", "he", "--calibration", p("cal.json"))
	cfg, err := config.Load(p("c"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cfg.Calibration()
	if !ok || cfg.Threshold() != f.Threshold || c.TargetFPIR != 0.01 || cfg.Dim() != 128 || cfg.Beta() != 21 || cfg.Tau() != f.Tau {
		t.Fatalf("cluster: threshold %d (file %d), calibration %+v, d %d beta %d", cfg.Threshold(), f.Threshold, c, cfg.Dim(), cfg.Beta())
	}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--beta differs from the calibration", []string{"--mode", "2pc", "--beta", "16"}},
		{"--tau differs from the calibration", []string{"--mode", "2pc", "--tau", "0.3"}},
	} {
		code, _, errs := idface(append([]string{"cluster", "init", "--cluster", p("c2"), "--calibration", p("cal.json")}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errs)
		}
	}
	run("calibrate", "--templates", p("dev.npy"), "--labels", p("labels.txt"), "--target-fpir", "0.01", "--out", p("blind.json"), "--plot", "none",
		"--mode", "blind", "--gallery-levels", "4:2,7,20,56", "--beta", "21")
	if code, _, errs := idface("cluster", "init", "--cluster", p("c3"), "--mode", "2pc", "--calibration", p("blind.json")); code != 1 || !strings.Contains(errs, "use --mode blind") {
		t.Errorf("blind levels into 2pc: exit %d, %q", code, errs)
	}
	run("cluster", "init", "--cluster", p("c4"), "--mode", "blind", "--calibration", p("blind.json"))
	// A hand-edited tau no longer gives the calibrated threshold.
	lit := cfg.Literal()
	tau := *lit.Tau + 0.05
	lit.Tau = &tau
	if _, err := config.New(lit, p("c")); err == nil || !strings.Contains(err.Error(), "calibration: its threshold is score >= ") {
		t.Errorf("tau changed under a calibration: %v", err)
	}
}

// TestCalibrateDrift (issue 38 item 7): calibrate's plot takes a
// cluster's score statistics (idface stats --json) and draws them beside
// the calibration's own best scores (PLOT-drift.png); a file without a
// complete window, or windows of other buckets, are refused.
func TestCalibrateDrift(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	if code, out, errs := idface("synth", "--people", "200", "--samples", "2", "--dim", "128", "--out", p("dev.npy"), "--labels", p("labels.txt")); code != 0 {
		t.Fatalf("synth: %s%s", out, errs)
	}
	window := func(name string, counts ...int) string {
		ws := windowStats{Server: "decider", Windows: 3}
		for i, c := range counts {
			below := strconv.Itoa(2 * (i + 1))
			if i == len(counts)-1 {
				below = "+Inf"
			}
			ws.Buckets = append(ws.Buckets, bucket{below, c})
			ws.Queries += c
		}
		b, _ := json.Marshal([]windowStats{ws})
		if err := os.WriteFile(p(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p(name)
	}
	cal := []string{"calibrate", "--templates", p("dev.npy"), "--labels", p("labels.txt"), "--target-fpir", "0.01", "--out", p("cal.json")}
	code, out, errs := idface(append(cal, "--stats", window("w1.json", 10, 500, 400, 90), "--stats", window("w2.json", 5, 480, 420, 95))...)
	if code != 0 || !strings.Contains(out, "cal-drift.png") {
		t.Fatalf("calibrate --stats: exit %d\n%s%s", code, out, errs)
	}
	if fi, err := os.Stat(p("cal-drift.png")); err != nil || fi.Size() == 0 {
		t.Fatalf("no drift plot: %v", err)
	}
	if code, _, errs := idface(append(cal, "--stats", window("empty.json"))...); code == 0 || !strings.Contains(errs, "no complete window") {
		t.Fatalf("a file without a window: exit %d, %s", code, errs)
	}
	if code, _, errs := idface(append(cal, "--stats", window("w1.json", 10, 500, 400, 90), "--stats", window("w3.json", 10, 500, 490))...); code == 0 || !strings.Contains(errs, "other buckets") {
		t.Fatalf("windows of other buckets: exit %d, %s", code, errs)
	}
}
