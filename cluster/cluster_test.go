package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idface/idface/config"
)

// TestInitKeysPrivateOnForce: keys are written 0600 even over an older
// file with looser permissions (--force).
func TestInitKeysPrivateOnForce(t *testing.T) {
	dir := t.TempDir()
	p, err := Init(dir, Options{Mode: config.Mode2PC, Parties: 2})
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(HomeDir(dir, "p1"), "identity.key")
	os.Chmod(key, 0o644)
	if _, err := Init(dir, Options{Mode: config.Mode2PC, Parties: 2}); err == nil {
		t.Fatal("init over an existing cluster without --force")
	}
	if _, err := Init(dir, Options{Mode: config.Mode2PC, Parties: 2, Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(p.Servers(), p.Clients()...) {
		key := filepath.Join(HomeDir(dir, m.Name), "identity.key")
		st, err := os.Stat(key)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", key, st.Mode(), err)
		}
	}
	if c, ok := p.Client("device"); !ok || config.ClientRole(c) != config.RoleDevice {
		t.Fatal("init made no device identity")
	}
}

// TestFailedInitLeavesNothing: a cluster init refused after the homes
// were made (beta above the dimension) leaves no homes, so the retry with the
// right flags succeeds (it used to blame an existing home).
func TestFailedInitLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(dir, Options{Mode: config.Mode2PC, Parties: 2, Dim: 64, Alpha: 16, Beta: 100}); err == nil {
		t.Fatal("beta above the dimension accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "homes")); !os.IsNotExist(err) {
		t.Fatalf("a failed init left %s: %v", filepath.Join(dir, "homes"), err)
	}
	if _, err := Init(dir, Options{Mode: config.Mode2PC, Parties: 2, Dim: 64, Alpha: 16, Beta: 8}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
}

// TestRunningChecksTheProcess: a pid file names a process by pid and start
// time, so a recycled pid (or a stale file) is never taken for a server.
func TestRunningChecksTheProcess(t *testing.T) {
	dir := t.TempDir()
	p, err := Init(dir, Options{Mode: config.Mode2PC, Parties: 2})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "run"), 0o700)
	me := os.Getpid()
	started, err := startTime(me)
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	os.WriteFile(pidFile(p, "p1"), fmt.Appendf(nil, "%d %d\n", me, started), 0o600)
	if pid, ok := Running(p, "p1"); !ok || pid != me {
		t.Fatal("the recorded process is not found")
	}
	os.WriteFile(pidFile(p, "p1"), fmt.Appendf(nil, "%d %d\n", me, started+1), 0o600)
	if _, ok := Running(p, "p1"); ok {
		t.Fatal("a process with another start time was taken for the server")
	}
	os.WriteFile(pidFile(p, "p1"), fmt.Appendf(nil, "%d\n", me), 0o600) // the old format
	if _, ok := Running(p, "p1"); ok {
		t.Fatal("a pid without a start time was trusted")
	}
}
