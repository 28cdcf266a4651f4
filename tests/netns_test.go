package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/harness/netlab"
)

// TestNetnsDeployment deploys clusters the way separate organisations do,
// on one machine: every server and every client is a host of its own (a
// network namespace with its own address), creates its identity there
// with party init or client init, and hands out only its NAME.pub.json;
// the configuration is assembled from those alone. Then enrollment,
// identification (by a device) and deletion run from the clients' hosts.
// In mode 2pc a server whose certificate the configuration does not pin
// is refused: it cannot start with the configuration, and an impostor at
// a party's address is refused by the other party and by the clients.
func TestNetnsDeployment(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, mode := range []string{"2pc", "blind"} {
		t.Run("mode="+mode, func(t *testing.T) { testNetns(t, mode) })
	}
}

// nsPort is every server's port: each has its own address.
const nsPort = "7443"

type nsMember struct {
	name, role string
	host       *netlab.Host
	home       string
	proc       *netlab.Proc
	log        string
}

// newNsLab makes a lab removed at cleanup, or skips the test where none
// can be made.
func newNsLab(t *testing.T) *netlab.Lab {
	t.Helper()
	lab, err := netlab.New()
	if errors.Is(err, netlab.ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Errorf("removing the lab: %v", err)
		}
	})
	return lab
}

// logsOnFailure prints the servers' logs if the test fails.
func logsOnFailure(t *testing.T, servers []*nsMember) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range servers {
				b, _ := os.ReadFile(m.log)
				t.Logf("log of %s:\n%s", m.name, b)
			}
		}
	})
}

// addr is where a server listens and is reached.
func (m *nsMember) addr() string { return m.host.Addr.String() + ":" + nsPort }

