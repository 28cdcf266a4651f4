package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynthJSONLinesAtGateway (issue 47 item 9): every line of 'synth
// --out X.jsonl --ids' is a body the gateway's /v1/enroll takes, and every
// line of one without --ids a body /v1/identify takes, answering the id
// enrolled. Before, synth wrote NumPy bytes to a .jsonl name.
func TestSynthJSONLinesAtGateway(t *testing.T) {
	dir, _ := newCluster(t, "2pc", 2, "--dim", "64")
	work := t.TempDir()
	g, q := filepath.Join(work, "g.jsonl"), filepath.Join(work, "q.jsonl")
	must(t, "synth", "--people", "4", "--samples", "2", "--sample", "0", "--dim", "64", "--intra", "0.8", "--out", g, "--ids", filepath.Join(work, "g.txt"))
	must(t, "synth", "--people", "4", "--samples", "2", "--sample", "1", "--dim", "64", "--intra", "0.8", "--out", q)

	sock := filepath.Join(work, "gate.sock")
	startGateway(t, "--cluster", dir, "--listen", "unix:"+sock)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := hc.Post("http://gate"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans map[string]any
		json.NewDecoder(resp.Body).Decode(&ans)
		return resp.StatusCode, ans
	}
	lines := func(path string) []string {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out []string
		s := bufio.NewScanner(f)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			out = append(out, s.Text())
		}
		return out
	}
	var ids []string
	for i, body := range lines(g) {
		code, ans := post("/v1/enroll", body)
		if code != http.StatusOK {
			t.Fatalf("line %d of g.jsonl at /v1/enroll: %d %v", i+1, code, ans)
		}
		var x struct{ ID string }
		json.Unmarshal([]byte(body), &x)
		ids = append(ids, x.ID)
	}
	for i, body := range lines(q) {
		code, ans := post("/v1/identify", body)
		if code != http.StatusOK || ans["id"] != ids[i] {
			t.Errorf("line %d of q.jsonl at /v1/identify: %d %v, want %s", i+1, code, ans, ids[i])
		}
	}
	if len(ids) != 4 {
		t.Fatalf("g.jsonl has %d lines", len(ids))
	}
}
