package tests

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsEndpoints: with --metrics every server kind (here an HE
// local server and the key server) serves Prometheus metrics on loopback,
// with request counters and latency per operation, rows, and the process
// and Go collectors; profiles are not served unless asked for.
func TestMetricsEndpoints(t *testing.T) {
	dir, cfg := newCluster(t, "he", 1, "--metrics", "--dim", "64", "--beta", "16")
	d := newDatasetDim(t, t.TempDir(), 20, 64, 3)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:2])
	must(t, "identify", "--cluster", dir, "--templates", q)
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, s := range cfg.Servers() {
		if s.Metrics == "" || !strings.HasPrefix(s.Metrics, "127.0.0.1:") {
			t.Fatalf("%s has metrics address %q", s.Name, s.Metrics)
		}
		code, body := get("http://" + s.Metrics + "/metrics")
		if code != 200 {
			t.Fatalf("%s: /metrics %d", s.Name, code)
		}
		want := []string{"process_resident_memory_bytes", "go_goroutines", "idface_request_seconds_bucket"}
		if s.Name == "key" {
			want = append(want, `idface_requests_total{code="ok",op="decrypt"} 2`)
		} else {
			want = append(want, `idface_requests_total{code="ok",op="identify"} 2`, "idface_live_rows 20", `idface_requests_total{code="ok",op="enroll"} 1`)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: /metrics lacks %s", s.Name, w)
			}
		}
		if code, _ := get("http://" + s.Metrics + "/debug/pprof/"); code != 404 {
			t.Errorf("%s serves profiles without --pprof", s.Name)
		}
	}
}

// TestPprofNeedsAMetricsAddress: --pprof on a server without a metrics
// address is refused with what to do, instead of serving nothing; on an
// address that is not loopback it is refused too.
func TestPprofNeedsAMetricsAddress(t *testing.T) {
	dir := t.TempDir()
	must(t, "cluster", "init", "--cluster", dir, "--mode", "2pc", "--dim", "64", "--beta", "16")
	_, errs, code := idface(t, "serve", "--cluster", dir, "--party", "p1", "--pprof")
	if code == 0 || !strings.Contains(errs, "--metrics-addr") {
		t.Fatalf("--pprof without a metrics address: exit %d %q", code, errs)
	}
	_, errs, code = idface(t, "serve", "--cluster", dir, "--party", "p1", "--pprof", "--metrics-addr", "0.0.0.0:0")
	if code == 0 || !strings.Contains(errs, "loopback") {
		t.Fatalf("--pprof on 0.0.0.0: exit %d %q", code, errs)
	}
}
