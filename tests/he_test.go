package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/modes/hemode"
	"github.com/idface/idface/protocol"
)

// TestHECluster runs a local server and a key server as processes:
// enrollment in batches that straddle groups and single enrollments into a
// partly filled group, identification checked against the plaintext ternary
// search (the key server returns the best rows above the threshold, never
// scores), deletion, restart, and a client refused the key server's role.
//
// The Paillier scheme runs the same test: same answers from another
// encryption, its key pair made by the key server, its group files.
func TestHECluster(t *testing.T) {
	for _, c := range []struct {
		scheme string
		mu     int
	}{{"bgv", 1}, {"bgv", 2}, {"paillier", 1}, {"paillier", 2}} {
		t.Run(fmt.Sprintf("scheme=%s/local_servers=%d", c.scheme, c.mu), func(t *testing.T) { testHECluster(t, c.mu, c.scheme) })
	}
}

func testHECluster(t *testing.T, mu int, scheme string) {
	dir, cfg := newCluster(t, "he", mu, "--scheme", scheme)
	if hemode.Scheme(cfg).Name() != scheme {
		t.Fatalf("cluster runs %s, want %s", hemode.Scheme(cfg).Name(), scheme)
	}
	d := newDataset(t, t.TempDir(), 500, 21)
	entry := cfg.Party(mu - 1).Name // with two local servers: through the non-sequencer
	must(t, "enroll", "--cluster", dir, "--entry", entry, "--ids", d.ids, "--templates", d.enroll, "--batch", "170", "--quiet")
	one := filepath.Join(t.TempDir(), "one.npy")
	writeNpy(t, one, d.queries[499:])
	must(t, "enroll", "--cluster", dir, "--entry", entry, "--id", "late-single", "--template", one)
	rows := transformRows(t, append(append([][]float32{}, d.gallery...), d.queries[499]), append(append([]string{}, d.names...), "late-single"), cfg.Alpha())
	q := filepath.Join(dir, "q.npy")
	writeNpy(t, q, d.queries[:30])

	check := func(rows []plainRow) {
		t.Helper()
		for _, server := range cfg.Parties() {
			checkAt(t, dir, server.Name, q, d, rows, cfg)
		}
	}
	check(rows)
	must(t, "delete", "--cluster", dir, "--entry", entry, "--id", "person-4")
	live := append(append([]plainRow{}, rows[:4]...), rows[5:]...)
	check(live)
	must(t, "cluster", "down", "--cluster", dir)
	must(t, "cluster", "up", "--cluster", dir)
	check(live)
	if n := liveRows(t, cfg); n != 500 { // and every local server has the same rows
		t.Fatalf("%d live rows after restart, want 500", n)
	}
	_, errs, code := idface(t, "enroll", "--cluster", dir, "--id", "person-7", "--template", one)
	if code == 0 || !strings.Contains(errs, "already enrolled") {
		t.Fatalf("duplicate: exit %d %q", code, errs)
	}

	// A client may not query the key server.
	dl := dialAs(t, cfg, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []protocol.Msg{&protocol.PublicKeyRequest{}, &protocol.HEQuery{Groups: 1, Rows: 1, TopK: 1, CtBytes: 1}} {
		s, err := dl.Open(ctx, "key")
		if err != nil {
			t.Fatal(err)
		}
		s.WriteFrame(protocol.Marshal(m))
		b, err := s.ReadFrame(1 << 20)
		if err != nil || !strings.Contains(string(b), "may not send") {
			t.Fatalf("client sent %T to the key server: %q %v", m, b, err)
		}
	}
	// The secret key stays in the key server's directory, private.
	st, err := os.Stat(filepath.Join(dir, "homes", "key", "data", "secret.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret key file: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "homes", "p1", "data", "secret.key")); err == nil {
		t.Fatal("the local server has a secret key")
	}
}

// TestHEKillDuringEnrollment kills a local server mid-enrollment (the only
// one, or the participant of two); after a restart every local server holds
// the same rows, the acknowledged ones among them, and identification is
// exact.
func TestHEKillDuringEnrollment(t *testing.T) {
	for _, c := range []struct {
		mu     int
		victim string
	}{{1, "p1"}, {2, "p2"}} {
		t.Run(fmt.Sprintf("local_servers=%d/kill=%s", c.mu, c.victim), func(t *testing.T) { testHEKill(t, c.mu, c.victim) })
	}
}

func testHEKill(t *testing.T, mu int, victim string) {
	dir, cfg := newCluster(t, "he", mu)
	d := newDataset(t, t.TempDir(), 4000, 31)
	cmd := exec.Command(idfaceBin, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "200", "--quiet", "--timeout", "30s")
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		g, err := rowMap(cfg, cfg.Party(0).Name)
		if err == nil && g[0].Live >= 600 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("enrollment did not start")
		}
	}
	if err := cluster.Kill(cfg, victim); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Skip("enrollment finished before the kill")
	}
	acked := ackedCount(t, errb.String())
	must(t, "cluster", "up", "--cluster", dir)
	live := liveRows(t, cfg)
	if live < acked || live > acked+200 || (victim != "p1" && live != acked) {
		t.Fatalf("%d live after the crash, %d acknowledged", live, acked)
	}
	// Every live row still decodes exactly: identify probes of early people.
	q := filepath.Join(dir, "q.npy")
	writeNpy(t, q, d.queries[:5])
	rs := parseResults(t, must(t, "identify", "--cluster", dir, "--templates", q, "--json"))
	rows := transformRows(t, d.gallery[:live], d.names[:live], cfg.Alpha())
	for i, r := range rs {
		want := plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), 1)
		if want[0].score >= cfg.Threshold() && (r.ID == nil || *r.ID != want[0].id) {
			t.Fatalf("query %d after the crash: %v, want %v", i, r.ID, want[0])
		}
	}
	// Enrollment continues after the burned slots.
	writeNpy(t, q, d.queries[3999:])
	must(t, "enroll", "--cluster", dir, "--id", "after-crash", "--template", q)
	rs = parseResults(t, must(t, "identify", "--cluster", dir, "--templates", q, "--json"))
	if rs[0].ID == nil || *rs[0].ID != "after-crash" {
		t.Fatalf("new row after the crash not identified: %+v", rs[0])
	}
}

