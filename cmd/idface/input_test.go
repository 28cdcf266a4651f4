package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/internal/codec/npy"
)

// TestInputMessages: files an operator may get wrong are refused before
// anything is printed or sent, with what is wrong and where, in the
// user's terms (issue 20 item 5). The cluster is never started: every
// check comes before a connection.
func TestInputMessages(t *testing.T) {
	dir := t.TempDir()
	c := filepath.Join(dir, "c")
	if code, _, errs := idface("cluster", "init", "--cluster", c, "--mode", "2pc"); code != 0 {
		t.Fatal(errs)
	}
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	row := func(d int) string { return strings.TrimSuffix(strings.Repeat("0.5,", d), ",") }
	good := filepath.Join(dir, "good.npy")
	m := &npy.Matrix{Rows: 2, Cols: 512, F32: make([]float32, 1024)}
	m.F32[0], m.F32[600] = 1, float32(math.NaN())
	if err := npy.WriteFile(good, m); err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half.npy")
	b, _ := os.ReadFile(good)
	os.WriteFile(half, b[:len(b)-2048], 0o644)
	long := strings.Repeat("x", 10000)
	two := file("two.txt", "a\nb\n")
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"blank.txt line 2 is blank", []string{"enroll", "--ids", file("blank.txt", "a\n\nb\n"), "--templates", good}},
		{"--id: id is 10000 bytes; ids are at most 256 bytes", []string{"enroll", "--id", long, "--template", good}},
		{"long.txt line 2: id is 10000 bytes; ids are at most 256 bytes", []string{"enroll", "--ids", file("long.txt", "a\n"+long+"\n"), "--templates", good}},
		{"twice.txt line 2 repeats the id on line 1", []string{"enroll", "--ids", file("twice.txt", "a\na\n"), "--templates", good}},
		{"short.csv line 2: 511 values, want 512 (the cluster's dimension)", []string{"enroll", "--ids", two, "--templates", file("short.csv", row(512)+"\n"+row(511)+"\n")}},
		{"half.npy is truncated: 2048 of 4096 data bytes present", []string{"enroll", "--ids", two, "--templates", half}},
		{"carries its own ids: leave out --ids", []string{"enroll", "--ids", two, "--templates", file("ids.jsonl", `{"id": "a", "template": [`+row(512)+"]}\n")}},
		{"holds 2 templates but " + filepath.Join(dir, "three.txt") + " has 3 ids", []string{"enroll", "--ids", file("three.txt", "a\nb\nc\n"), "--templates", good}},
		{"nothing was enrolled: 1 of the 2 templates cannot be enrolled:\n  " + good + " row 1: index 88 is NaN", []string{"enroll", "--ids", two, "--templates", good}},
		{"--batch 70000: a batch holds 1 to 65536 templates", []string{"enroll", "--ids", two, "--templates", good, "--batch", "70000"}},
		{"--top 11: this cluster returns at most 10 candidates", []string{"identify", "--templates", good, "--top", "11"}},
		{"x.csv line 1: 3 values, want 512", []string{"identify", "--templates", file("x.csv", "1,2,3\n")}},
		{"blank.txt line 2 is blank", []string{"delete", "--ids", filepath.Join(dir, "blank.txt")}},
	} {
		code, out, errs := idface(append(tc.args, "--cluster", c)...)
		if code != 1 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("idface %s: exit %d, stdout %q, stderr %q; want exit 1, no output and %q", tc.args[0], code, out, errs, tc.want)
		}
	}
}
