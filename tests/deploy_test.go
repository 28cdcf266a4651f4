package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
)

// TestDeployFromDescriptors sets a cluster up the way separate
// organisations do, on loopback: every member creates its own home (its key
// never leaves it), the configuration is assembled from public descriptors
// only, servers run with --config and --home; then a key rotation and a new
// device change the configuration, and servers that run different
// configurations show up in 'cluster status'.
func TestDeployFromDescriptors(t *testing.T) {
	root := t.TempDir()
	home := func(name string) string { return filepath.Join(root, name) }
	pub := func(name string) string { return filepath.Join(home(name), name+".pub.json") }
	for _, p := range []string{"orga", "orgb"} {
		must(t, "party", "init", "--home", home(p), "--name", p, "--role", "share-holder", "--listen", "127.0.0.1:"+freePort(t))
	}
	must(t, "client", "init", "--home", home("ops"), "--name", "ops", "--role", "operator")
	must(t, "client", "init", "--home", home("gate"), "--name", "gate", "--role", "device")
	if st, _ := os.Stat(filepath.Join(home("orga"), "identity.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v", st.Mode())
	}
	conf := filepath.Join(root, "cluster.json")
	// Only public descriptors are accepted.
	if _, errs, code := idface(t, "cluster", "assemble", "--out", conf, "--mode", "2pc", filepath.Join(home("orga"), "identity.key"), pub("orgb")); code == 0 || !strings.Contains(errs, "private key") {
		t.Fatalf("assembled from a private key: %d %s", code, errs)
	}
	must(t, "cluster", "assemble", "--out", conf, "--mode", "2pc", "--tau", "0.2", pub("orga"), pub("orgb"), pub("ops"), pub("gate"))
	b, _ := os.ReadFile(conf)
	if strings.Contains(string(b), "PRIVATE") {
		t.Fatal("the configuration holds a private key")
	}

	procs := map[string]*exec.Cmd{}
	serve := func(name string) {
		t.Helper()
		cmd := exec.Command(idfaceBin, "serve", "--config", conf, "--home", home(name))
		logf, _ := os.Create(filepath.Join(root, name+".log"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[name] = cmd
	}
	stop := func(name string) {
		if c := procs[name]; c != nil {
			c.Process.Signal(syscall.SIGTERM)
			c.Wait()
			delete(procs, name)
		}
	}
	t.Cleanup(func() {
		for n := range procs {
			stop(n)
		}
		if t.Failed() {
			for _, n := range []string{"orga", "orgb"} {
				b, _ := os.ReadFile(filepath.Join(root, n+".log"))
				t.Logf("log of %s:\n%s", n, b)
			}
		}
	})
	serve("orga")
	serve("orgb")
	as := func(member string, args ...string) []string {
		return append(args, "--config", conf, "--home", home(member))
	}
	waitUp := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, _, code := idface(t, as("ops", "cluster", "status")...)
			if code == 0 && strings.Contains(out, "all servers agree") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not up:\n%s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitUp()
	d := newDataset(t, t.TempDir(), 40, 51)
	must(t, as("ops", "enroll", "--ids", d.ids, "--templates", d.enroll, "--quiet")...)
	q := filepath.Join(root, "q.npy")
	writeNpy(t, q, d.queries[:3])
	rs := parseResults(t, must(t, as("gate", "identify", "--templates", q, "--json")...))
	if len(rs) != 3 || rs[0].ID == nil || *rs[0].ID != "person-0" {
		t.Fatalf("identify through the deployment: %+v", rs)
	}
	if _, errs, code := idface(t, as("gate", "delete", "--id", "person-1")...); code == 0 || !strings.Contains(errs, "may not send Delete") {
		t.Fatalf("a device deleted: %d %s", code, errs)
	}

	// orgb rotates its key: with the old configuration it refuses to start.
	stop("orgb")
	must(t, "party", "rotate", "--home", home("orgb"))
	if _, errs, code := idface(t, "serve", "--config", conf, "--home", home("orgb")); code == 0 || !strings.Contains(errs, "pins another certificate") {
		t.Fatalf("orgb started with the old configuration: %d %s", code, errs)
	}
	// A new configuration (serial 2, same cluster): orgb runs it, orga still
	// the old one, which no longer knows orgb's certificate.
	must(t, "client", "init", "--home", home("gate2"), "--name", "gate2", "--role", "device")
	out := must(t, "cluster", "assemble", "--out", conf, "--mode", "2pc", "--tau", "0.2", pub("orga"), pub("orgb"), pub("ops"), pub("gate"), pub("gate2"))
	if !strings.Contains(out, "serial 2") {
		t.Fatalf("reassembly: %s", out)
	}
	serve("orgb")
	time.Sleep(500 * time.Millisecond)
	st, _, code := idface(t, as("ops", "cluster", "status")...)
	if !strings.Contains(st, "differs from this config") || code != 4 {
		t.Fatalf("status does not show orga's old configuration (exit %d, want 4):\n%s", code, st)
	}
	stop("orga")
	serve("orga")
	waitUp()
	if st := must(t, as("ops", "cluster", "status")...); strings.Contains(st, "DIFFERENT") || !strings.Contains(st, "serial 2") {
		t.Fatalf("status after the rolling restart:\n%s", st)
	}
	rs = parseResults(t, must(t, as("gate2", "identify", "--templates", q, "--json")...))
	if rs[0].ID == nil || *rs[0].ID != "person-0" {
		t.Fatalf("after the rotation: %+v", rs[0])
	}

	// The device gate is removed: the configuration is assembled again
	// without its descriptor (serial 3) and the servers restart one at a
	// time. gate still holds its key and the old configuration, and is
	// refused by every server; gate2 goes on.
	old := filepath.Join(root, "cluster-serial2.json")
	if b, err := os.ReadFile(conf); err != nil || os.WriteFile(old, b, 0o644) != nil {
		t.Fatal(err)
	}
	out = must(t, "cluster", "assemble", "--out", conf, "--mode", "2pc", "--tau", "0.2", pub("orga"), pub("orgb"), pub("ops"), pub("gate2"))
	if !strings.Contains(out, "serial 3") || !strings.Contains(out, "2 clients") {
		t.Fatalf("reassembly without gate: %s", out)
	}
	for _, s := range []string{"orga", "orgb"} {
		stop(s)
		serve(s)
	}
	waitUp()
	for _, entry := range []string{"orga", "orgb"} {
		out, errs, code := idface(t, "identify", "--config", old, "--home", home("gate"), "--entry", entry, "--templates", q, "--json")
		if code == 0 || !strings.Contains(errs, entry+" refused this member's certificate") {
			t.Fatalf("removed device through %s: exit %d\n%s%s", entry, code, out, errs)
		}
		t.Logf("removed device through %s: %s", entry, strings.TrimSpace(errs))
	}
	// With the new configuration gate is told at once that it is not a
	// member.
	if _, errs, code := idface(t, as("gate", "identify", "--templates", q, "--json")...); code == 0 || !strings.Contains(errs, "does not list gate") {
		t.Fatalf("removed device with the new configuration: exit %d %s", code, errs)
	}
	rs = parseResults(t, must(t, as("gate2", "identify", "--templates", q, "--json")...))
	if rs[0].ID == nil || *rs[0].ID != "person-0" {
		t.Fatalf("a remaining device after gate's removal: %+v", rs[0])
	}
}

// freePort returns a free UDP port on 127.0.0.1.
func freePort(t *testing.T) string {
	t.Helper()
	port, err := cluster.FreePort("udp", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}