// checkAt identifies the probes at one local server and compares with the
// plaintext search: the key server returns the best rows above the
// threshold, never scores.
func checkAt(t *testing.T, dir, server, q string, d *dataset, rows []plainRow, cfg *config.Params) {
	t.Helper()
	rs := parseResults(t, must(t, "identify", "--cluster", dir, "--entry", server, "--templates", q, "--top", "2", "--json"))
	if len(rs) != 30 {
		t.Fatalf("%d results", len(rs))
	}
	for i, r := range rs {
		if r.Score != nil || r.Cosine != nil {
			t.Fatalf("query %d: the HE mode revealed a score", i)
		}
		want := plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), 2)
		var above []string
		for _, w := range want {
			if w.score >= cfg.Threshold() {
				above = append(above, w.id)
			}
		}
		var got []string
		for _, c := range r.Candidates {
			got = append(got, c.ID)
		}
		if r.Accepted != (len(above) > 0) || (r.ID == nil) == r.Accepted {
			t.Fatalf("query %d: accepted %v, plaintext %v", i, r.Accepted, want)
		}
		if len(got) > 0 && got[0] != above[0] {
			t.Fatalf("query %d: got %v, plaintext above threshold %v", i, got, above)
		}
		gr := hemode.Scheme(cfg).GroupRows() // the local server sends ct+ and ct- of every group
		if want := 2 * hemode.Scheme(cfg).CiphertextBytes() * ((len(rows) + gr - 1) / gr); r.BytesSent < uint64(want) {
			t.Fatalf("query %d sent only %d bytes, want at least %d", i, r.BytesSent, want)
		}
	}
}
