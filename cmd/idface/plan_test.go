package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlan: idface plan reads bench --json output (other lines skipped,
// the run with clients and the most rows taken), prints a row per size,
// and refuses a file without a concurrent run, or bad flags, saying what
// to do.
func TestPlan(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run.json")
	lines := `bench: enrolling...
{"mode":"blind","parties":2,"ids":100000,"clients":8,"identify_per_s":300,"identify_ms_p50":4,"rss_mb_per_party":150,"bytes_per_identify":200000,"servers":3,"host_cores":2,"host":"test"}
{"mode":"blind","parties":2,"ids":1000000,"clients":8,"identify_per_s":35,"identify_ms_p50":31,"rss_mb_per_party":1200,"bytes_per_identify":2000000,"servers":3,"host_cores":2,"host":"test"}
{"mode":"blind","parties":2,"ids":2000000,"identify_ms_p50":60,"rss_mb_per_party":2400,"bytes_per_identify":4000000,"servers":3,"host_cores":2}
`
	if err := os.WriteFile(run, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := idface("plan", "--bench", run, "--qps", "50", "--rows", "1e6,1e8")
	if code != 0 || !strings.Contains(out, "1000000 rows, 8 clients: 35.0 identifications/s") || !strings.Contains(out, "100000000") {
		t.Fatalf("plan: %d %q %q", code, out, errs)
	}
	code, out, _ = idface("plan", "--bench", run, "--qps", "50", "--rows", "1e9", "--machine-gb", "64", "--json")
	if code != 0 || !strings.Contains(out, `"machines_per_party":`) || !strings.Contains(out, `"rows":1000000000`) {
		t.Fatalf("plan --json: %d %q", code, out)
	}
	only := filepath.Join(dir, "one.json")
	os.WriteFile(only, []byte(strings.Split(lines, "\n")[3]+"\n"), 0o600)
	for _, args := range [][]string{
		{"plan", "--bench", only, "--qps", "5"},
		{"plan", "--bench", run},
		{"plan", "--bench", run, "--qps", "5", "--rows", "1.5"},
		{"plan", "--bench", filepath.Join(dir, "missing.json"), "--qps", "5"},
	} {
		if code, _, errs := idface(args...); code == 0 || errs == "" {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
