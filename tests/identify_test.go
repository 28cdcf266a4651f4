package tests

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestIdentifyRun: an empty database is warned about; a NaN or zero
// query fails that query only and the run goes on to a closing count;
// progress is reported on long runs; a --top over the cluster's cap is
// refused before any output (issue 20 item 4).
func TestIdentifyRun(t *testing.T) {
	dir, _ := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 20, 22)
	_, errs, code := idface(t, "identify", "--cluster", dir, "--templates", d.query)
	if code != 0 || !strings.Contains(errs, "warning: the database at p1 is empty") {
		t.Fatalf("empty database: exit %d, %q", code, errs)
	}
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll)
	qs := append([][]float32(nil), d.queries[:6]...)
	nan := append([]float32(nil), qs[2]...)
	nan[5] = float32(nanValue())
	qs[2], qs[4] = nan, make([]float32, len(nan))
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, qs)
	out, errs, code := idface(t, "identify", "--cluster", dir, "--templates", q, "--json", "--progress", "1ns")
	if code != 1 || !strings.Contains(errs, "2 of 6 queries failed (row 2, row 4 of "+q+"); the others were answered") {
		t.Fatalf("bad rows: exit %d\n%s", code, errs)
	}
	if strings.Contains(errs, "is empty") {
		t.Fatalf("a database of 20 rows called empty:\n%s", errs)
	}
	rs := parseResults(t, out)
	if len(rs) != 6 {
		t.Fatalf("%d lines for 6 queries:\n%s", len(rs), out)
	}
	var errLines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct{ Error string }
		json.Unmarshal([]byte(l), &r)
		errLines = append(errLines, r.Error)
	}
	if !strings.Contains(errLines[2], "row 2: index 5 is NaN") || !strings.Contains(errLines[4], "row 4: all values are zero") || errLines[5] != "" {
		t.Fatalf("error fields %q", errLines)
	}
	if !rs[5].Accepted || *rs[5].ID != "person-5" {
		t.Fatalf("the query after the bad ones: %+v", rs[5])
	}
	if !strings.Contains(errs, "6 queries: 4 accepted / 0 rejected / 2 failed") || !strings.Contains(errs, "identify: 1 of 6 queries done") {
		t.Fatalf("no closing count or progress:\n%s", errs)
	}
	out, errs, code = idface(t, "identify", "--cluster", dir, "--templates", d.query, "--top", "11")
	if code != 1 || out != "" || !strings.Contains(errs, "--top 11: this cluster returns at most 10 candidates") {
		t.Fatalf("--top 11: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// The table ends with the count and what the threshold means.
	out = must(t, "identify", "--cluster", dir, "--templates", d.query)
	if !strings.Contains(out, "20 queries: 20 accepted / 0 rejected (threshold tau = 0.200") {
		t.Fatalf("table summary:\n%s", out)
	}
}
