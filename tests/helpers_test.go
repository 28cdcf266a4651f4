// Package tests builds the real idface binary and runs real multi-process
// clusters on 127.0.0.1: every party is its own OS process talking QUIC
// with mutual TLS, and the CLI is driven exactly as a user would.
package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/internal/codec/npy"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

var idfaceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idface-bin")
	if err != nil {
		panic(err)
	}
	idfaceBin = filepath.Join(dir, "idface")
	build := exec.Command("go", "build", "-o", idfaceBin, "../cmd/idface")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building idface:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// idface runs the CLI and returns stdout, stderr and the exit code.
func idface(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, idfaceBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("idface %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// must runs the CLI and fails the test unless it exits 0.
func must(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := idface(t, args...)
	if code != 0 {
		t.Fatalf("idface %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// newCluster initialises and starts a cluster; it is stopped at cleanup.
func newCluster(t *testing.T, mode string, mu int, extra ...string) (string, *config.Params) {
	t.Helper()
	dir := t.TempDir()
	must(t, append([]string{"cluster", "init", "--cluster", dir, "--mode", mode, "--parties", fmt.Sprint(mu), "--tau", "0.2"}, extra...)...)
	must(t, "cluster", "up", "--cluster", dir)
	t.Cleanup(func() {
		idface(t, "cluster", "down", "--cluster", dir)
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log")) // every server's, shards' too
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("log of %s:\n%s", strings.TrimSuffix(filepath.Base(l), ".log"), b)
			}
		}
	})
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// dataset writes people*samples synthetic templates: sample 0 of every
// person to enroll.npy/ids.txt, sample 1 to query.npy.
type dataset struct {
	enroll, ids, query string
	gallery            [][]float32
	names              []string
	queries            [][]float32
}

func newDataset(t *testing.T, dir string, people int, seed uint64) *dataset {
	t.Helper()
	return newDatasetDim(t, dir, people, 512, seed)
}

// newDatasetDim is newDataset for templates of dimension dim.
func newDatasetDim(t *testing.T, dir string, people, dim int, seed uint64) *dataset {
	t.Helper()
	s, err := experiments.NewSynthetic(people, 2, dim, 0.6, seed)
	if err != nil {
		t.Fatal(err)
	}
	d := &dataset{enroll: filepath.Join(dir, "enroll.npy"), ids: filepath.Join(dir, "ids.txt"), query: filepath.Join(dir, "query.npy")}
	for i, x := range s.Samples {
		if i%2 == 0 {
			d.gallery = append(d.gallery, x)
			d.names = append(d.names, fmt.Sprintf("person-%d", s.Labels[i]))
		} else {
			d.queries = append(d.queries, x)
		}
	}
	writeNpy(t, d.enroll, d.gallery)
	writeNpy(t, d.query, d.queries)
	if err := os.WriteFile(d.ids, []byte(strings.Join(d.names, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeNpy(t *testing.T, path string, rows [][]float32) {
	t.Helper()
	m := &npy.Matrix{Rows: len(rows), Cols: len(rows[0])}
	for _, r := range rows {
		m.F32 = append(m.F32, r...)
	}
	if err := npy.WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	Query      int      `json:"query"`
	ID         *string  `json:"id"`
	Score      *int     `json:"score"`
	Cosine     *float64 `json:"cosine"`
	Accepted   bool     `json:"accepted"`
	BytesSent  uint64   `json:"bytes_sent"`
	BytesRecv  uint64   `json:"bytes_received"`
	BytesTotal uint64   `json:"bytes_total"`
	Ms         float64  `json:"ms"`
	Candidates []struct {
		ID    string `json:"id"`
		Score int    `json:"score"`
	} `json:"candidates"`
}

func parseResults(t *testing.T, out string) []result {
	t.Helper()
	var rs []result
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs
}

// plainTop is the plaintext ternary search over rows in cluster order
// (live only), best first, lower position first on ties.
type plainRow struct {
	id string
	z  template.Ternary
}

func plainTop(t *testing.T, rows []plainRow, q []float32, alpha, beta, k int) []struct {
	id    string
	score int
} {
	t.Helper()
	y, err := template.Transform(q, beta)
	if err != nil {
		t.Fatal(err)
	}
	type m struct {
		id    string
		score int
		pos   int
	}
	var all []m
	for i, r := range rows {
		all = append(all, m{r.id, r.z.Dot(y), i})
	}
	for i := 1; i < len(all); i++ { // insertion sort: small inputs, stable
		for j := i; j > 0 && (all[j].score > all[j-1].score); j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	var out []struct {
		id    string
		score int
	}
	for _, a := range all[:min(k, len(all))] {
		out = append(out, struct {
			id    string
			score int
		}{a.id, a.score})
	}
	return out
}

func transformRows(t *testing.T, xs [][]float32, ids []string, alpha int) []plainRow {
	t.Helper()
	var rows []plainRow
	for i, x := range xs {
		z, err := template.Transform(x, alpha)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, plainRow{ids[i], z})
	}
	return rows
}

func nanValue() float64 { var z float64; return z / z }

// liveRows asks every party for its live row count (as another server:
// clients get no row counts) and fails unless the counts are the same and
// every party finds its row map equal to every peer's (the comparison an
// operator asks for); it returns the common count.
func liveRows(t *testing.T, cfg *config.Params) int {
	t.Helper()
	op, err := cluster.Client(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	live := -1
	for _, p := range cfg.Parties() {
		g, err := rowMap(cfg, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range g {
			n += int(s.Live)
		}
		if live >= 0 && n != live {
			t.Fatalf("parties disagree: %s has %d live rows, the first %d", p.Name, n, live)
		}
		live = n
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		h, err := op.ComparePeers(ctx, p.Name)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range h.Peers {
			if q.State != protocol.PeerAgrees {
				t.Fatalf("parties disagree: %s finds %s %v (%s)", p.Name, q.Name, q.State, q.Note)
			}
		}
	}
	return live
}

// rowMap is a party's row map (counts, and set hashes sealed for the
// asker) as another server of the local cluster sees it: the test asks
// with that server's identity, since clients get no row map.
func rowMap(cfg *config.Params, party string) (protocol.Digest, error) {
	var as string
	for _, s := range cfg.Servers() {
		if s.Name != party {
			as = s.Name
			break
		}
	}
	cl, err := cluster.Client(cfg, as, "")
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := cl.Health(ctx, party)
	if err != nil {
		return nil, err
	}
	return h.Digest, nil
}

// ackedCount reads "enrolled N of M" from a failed bulk enrollment's stderr:
// the rows the client saw acknowledged before the failure.
func ackedCount(t *testing.T, stderr string) int {
	t.Helper()
	i := strings.Index(stderr, "enrolled ")
	var acked, total int
	if i < 0 {
		t.Fatalf("enroll failed without a count: %q", stderr)
	}
	if _, err := fmt.Sscanf(stderr[i:], "enrolled %d of %d", &acked, &total); err != nil {
		t.Fatalf("enroll failed without a count: %q", stderr)
	}
	return acked
}

// dialAs returns a dialer presenting the named client's identity.
func dialAs(t *testing.T, cfg *config.Params, name string) *quicnet.Dialer {
	t.Helper()
	h, err := home.Open(cluster.HomeDir(cfg.Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := h.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	d := quicnet.NewDialer(cert, cfg.Directory(config.Coordinator), protocol.Version)
	t.Cleanup(func() { d.Close() })
	return d
}
