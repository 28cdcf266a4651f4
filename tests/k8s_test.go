package tests

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/home"
)

// TestPodCommands runs a blind cluster as its Kubernetes pods would: the
// init container's and the server's command lines are read out of the
// manifests 'idface deploy k8s' renders, and run here with the pod's
// paths mapped to directories (the Secret laid out as Kubernetes mounts
// it: symlinks into "..data", group-readable) and its addresses to
// loopback. Each server answers /healthz "serving", the cluster enrolls
// and identifies, and the installed homes stay as installed (the lock and
// the data live on the data volume).
func TestPodCommands(t *testing.T) {
	// The commands, from a cluster made for Kubernetes.
	k8sDir := t.TempDir()
	must(t, "cluster", "init", "--cluster", k8sDir, "--mode", "blind", "--parties", "2", "--dim", "64", "--beta", "16", "--k8s", "gates")
	manifest := must(t, "deploy", "k8s", "--cluster", k8sDir, "--image", "idface:test")
	commands := map[string][2][]string{} // member: init, serve
	for _, doc := range strings.Split(manifest, "\n---\n")[1:] {
		var ss struct {
			Kind string
			Spec struct {
				Template struct {
					Metadata struct{ Labels map[string]string }
					Spec     struct{ InitContainers, Containers []struct{ Command []string } }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &ss); err != nil {
			t.Fatal(err)
		}
		if ss.Kind == "StatefulSet" {
			pod := ss.Spec.Template.Spec
			commands[ss.Spec.Template.Metadata.Labels["idface.io/member"]] = [2][]string{pod.InitContainers[0].Command, pod.Containers[0].Command}
		}
	}

	// The same mode on loopback, run by those commands.
	dir := t.TempDir()
	must(t, "cluster", "init", "--cluster", dir, "--mode", "blind", "--parties", "2", "--dim", "64", "--beta", "16", "--tau", "0.2")
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(commands) != len(cfg.Servers()) {
		t.Fatalf("the manifest runs %d servers, the cluster has %d", len(commands), len(cfg.Servers()))
	}
	metrics := map[string]string{} // each server's /healthz
	for _, s := range cfg.Servers() {
		cmds, ok := commands[s.Name]
		if !ok {
			t.Fatalf("the manifest does not run %s", s.Name)
		}
		pod := t.TempDir()
		secret := k8sSecret(t, cluster.HomeDir(dir, s.Name))
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		metrics[s.Name] = l.Addr().String()
		l.Close()
		mapped := func(args []string) []string {
			var out []string
			for _, a := range args[1:] { // args[0] is /idface
				switch {
				case a == "/etc/idface/secret":
					a = secret
				case strings.HasPrefix(a, "/etc/idface/cluster/"):
					a = filepath.Join(dir, config.File)
				case strings.HasPrefix(a, "/run/idface/") || strings.HasPrefix(a, "/var/lib/idface"):
					a = filepath.Join(pod, a)
				case strings.HasPrefix(a, "0.0.0.0:9465"): // --health-addr
					a = metrics[s.Name]
				case strings.HasPrefix(a, "0.0.0.0:"):
					a = s.Addr
				}
				out = append(out, a)
			}
			return out
		}
		if err := os.MkdirAll(filepath.Join(pod, "var/lib/idface"), 0o700); err != nil { // the volume
			t.Fatal(err)
		}
		must(t, mapped(cmds[0])...)
		serve := exec.Command(idfaceBin, mapped(cmds[1])...)
		var logs bytes.Buffer
		serve.Stdout, serve.Stderr = &logs, &logs
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		name := s.Name
		t.Cleanup(func() {
			serve.Process.Signal(syscall.SIGTERM)
			serve.Wait()
			if t.Failed() {
				t.Logf("%s:\n%s", name, logs.String())
			}
		})
		installed := filepath.Join(pod, "run/idface/home")
		t.Cleanup(func() {
			entries, _ := os.ReadDir(installed)
			if len(entries) != 5 {
				t.Errorf("%s's installed home holds %d files, want its 5 (nothing written there)", name, len(entries))
			}
			if _, err := os.Stat(filepath.Join(pod, "var/lib/idface/data/lock")); err != nil {
				t.Errorf("%s: no lock on the data volume: %v", name, err)
			}
		})
	}
	for name, addr := range metrics {
		deadline := time.Now().Add(60 * time.Second)
		for code, body := healthz(addr); code != 200 || body != "serving"; code, body = healthz(addr) {
			if time.Now().After(deadline) {
				t.Fatalf("%s's /healthz: %d %q", name, code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	d := newDatasetDim(t, t.TempDir(), 20, 64, 7)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:5])
	for i, r := range parseResults(t, must(t, "identify", "--cluster", dir, "--client", "device", "--templates", q, "--json")) {
		if !r.Accepted || r.ID == nil || *r.ID != d.names[i] {
			t.Errorf("query %d: %+v, want %s", i, r, d.names[i])
		}
	}
}

// healthz reads a server's /healthz; a server not listening is 0.
func healthz(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// k8sSecret lays out a home's files as Kubernetes mounts a Secret made
// of them: a timestamped directory of group-readable files, "..data"
// linking to it, and a link per file.
func k8sSecret(t *testing.T, homeDir string) string {
	t.Helper()
	files, err := home.Files(homeDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_11_25_00_00_00.000000001")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(data, name), b, 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
