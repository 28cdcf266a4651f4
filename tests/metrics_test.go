package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
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
		checkLabels(t, s.Name, body)
		want := []string{"process_resident_memory_bytes", "go_goroutines", "idface_request_seconds_bucket", "idface_build_info{"}
		if s.Name == "key" {
			want = append(want, `idface_requests_total{code="ok",op="decrypt"} 2`)
			if strings.Contains(body, "idface_identify_total") {
				t.Errorf("the key server, which answers no client, counts identifications")
			}
		} else {
			want = append(want, `idface_requests_total{code="ok",op="identify"} 2`, "idface_live_rows 20", `idface_requests_total{code="ok",op="enroll"} 1`,
				`idface_identify_total{mode="he",result="refused"} 0`)
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

// labelRe finds label pairs in the Prometheus text format.
var labelRe = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// safeLabel is what every label value of every idface metric must look
// like: no spaces (a dashboard or a grep for code="unknown id" breaks on
// them), no upper case.
var safeLabel = regexp.MustCompile(`^[a-z0-9_.:+-]*$`)

// checkLabels fails on any label value of body (a /metrics scrape) that is
// not safeLabel, except a histogram's le="+Inf" (the format's own).
func checkLabels(t *testing.T, server, body string) {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		for _, m := range labelRe.FindAllStringSubmatch(l, -1) {
			if !safeLabel.MatchString(m[2]) && m[1] != "le" {
				t.Errorf("%s: label %s=%q: %s", server, m[1], m[2], l)
			}
		}
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s/metrics: %d %v", addr, resp.StatusCode, err)
	}
	return string(b)
}

// TestMetricsIdentifyCountsAndLabels (issue 20, item 3): 'cluster up'
// prints each server's metrics address beside its QUIC address; the
// entry counts the identifications it answered to clients by mode and
// result, exactly as the client saw them (accepted, rejected, and a
// malformed query refused); every server has idface_build_info with the
// labels 'idface version' prints; and no label value of any server has a
// space (an error code was "unknown id").
func TestMetricsIdentifyCountsAndLabels(t *testing.T) {
	dir := t.TempDir()
	must(t, "cluster", "init", "--cluster", dir, "--mode", "2pc", "--parties", "2", "--tau", "0.2", "--metrics", "--dim", "64", "--beta", "16")
	up := must(t, "cluster", "up", "--cluster", dir)
	t.Cleanup(func() { idface(t, "cluster", "down", "--cluster", dir) })
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Servers() {
		if !regexp.MustCompile(`(?m)^\s+` + s.Name + `\s+quic ` + regexp.QuoteMeta(s.Addr) + `\s+metrics http://` + regexp.QuoteMeta(s.Metrics) + `/metrics$`).MatchString(up) {
			t.Errorf("cluster up does not show %s's addresses (%s, %s):\n%s", s.Name, s.Addr, s.Metrics, up)
		}
	}

	d := newDatasetDim(t, t.TempDir(), 20, 64, 5)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	strangers := newDatasetDim(t, t.TempDir(), 4, 64, 99)
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, append(append([][]float32{}, d.queries[:3]...), strangers.queries...))
	var accepted, rejected int
	for _, r := range parseResults(t, must(t, "identify", "--cluster", dir, "--client", "device", "--templates", q, "--json")) {
		if r.Accepted {
			accepted++
		} else {
			rejected++
		}
	}
	if accepted == 0 || rejected == 0 {
		t.Fatalf("%d accepted, %d rejected: want both", accepted, rejected)
	}
	// A query the entry cannot decode: refused.
	st, err := dialAs(t, cfg, "device").Open(context.Background(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	st.SetDeadline(time.Now().Add(10 * time.Second))
	if err := st.WriteFrame([]byte{protocol.Version, byte(protocol.TIdentify), 0xff}); err != nil {
		t.Fatal(err)
	}
	if b, err := st.ReadFrame(1 << 16); err != nil || len(b) < 2 || protocol.Type(b[1]) != protocol.TError {
		t.Fatalf("malformed identify: %x %v", b, err)
	}
	st.Finish()
	// An error code with a space in its name.
	if _, errs, code := idface(t, "delete", "--cluster", dir, "--id", "nobody"); code == 0 {
		t.Fatalf("deleting an unknown id: exit 0 %s", errs)
	}

	var in struct {
		Version   string `json:"version"`
		Revision  string `json:"revision"`
		GoVersion string `json:"go_version"`
	}
	if err := json.Unmarshal([]byte(must(t, "version", "--json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.GoVersion != runtime.Version() || in.Version == "" {
		t.Fatalf("version --json: %+v (tests built with %s)", in, runtime.Version())
	}
	build := fmt.Sprintf(`idface_build_info{goversion=%q,revision=%q,version=%q} 1`, in.GoVersion, in.Revision, in.Version)
	for _, s := range cfg.Servers() {
		body := scrape(t, s.Metrics)
		checkLabels(t, s.Name, body)
		want := []string{build}
		if s.Name == "p1" {
			want = append(want, fmt.Sprintf(`idface_identify_total{mode="2pc",result="accepted"} %d`, accepted),
				fmt.Sprintf(`idface_identify_total{mode="2pc",result="rejected"} %d`, rejected),
				`idface_identify_total{mode="2pc",result="refused"} 1`,
				`idface_requests_total{code="unknown_id",op="delete"} 1`)
		} else {
			want = append(want, `idface_identify_total{mode="2pc",result="accepted"} 0`)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: /metrics lacks %s", s.Name, w)
			}
		}
	}
}
