package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestUsageErrors (issue 38 item 5): 'idface' alone is an error (exit 2,
// the commands on stderr); a usage error prints one line and a hint, not
// the command's 70 lines of help; --help prints the help and exits 0,
// 'shard' too (it exited 2 in a style of its own).
func TestUsageErrors(t *testing.T) {
	if code, out, errs := idface(); code != 2 || out != "" || !strings.Contains(errs, "Commands:") {
		t.Errorf("idface alone: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, args := range [][]string{
		{"enroll", "--bogus"},
		{"enroll", "--cluster", "x"}, // neither --id nor --templates
		{"identify", "--cluster", "x"},
		{"cluster", "init", "--cluster", "x", "stray"},
		{"calibrate", "--templates"},
		{"exists", "--cluster", "x"}, // no --id
		{"ids", "--cluster", "x", "--limit", "0"},
	} {
		code, _, errs := idface(args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if code != 2 || len(lines) != 2 || strings.Contains(errs, "Flags:") || !strings.Contains(lines[1], "--help") {
			t.Errorf("%v: exit %d, %d lines:\n%s", args, code, len(lines), errs)
		}
	}
	if code, _, errs := idface("frobnicate"); code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "idface help") {
		t.Errorf("an unknown command: exit %d\n%s", code, errs)
	}
	if code, _, errs := idface("enroll", "--help"); code != 0 || !strings.Contains(errs, "Flags:") || !strings.Contains(errs, "-templates") {
		t.Errorf("enroll --help: exit %d\n%s", code, errs)
	}
	for _, help := range []string{"--help", "-h", "help"} {
		code, out, errs := idface("shard", help)
		if code != 0 || errs != "" || !strings.Contains(out, "Subcommands:") || !strings.Contains(out, "rebalance") || !strings.Contains(out, "key") {
			t.Errorf("shard %s: exit %d, stdout %q, stderr %q", help, code, out, errs)
		}
	}
	if code, _, errs := idface("shard", "rebalance", "--help"); code != 0 || !strings.Contains(errs, "--previous") && !strings.Contains(errs, "-previous") {
		t.Errorf("shard rebalance --help: exit %d\n%s", code, errs)
	}
}

// TestSynthSeedInIDs (issue 38 item 5): ids and labels of another seed
// than the default name it, so that two synthetic sets never share an id;
// the default seed's stay person-N/sample-M (the README's person-7).
func TestSynthSeedInIDs(t *testing.T) {
	dir := t.TempDir()
	read := func(seed string) (string, string) {
		ids, labels := filepath.Join(dir, "ids"+seed), filepath.Join(dir, "labels"+seed)
		args := []string{"synth", "--people", "2", "--samples", "2", "--dim", "8", "--out", filepath.Join(dir, "x.npy"), "--ids", ids, "--labels", labels}
		if seed != "" {
			args = append(args, "--seed", seed)
		}
		if code, _, errs := idface(args...); code != 0 {
			t.Fatalf("synth: %s", errs)
		}
		a, _ := os.ReadFile(ids)
		b, _ := os.ReadFile(labels)
		return string(a), string(b)
	}
	if ids, labels := read(""); !strings.HasPrefix(ids, "person-0/sample-0\nperson-0/sample-1\n") || !strings.HasPrefix(labels, "person-0\n") {
		t.Errorf("the default seed: ids %q, labels %q", ids, labels)
	}
	if ids, labels := read("3"); !strings.HasPrefix(ids, "seed-3/person-0/sample-0\n") || !strings.HasPrefix(labels, "seed-3/person-0\n") {
		t.Errorf("seed 3: ids %q, labels %q", ids, labels)
	}
}

// TestStages: a long computation's stages are reported while they run,
// and not after done.
func TestStages(t *testing.T) {
	var out syncBuffer
	s := startStages(&out, "calibrate: transform", 2, 5*time.Millisecond)
	s.next("gallery 1:341, query 1:63")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "calibrate: transform 1 of 2 (gallery 1:341, query 1:63): ") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.done()
	n := len(out.String())
	time.Sleep(20 * time.Millisecond)
	if got := out.String(); !strings.Contains(got, " in all\n") || len(got) != n {
		t.Fatalf("reports %q (%d bytes when done)", got, n)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEvalDefaultSeparates (issue 38 item 5): eval's default synthetic
// people are hard enough that the transforms' rows differ; at the old
// default (--intra 0.5) every row read 99.7-100%.
func TestEvalDefaultSeparates(t *testing.T) {
	code, out, errs := idface("eval", "--synthetic", "--people", "300", "--samples", "3", "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d %s", code, errs)
	}
	var r struct {
		Results []struct {
			Scores string  `json:"scores"`
			Beta   int     `json:"beta"`
			TPIR   float64 `json:"tpir_at_fpir_1e-3"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, out)
	}
	lo, hi := 1.0, 0.0
	for _, x := range r.Results {
		lo, hi = min(lo, x.TPIR), max(hi, x.TPIR)
	}
	if len(r.Results) < 3 || lo > 0.9 || hi-lo < 0.2 {
		t.Fatalf("TPIR at FPIR 1e-3 from %.3f to %.3f over %d rows: the default people do not separate the transforms", lo, hi, len(r.Results))
	}
}