func testNetns(t *testing.T, mode string) {
	lab := newNsLab(t)
	var err error
	dir := t.TempDir()
	servers := []*nsMember{{name: "p1", role: "share-holder"}, {name: "p2", role: "share-holder"}}
	if mode == "blind" {
		servers = append(servers, &nsMember{name: "decider", role: "decider"})
	}
	office := &nsMember{name: "office", role: "operator"}
	gate := &nsMember{name: "gate", role: "device"}
	members := append(append([]*nsMember{}, servers...), office, gate)
	logsOnFailure(t, servers)

	// 1. Each member creates its identity on its own host; only the
	// public descriptors travel to the assembler.
	exchange := filepath.Join(dir, "exchange")
	if err := os.Mkdir(exchange, 0o700); err != nil {
		t.Fatal(err)
	}
	var pubs []string
	for _, m := range members {
		if m.host, err = lab.AddHost(m.name); err != nil {
			t.Fatal(err)
		}
		m.home = filepath.Join(dir, "hosts", m.name)
		m.log = filepath.Join(dir, m.name+".log")
		if m.role == "share-holder" || m.role == "decider" {
			nsMust(t, m.host, "party", "init", "--home", m.home, "--name", m.name, "--role", m.role, "--listen", m.addr())
		} else {
			nsMust(t, m.host, "client", "init", "--home", m.home, "--name", m.name, "--role", m.role)
		}
		pub := filepath.Join(exchange, m.name+".pub.json")
		copyFile(t, filepath.Join(m.home, m.name+".pub.json"), pub)
		pubs = append(pubs, pub)
	}
	cfg := filepath.Join(dir, "cluster.json")
	must(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", mode, "--tau", "0.2"}, pubs...)...)

	// 2. Each server runs in its own host with the configuration and its
	// home.
	for _, s := range servers {
		startNs(t, s, cfg, s.home)
	}
	waitAgree(t, office, cfg)

	// 3. The operator enrolls, the device identifies through the other
	// entry, the operator deletes.
	data := t.TempDir()
	gallery, ids, probes := filepath.Join(data, "gallery.npy"), filepath.Join(data, "ids.txt"), filepath.Join(data, "probes.npy")
	must(t, "synth", "--people", "200", "--samples", "2", "--intra", "0.6", "--sample", "0", "--out", gallery, "--ids", ids)
	must(t, "synth", "--people", "200", "--samples", "2", "--intra", "0.6", "--sample", "1", "--out", probes)
	nsMust(t, office.host, "enroll", "--config", cfg, "--home", office.home, "--entry", "p1", "--ids", ids, "--templates", gallery, "--batch", "64", "--quiet")
	identify := func(entry string) []result {
		t.Helper()
		rs := parseResults(t, nsMust(t, gate.host, "identify", "--config", cfg, "--home", gate.home, "--entry", entry, "--templates", probes, "--json"))
		if len(rs) != 200 {
			t.Fatalf("%d answers for 200 probes", len(rs))
		}
		return rs
	}
	checkAnswers := func(rs []result, deleted int) {
		t.Helper()
		right := 0
		for i, r := range rs {
			want := fmt.Sprintf("person-%d/sample-0", i)
			switch {
			case r.Accepted && r.ID != nil && *r.ID == want && i != deleted:
				right++
			case r.Accepted && r.ID != nil && *r.ID == want:
				t.Fatalf("probe %d still finds the deleted %s", i, want)
			}
		}
		if right < 170 {
			t.Fatalf("%d of 200 genuine probes found their person", right)
		}
	}
	checkAnswers(identify("p2"), -1)
	if _, errs, code := nsRun(t, gate.host, "delete", "--config", cfg, "--home", gate.home, "--id", "person-3/sample-0"); code == 0 {
		t.Fatalf("a device deleted an id: %s", errs)
	}
	nsMust(t, office.host, "delete", "--config", cfg, "--home", office.home, "--entry", "p2", "--id", "person-3/sample-0")
	checkAnswers(identify("p1"), 3)
	if mode != "2pc" {
		return
	}

	// 4. A server whose certificate the configuration does not pin: a
	// second p2 with its own key on p2's host.
	p2 := servers[1]
	impostor := &nsMember{name: "p2", role: "share-holder", host: p2.host, home: filepath.Join(dir, "impostor"), log: filepath.Join(dir, "impostor.log")}
	nsMust(t, p2.host, "party", "init", "--home", impostor.home, "--name", "p2", "--role", "share-holder", "--listen", p2.addr())
	_, errs, code := nsRun(t, p2.host, "serve", "--config", cfg, "--home", impostor.home)
	if code == 0 || !strings.Contains(errs, "pins another certificate for p2") {
		t.Fatalf("a p2 with another key started with the configuration: exit %d, %q", code, errs)
	}
	// It starts only with a configuration of its own; then it sits at
	// p2's address while the real p2 is down, and nobody accepts it.
	impCfg := filepath.Join(dir, "impostor-cluster.json")
	impPubs := append([]string{}, pubs...)
	impPubs[1] = filepath.Join(impostor.home, "p2.pub.json")
	must(t, append([]string{"cluster", "assemble", "--out", impCfg, "--mode", mode, "--tau", "0.2"}, impPubs...)...)
	if err := p2.proc.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	startNs(t, impostor, impCfg, impostor.home)
	// The first query through p1 may still meet p1's connection to the
	// real p2, which only times out: the impostor cannot reset it without
	// p2's key. Then p1 dials p2's address and refuses what answers.
	for _, entry := range []string{"p1", "p2"} {
		var errs string
		for try := 0; try < 3 && !strings.Contains(errs, "certificate not pinned"); try++ {
			var out string
			var code int
			out, errs, code = nsRun(t, gate.host, "identify", "--config", cfg, "--home", gate.home, "--entry", entry, "--templates", probes, "--json", "--timeout", "10s")
			if code == 0 {
				t.Fatalf("identify through %s succeeded with an impostor p2:\n%s", entry, out)
			}
		}
		if !strings.Contains(errs, "certificate not pinned") {
			t.Fatalf("through %s, the impostor's certificate was never refused: %s", entry, errs)
		}
		t.Logf("through %s with an impostor p2: %s", entry, strings.TrimSpace(errs))
	}
	if err := impostor.proc.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The real p2 comes back and nothing was lost.
	startNs(t, p2, cfg, p2.home)
	waitAgree(t, office, cfg)
	checkAnswers(identify("p2"), 3)
}

// TestNetnsWANBench runs "idface bench --link": the servers in their own
// namespaces 10 ms apart at 100 Mbit/s. An identification cannot beat its
// floor (a round trip and the helper's blocks at the link's rate).
func TestNetnsWANBench(t *testing.T) {
	if err := netlab.CheckShaping(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	out := must(t, "bench", "--mode", "2pc", "--ids", "3000", "--queries", "5", "--link", "rtt=10ms,rate=100mbit", "--json")
	var r experiments.BenchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	// 3000 rows: the helper sends 2*3008*63 bits, 47 KB: 3.8 ms at 100 Mbit/s.
	if r.Link != "rtt=10ms,rate=100mbit" || r.RTTMs != 10 || r.RateMbit != 100 || r.FloorRTTs != 1 ||
		r.WANFloorMs < 13 || r.WANFloorMs > 15 {
		t.Fatalf("link and floor: %+v", r)
	}
	if r.IdentifyMin < r.WANFloorMs {
		t.Fatalf("an identify took %.2f ms, under its floor of %.2f ms: the link adds less than it should", r.IdentifyMin, r.WANFloorMs)
	}
	t.Logf("identify p50 %.2f ms, min %.2f ms, floor %.2f ms", r.IdentifyP50, r.IdentifyMin, r.WANFloorMs)
}

// nsRun runs idface inside host h and returns stdout, stderr and the exit
// code; it gives up after two minutes.
func nsRun(t *testing.T, h *netlab.Host, args ...string) (string, string, int) {
	t.Helper()
	cmd := h.Command(idfaceBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	p, err := h.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(2 * time.Minute):
		p.Stop(time.Second)
		t.Fatalf("idface %s in %s: no answer in 2 minutes", strings.Join(args, " "), h.Name)
	}
	var ee *exec.ExitError
	switch err := p.Err(); {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	default:
		t.Fatalf("idface %s in %s: %v", strings.Join(args, " "), h.Name, err)
		return "", "", -1
	}
}

// nsMust runs idface inside host h and fails the test unless it exits 0.
func nsMust(t *testing.T, h *netlab.Host, args ...string) string {
	t.Helper()
	out, errs, code := nsRun(t, h, args...)
	if code != 0 {
		t.Fatalf("idface %s in %s: exit %d\n%s%s", strings.Join(args, " "), h.Name, code, out, errs)
	}
	return out
}

// startNs starts a server in its host; the lab stops it at cleanup.
func startNs(t *testing.T, m *nsMember, cfg, home string) {
	t.Helper()
	startNsArgs(t, m, "serve", "--config", cfg, "--home", home)
}

// startNsArgs starts idface with args in m's host, its output in m.log.
func startNsArgs(t *testing.T, m *nsMember, args ...string) {
	t.Helper()
	logf, err := os.OpenFile(m.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := m.host.Command(idfaceBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if m.proc, err = m.host.Start(cmd); err != nil {
		t.Fatal(err)
	}
}

// waitAgree polls cluster status from the operator's host until every
// server answers and all agree.
func waitAgree(t *testing.T, op *nsMember, cfg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errs, _ := nsRun(t, op.host, "cluster", "status", "--config", cfg, "--home", op.home)
		if strings.Contains(out, "all servers agree") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers not ready after 30 s:\n%s%s", out, errs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
