package tests

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/deploy"
	"github.com/idface/idface/harness/netlab"
	"github.com/idface/idface/host/home"
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
	manifest := must(t, "deploy", "k8s", "--cluster", k8sDir, "--image", "idface:test", "--allow-unpinned")
	pods := renderedPods(t, manifest)
	commands := map[string][2][]string{} // member: init, serve
	for name, pd := range pods {
		commands[name] = [2][]string{pd.init, pd.serve}
	}

	// The same mode on loopback, run by those commands. A bare --tau: at
	// d = 64 the synthetic default (FPIR 1e-3 among 1,000) rejects these
	// few people, and this test is of the commands, not of a threshold.
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
		files, err := home.Files(cluster.HomeDir(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		secret := k8sSecret(t, files)
		hp, err := cluster.FreePort("tcp", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		metrics[s.Name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(hp))
		mapped := func(args []string) []string {
			out := inPod(args, pod, secret, filepath.Join(dir, config.File))
			for i, a := range out {
				switch {
				case strings.HasPrefix(a, "0.0.0.0:9465"): // --health-addr
					out[i] = metrics[s.Name]
				case strings.HasPrefix(a, "0.0.0.0:"): // --listen
					out[i] = s.Addr
				}
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

// k8sSecret lays out a Secret's files as Kubernetes mounts them: a
// timestamped directory of group-readable files, "..data" linking to it,
// and a link per file.
func k8sSecret(t *testing.T, files map[string][]byte) string {
	t.Helper()
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

// pod is what a rendered manifest runs for one server: its init
// container's and its server's command lines, and its Secret's files.
type pod struct {
	init, serve []string
	secret      map[string][]byte
}

// renderedPods reads the StatefulSets and Secrets of a manifest, by member.
func renderedPods(t *testing.T, manifest string) map[string]*pod {
	t.Helper()
	pods := map[string]*pod{}
	get := func(name string) *pod {
		if pods[name] == nil {
			pods[name] = &pod{}
		}
		return pods[name]
	}
	for _, doc := range strings.Split(manifest, "\n---\n")[1:] {
		var obj struct {
			Kind     string
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Template struct {
					Metadata struct{ Labels map[string]string }
					Spec     struct{ InitContainers, Containers []struct{ Command []string } }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "StatefulSet":
			pd := get(obj.Spec.Template.Metadata.Labels["idface.io/member"])
			pd.init, pd.serve = obj.Spec.Template.Spec.InitContainers[0].Command, obj.Spec.Template.Spec.Containers[0].Command
		case "Secret":
			var sec struct{ Data map[string][]byte } // base64 in the YAML
			if err := yaml.Unmarshal([]byte(doc), &sec); err != nil {
				t.Fatal(err)
			}
			get(obj.Metadata.Labels["idface.io/member"]).secret = sec.Data
		}
	}
	return pods
}

// inPod maps a pod's command line (args[0] is /idface) to this machine:
// its volumes to directories under root, its Secret to secret, its
// configuration to cfg; addresses stay as they are.
func inPod(args []string, root, secret, cfg string) []string {
	var out []string
	for _, a := range args[1:] {
		switch {
		case a == "/etc/idface/secret":
			a = secret
		case strings.HasPrefix(a, "/etc/idface/cluster/"):
			a = cfg
		case strings.HasPrefix(a, "/run/idface/") || strings.HasPrefix(a, "/var/lib/idface"):
			a = filepath.Join(root, a)
		}
		out = append(out, a)
	}
	return out
}

// TestNetnsPods runs a blind cluster the way three organisations run it
// on Kubernetes, each pod a network namespace of its own: each
// organisation makes its server's home on its own host, the
// configuration is assembled from descriptors, each renders only its own
// server ('deploy k8s --config --home'), and each pod runs its init
// container's and server's command lines exactly as rendered (its
// Secret's files taken from the rendered Secret, mounted as Kubernetes
// does; paths mapped to directories, addresses and ports as rendered:
// every pod listens on 0.0.0.0:7443 and serves /healthz on 9465). The
// cluster answers /healthz, enrolls and identifies from the operator's
// and the gate's hosts.
func TestNetnsPods(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	lab := newNsLab(t)
	var err error
	dir := t.TempDir()
	servers := []*nsMember{{name: "orga", role: "share-holder"}, {name: "orgb", role: "share-holder"}, {name: "decider", role: "decider"}}
	office := &nsMember{name: "office", role: "operator"}
	gate := &nsMember{name: "gate", role: "device"}
	logsOnFailure(t, servers)
	var pubs []string
	for _, m := range append(append([]*nsMember{}, servers...), office, gate) {
		if m.host, err = lab.AddHost(m.name); err != nil {
			t.Fatal(err)
		}
		m.home, m.log = filepath.Join(dir, "hosts", m.name), filepath.Join(dir, m.name+".log")
		if m.role == "operator" || m.role == "device" {
			nsMust(t, m.host, "client", "init", "--home", m.home, "--name", m.name, "--role", m.role)
		} else {
			nsMust(t, m.host, "party", "init", "--home", m.home, "--name", m.name, "--role", m.role, "--listen", "0.0.0.0:"+nsPort, "--advertise", m.addr())
		}
		pubs = append(pubs, filepath.Join(m.home, m.name+".pub.json"))
	}
	cfg := filepath.Join(dir, "cluster.json")
	must(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind"}, pubs...)...)

	for _, s := range servers {
		rendered := filepath.Join(dir, s.name+".yaml")
		must(t, "deploy", "k8s", "--config", cfg, "--home", s.home, "--namespace", "gates", "--image", "idface:test", "--allow-unpinned", "--out", rendered)
		if fi, err := os.Stat(rendered); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s, holding a key: %v %v", rendered, fi.Mode(), err)
		}
		b, err := os.ReadFile(rendered)
		if err != nil {
			t.Fatal(err)
		}
		pods := renderedPods(t, string(b))
		pd := pods[s.name]
		if len(pods) != 1 || pd == nil || pd.secret == nil {
			t.Fatalf("%s's render holds %d pods (its own: %v)", s.name, len(pods), pd != nil)
		}
		root := filepath.Join(dir, "pods", s.name)
		if err := os.MkdirAll(filepath.Join(root, "var/lib/idface"), 0o700); err != nil { // the volume
			t.Fatal(err)
		}
		secret := k8sSecret(t, pd.secret)
		nsMust(t, s.host, inPod(pd.init, root, secret, cfg)...)
		startNsArgs(t, s, inPod(pd.serve, root, secret, cfg)...)
	}
	waitServing(t, servers)
	waitAgree(t, office, cfg)
	d := newDatasetDim(t, t.TempDir(), 30, 512, 11)
	nsMust(t, office.host, "enroll", "--config", cfg, "--home", office.home, "--entry", "orga", "--ids", d.ids, "--templates", d.enroll, "--quiet")
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:6])
	for i, r := range parseResults(t, nsMust(t, gate.host, "identify", "--config", cfg, "--home", gate.home, "--entry", "orgb", "--templates", q, "--json")) {
		if !r.Accepted || r.ID == nil || *r.ID != d.names[i] {
			t.Errorf("query %d: %+v, want %s", i, r, d.names[i])
		}
	}
}

// waitServing waits until every pod's /healthz (port 9465 on its host)
// says "serving".
func waitServing(t *testing.T, pods []*nsMember) {
	t.Helper()
	for _, m := range pods {
		addr := m.host.Addr.String() + ":9465"
		deadline := time.Now().Add(60 * time.Second)
		for code, body := healthz(addr); code != 200 || body != "serving"; code, body = healthz(addr) {
			if time.Now().After(deadline) {
				t.Fatalf("%s's /healthz at %s: %d %q", m.name, addr, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// setPods reads the StatefulSets of a manifest by name: each set's init
// and server command lines and replicas, with its member's Secret.
func setPods(t *testing.T, manifest string) map[string]*setPod {
	t.Helper()
	sets := map[string]*setPod{}
	var secret map[string][]byte
	for _, doc := range strings.Split(manifest, "\n---\n")[1:] {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Replicas int
				Template struct {
					Spec struct{ InitContainers, Containers []struct{ Command []string } }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "StatefulSet":
			sets[obj.Metadata.Name] = &setPod{pod: pod{init: obj.Spec.Template.Spec.InitContainers[0].Command, serve: obj.Spec.Template.Spec.Containers[0].Command}, replicas: obj.Spec.Replicas}
		case "Secret":
			var sec struct{ Data map[string][]byte } // base64 in the YAML
			if err := yaml.Unmarshal([]byte(doc), &sec); err != nil {
				t.Fatal(err)
			}
			secret = sec.Data
		}
	}
	for _, s := range sets {
		s.secret = secret
	}
	return sets
}

// setPod is one StatefulSet of a manifest.
type setPod struct {
	pod
	replicas int
}

// TestNetnsShardPods runs a sharded blind cluster as three organisations
// run it on Kubernetes, every pod in a network namespace of its own: each
// organisation's coordinator and each of its two shards. Homes are made on
// the coordinators' hosts with their shards' addresses, the configuration
// is assembled with --shards 2, each organisation renders its own member
// (a coordinator set and a shard set), and every pod runs its init and
// server command lines as rendered (a shard pod knows its shard from its
// name, as Kubernetes gives it: HOSTNAME=idface-NAME-shard-N). The cluster
// agrees, enrolls and identifies from the operator's and the gate's hosts.
func TestNetnsShardPods(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	const S = 2
	lab := newNsLab(t)
	var err error
	dir := t.TempDir()
	servers := []*nsMember{{name: "orga", role: "share-holder"}, {name: "orgb", role: "share-holder"}, {name: "decider", role: "decider"}}
	office := &nsMember{name: "office", role: "operator"}
	gate := &nsMember{name: "gate", role: "device"}
	shards := map[string][]*nsMember{} // each server's shard pods
	var all []*nsMember
	for _, m := range servers {
		all = append(all, m)
		for s := range S {
			sh := &nsMember{name: fmt.Sprintf("%s-shard-%d", m.name, s)}
			shards[m.name] = append(shards[m.name], sh)
			all = append(all, sh)
		}
	}
	logsOnFailure(t, all)
	var pubs []string
	for _, m := range append(all, office, gate) {
		if m.host, err = lab.AddHost(m.name); err != nil {
			t.Fatal(err)
		}
		m.home, m.log = filepath.Join(dir, "hosts", m.name), filepath.Join(dir, m.name+".log")
	}
	for _, m := range append(append([]*nsMember{}, servers...), office, gate) {
		switch m.role {
		case "operator", "device":
			nsMust(t, m.host, "client", "init", "--home", m.home, "--name", m.name, "--role", m.role)
		default:
			var addrs []string
			for _, sh := range shards[m.name] {
				addrs = append(addrs, sh.addr())
			}
			nsMust(t, m.host, "party", "init", "--home", m.home, "--name", m.name, "--role", m.role, "--listen", "0.0.0.0:"+nsPort, "--advertise", m.addr(),
				"--shard-addrs", strings.Join(addrs, ","))
		}
		pubs = append(pubs, filepath.Join(m.home, m.name+".pub.json"))
	}
	// The row-holding organisations and the operator share the shard key;
	// the decider's organisation never gets it.
	cfg, key := filepath.Join(dir, "cluster.json"), filepath.Join(dir, "shard.key")
	must(t, "shard", "key", "--out", key)
	for _, m := range []*nsMember{servers[0], servers[1], office} {
		b, err := os.ReadFile(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.home, config.ShardKeyFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	must(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind", "--shards", fmt.Sprint(S), "--shard-key", key}, pubs...)...)

	for _, m := range servers {
		rendered := filepath.Join(dir, m.name+".yaml")
		must(t, "deploy", "k8s", "--config", cfg, "--home", m.home, "--namespace", "gates", "--image", "idface:test", "--allow-unpinned", "--out", rendered)
		b, err := os.ReadFile(rendered)
		if err != nil {
			t.Fatal(err)
		}
		sets := setPods(t, string(b))
		coord, shardSet := sets[deploy.Name(m.name)], sets[deploy.ShardSet(m.name)]
		if len(sets) != 2 || coord == nil || shardSet == nil || shardSet.replicas != S || coord.secret == nil {
			t.Fatalf("%s's render: %d sets", m.name, len(sets))
		}
		secret := k8sSecret(t, coord.secret)
		run := func(pm *nsMember, p pod, podName string) {
			root := filepath.Join(dir, "pods", podName)
			if err := os.MkdirAll(filepath.Join(root, "var/lib/idface"), 0o700); err != nil {
				t.Fatal(err)
			}
			nsMust(t, pm.host, inPod(p.init, root, secret, cfg)...)
			logf, err := os.OpenFile(pm.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			cmd := pm.host.Command(idfaceBin, inPod(p.serve, root, secret, cfg)...)
			cmd.Env = append(os.Environ(), "HOSTNAME="+podName) // Kubernetes names the pod's host
			cmd.Stdout, cmd.Stderr = logf, logf
			if pm.proc, err = pm.host.Start(cmd); err != nil {
				t.Fatal(err)
			}
		}
		run(m, coord.pod, deploy.Name(m.name)+"-0")
		for s, sh := range shards[m.name] {
			run(sh, shardSet.pod, fmt.Sprintf("%s-%d", deploy.ShardSet(m.name), s))
		}
	}
	waitServing(t, all)
	waitAgree(t, office, cfg)
	d := newDatasetDim(t, t.TempDir(), 40, 512, 12)
	nsMust(t, office.host, "enroll", "--config", cfg, "--home", office.home, "--entry", "orga", "--ids", d.ids, "--templates", d.enroll, "--quiet")
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:8])
	for i, r := range parseResults(t, nsMust(t, gate.host, "identify", "--config", cfg, "--home", gate.home, "--entry", "orgb", "--templates", q, "--json")) {
		if !r.Accepted || r.ID == nil || *r.ID != d.names[i] {
			t.Errorf("query %d: %+v, want %s", i, r, d.names[i])
		}
	}
	// Each shard holds its own rows: the status lists every shard agreeing.
	if st := nsMust(t, office.host, "cluster", "status", "--config", cfg, "--home", office.home); !strings.Contains(st, "orgb#1") || !strings.Contains(st, "coordinator of 2 shards") {
		t.Fatalf("status:\n%s", st)
	}
}
