// Package cluster creates and runs local idface clusters: a directory with
// the cluster config and an identity (key and self-signed certificate) for
// every server and client, and one OS process per server started from the
// idface binary itself ("idface serve"). Operators use it through
// "idface cluster init|up|down|status"; tests and experiments call it
// directly.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/deploy"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/internal/codec/store"
)

// Options of a new cluster; zero values take config's defaults.
type Options struct {
	Mode    config.Mode
	Parties int
	Devices int // device identities (identify only); default 1
	Dim     int
	Alpha   int
	Beta    int
	Tau     *float64
	Host    string // default 127.0.0.1
	// Kubernetes, when set, makes a test cluster for that namespace of
	// one Kubernetes cluster ('idface deploy k8s --cluster'): servers
	// listen on 0.0.0.0:deploy.QUICPort and advertise their pods' names.
	Kubernetes string
	Force      bool // overwrite an existing cluster.json
	Metrics    bool // give every server a loopback /metrics address
	// RevealScores makes a research cluster whose answers carry scores.
	RevealScores bool
	// HideProbes makes a cluster whose probes no server sees (replicated).
	HideProbes bool
	// GalleryLevels and QueryLevels are blind mode's transforms ("L:a1,...").
	GalleryLevels, QueryLevels string
	// Scheme is mode he's encryption: "bgv" (default) or "paillier".
	Scheme string
	// Calibration records the target FPIR Tau was chosen for.
	Calibration *config.Calibration
	// BatchMax and BatchWait group an entry's concurrent identifies
	// (config.Literal.BatchMax, BatchWait).
	BatchMax  int
	BatchWait time.Duration
	// Shards runs every server as a coordinator and this many shard
	// servers (config.Literal.Shards); 0 or 1: unsharded.
	Shards int
}

// Init writes a new local cluster into dir, built on the same pieces as a
// deployment across hosts: a home per member under dir/homes (its own key,
// certificate, public descriptor and data), and dir/cluster.json assembled
// from the public descriptors. Members: the servers of the mode, one
// operator ("client") and o.Devices devices ("device", "device2", ...).
func Init(dir string, o Options) (_ *config.Params, err error) {
	if _, err := os.Stat(filepath.Join(dir, config.File)); err == nil && !o.Force {
		return nil, fmt.Errorf("%s already holds a cluster (use --force to replace it)", dir)
	}
	if o.Parties < 1 || o.Parties > config.MaxParties {
		return nil, fmt.Errorf("--parties %d: want 1..%d", o.Parties, config.MaxParties)
	}
	// A failed init leaves no homes behind (a retry blamed an existing
	// home for a mistake in the flags): homes made here go again.
	homes := filepath.Join(dir, "homes")
	if _, serr := os.Stat(homes); errors.Is(serr, os.ErrNotExist) {
		defer func() {
			if err != nil {
				os.RemoveAll(homes)
			}
		}()
	}
	if o.Devices == 0 {
		o.Devices = 1
	}
	if o.Kubernetes != "" {
		if err := deploy.DNSLabel(o.Kubernetes); err != nil {
			return nil, fmt.Errorf("--k8s: the namespace %w", err)
		}
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	var descs []config.Descriptor
	member := func(name, role string, server bool) error {
		listen, advertise := "", ""
		if server && o.Kubernetes != "" {
			listen, advertise = net.JoinHostPort("0.0.0.0", strconv.Itoa(deploy.QUICPort)), deploy.PodAddress(o.Kubernetes, name)
		} else if server {
			port, err := FreePort("udp", o.Host)
			if err != nil {
				return err
			}
			listen = net.JoinHostPort(o.Host, strconv.Itoa(port))
		}
		h, err := home.Init(HomeDir(dir, name), name, role, listen, advertise, o.Force)
		if err != nil {
			return err
		}
		descs = append(descs, h.Self)
		return nil
	}
	spec, err := config.Spec(o.Mode)
	if err != nil {
		return nil, err
	}
	for _, m := range spec.Members(o.Parties) {
		if err := member(m.Name, m.Role, true); err != nil {
			return nil, err
		}
	}
	if err := member("client", config.RoleOperator, false); err != nil {
		return nil, err
	}
	for i := 1; i <= o.Devices; i++ {
		name := "device"
		if i > 1 {
			name = fmt.Sprintf("device%d", i)
		}
		if err := member(name, config.RoleDevice, false); err != nil {
			return nil, err
		}
	}
	var id [16]byte
	rand.Read(id[:])
	lit, err := config.Assemble(config.Literal{Mode: o.Mode, Dim: o.Dim, Alpha: o.Alpha, Beta: o.Beta, Tau: o.Tau,
		RevealScores: o.RevealScores, HideProbes: o.HideProbes, GalleryLevels: o.GalleryLevels, QueryLevels: o.QueryLevels, Scheme: o.Scheme, ClusterID: hex.EncodeToString(id[:]), Calibration: o.Calibration,
		BatchMax: o.BatchMax, BatchWait: config.Duration(o.BatchWait)}, descs)
	if err != nil {
		return nil, err
	}
	if o.Shards > 1 {
		lit.Shards = o.Shards // checked when loaded below
		if err := shardAddrs(&lit, o); err != nil {
			return nil, err
		}
		if err := KeyPlacement(dir, &lit, false); err != nil {
			return nil, err
		}
	}
	if o.Metrics {
		for _, m := range servers(&lit) {
			tp, err := FreePort("tcp", "127.0.0.1")
			if err != nil {
				return nil, err
			}
			m.Metrics = net.JoinHostPort("127.0.0.1", strconv.Itoa(tp))
		}
	}
	if err := config.Save(dir, lit); err != nil {
		return nil, err
	}
	return config.Load(dir)
}

// KeyPlacement gives the local cluster in dir a secret shard key
// (config.Literal.ShardKeyID): written into the home of every party and
// every operator, never the decider's or key server's, so that the
// helper cannot tell which ids a shard holds.
func KeyPlacement(dir string, lit *config.Literal, reuse bool) error {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return err
	}
	// With reuse, a key the parties' homes already agree on is kept (a
	// rebalance run again after it stopped midway: some data may follow
	// that key).
	var held *[32]byte
	for i, m := range lit.Parties {
		if !reuse {
			break
		}
		k, err := home.ReadShardKey(filepath.Join(HomeDir(dir, m.Name), config.ShardKeyFile))
		if err != nil || k == nil || i > 0 && (held == nil || *k != *held) {
			held = nil
			break
		}
		held = k
	}
	if held != nil {
		key = *held
	}
	var names []string
	for _, m := range lit.Parties {
		names = append(names, m.Name)
	}
	for _, c := range lit.Clients {
		if c.Role == config.RoleOperator {
			names = append(names, c.Name)
		}
	}
	for _, name := range names {
		if err := home.WriteShardKey(filepath.Join(HomeDir(dir, name), config.ShardKeyFile), &key); err != nil {
			return err
		}
	}
	lit.ShardKeyID = config.ShardKeyID(&key)
	return nil
}

// servers are the servers of lit, to fill in.
func servers(lit *config.Literal) []*config.Member {
	var s []*config.Member
	for i := range lit.Parties {
		s = append(s, &lit.Parties[i])
	}
	for _, m := range []*config.Member{lit.KeyServer, lit.Decider} {
		if m != nil {
			s = append(s, m)
		}
	}
	return s
}

// shardAddrs gives every server of lit o.Shards shard addresses: ports
// on o.Host, or its shards' pod names in a cluster for Kubernetes.
func shardAddrs(lit *config.Literal, o Options) error {
	for _, m := range servers(lit) {
		m.Shards = nil
		for s := range o.Shards {
			if o.Kubernetes != "" {
				m.Shards = append(m.Shards, deploy.ShardPodAddress(o.Kubernetes, m.Name, s))
				continue
			}
			port, err := FreePort("udp", o.Host)
			if err != nil {
				return err
			}
			m.Shards = append(m.Shards, net.JoinHostPort(o.Host, strconv.Itoa(port)))
		}
	}
	return nil
}

// ServerNames lists the processes of the cluster's servers: one per
// server, and in a sharded cluster also its shards ("p1#0", ...: 'idface
// serve --shard 0'), shards before their coordinator.
func ServerNames(p *config.Params) []string {
	var names []string
	for _, s := range p.Servers() {
		if p.Shards() > 1 {
			for i := range p.Shards() {
				names = append(names, config.ShardName(s.Name, i))
			}
		}
		names = append(names, s.Name)
	}
	return names
}

// HomeDir is where member name of the local cluster in dir lives.
func HomeDir(dir, name string) string { return filepath.Join(dir, "homes", name) }

// Client opens a client of the local cluster as member name ("" is the
// operator "client") through entry ("" is the first party).
func Client(p *config.Params, name, entry string) (*client.Client, error) {
	if name == "" {
		name = "client"
	}
	h, err := home.Open(HomeDir(p.Dir(), name))
	if err != nil {
		return nil, err
	}
	return client.Open(p, h, entry)
}

// pidFile is where Start records a server's process: one line "PID
// START", its pid and its start time in clock ticks since boot (field 22
// of /proc/PID/stat), so that a later pid of the same number is never
// taken for it. Stop and Kill read it; by hand: kill $(cut -d' ' -f1 FILE).
func pidFile(p *config.Params, name string) string {
	return filepath.Join(p.Dir(), "run", name+".pid")
}

// LogFile is where "up" sends a server's log.
func LogFile(p *config.Params, name string) string {
	return filepath.Join(p.Dir(), "logs", name+".log")
}

// Start starts one server as its own process running exe (the idface
// binary) and records its pid and start time. It does not wait for health.
func Start(p *config.Params, exe, name string) (int, error) {
	if pid, ok := Running(p, name); ok {
		return pid, fmt.Errorf("server %s is already running (pid %d)", name, pid)
	}
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(p.Dir(), d), 0o700); err != nil {
			return 0, err
		}
	}
	logf, err := os.OpenFile(LogFile(p, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	member, shard := config.SplitServer(name)
	args := []string{"serve", "--config", filepath.Join(p.Dir(), config.File), "--home", HomeDir(p.Dir(), member)}
	if shard != config.Coordinator {
		args = append(args, "--shard", strconv.Itoa(shard))
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survives the CLI
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting server %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reap it if it dies while we run
	started, _ := startTime(pid)
	return pid, store.WriteFile(pidFile(p, name), fmt.Appendf(nil, "%d %d\n", pid, started), 0o600)
}

// startTime is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat): with the pid it names one process, never a later one
// that reuses the pid.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("unreadable /proc stat")
	}
	if f[0] == "Z" {
		return 0, errors.New("zombie")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Running reports whether the server's recorded process is alive: the pid
// must still belong to the process that Start launched.
func Running(p *config.Params, name string) (int, bool) {
	b, err := os.ReadFile(pidFile(p, name))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	want, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, false
	}
	if got, err := startTime(pid); err != nil || got != want {
		return pid, false
	}
	return pid, true
}

// Up starts every server that is not running and waits until all answer a
// health check, or timeout passes.
func Up(ctx context.Context, p *config.Params, exe string, timeout time.Duration) error {
	_, err := UpServers(ctx, p, exe, ServerNames(p), timeout)
	return err
}

// UpServers starts the processes names (of ServerNames) that are not
// running, waits until each answers a health check, or timeout passes,
// and returns those it started.
func UpServers(ctx context.Context, p *config.Params, exe string, names []string, timeout time.Duration) (started []string, err error) {
	for _, s := range p.Servers() {
		if strings.HasSuffix(s.Addr, ".svc.cluster.local:"+strconv.Itoa(deploy.QUICPort)) {
			return nil, fmt.Errorf("%s is made for Kubernetes ('cluster init --k8s'; %s advertises %s): render it with 'idface deploy k8s --cluster %s --image REGISTRY/idface@sha256:DIGEST' (docs/DEPLOY.md, \"Kubernetes\")", p.Dir(), s.Name, s.Addr, p.Dir())
		}
	}
	// The key server first: local servers fetch the public key from it.
	names = slices.Clone(names)
	if k, ok := p.KeyServer(); ok && slices.Contains(names, k.Name) {
		names = append([]string{k.Name}, slices.DeleteFunc(names, func(n string) bool { return n == k.Name })...)
	}
	for _, name := range names {
		if _, ok := Running(p, name); ok {
			continue
		}
		if _, err := Start(p, exe, name); err != nil {
			return started, err
		}
		started = append(started, name)
	}
	return started, WaitServers(ctx, p, names, timeout)
}

// Processes lists the processes of server (a member's name: its
// coordinator and, in a sharded cluster, its shards; or one process's
// name, "p1#0"), in ServerNames' order. An unknown name is an error
// naming the servers.
func Processes(p *config.Params, server string) ([]string, error) {
	var out []string
	for _, name := range ServerNames(p) {
		if member, _ := config.SplitServer(name); name == server || member == server {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		var members []string
		for _, s := range p.Servers() {
			members = append(members, s.Name)
		}
		return nil, fmt.Errorf("no server %q in %s: the servers are %s", server, p.Dir(), strings.Join(members, ", "))
	}
	return out, nil
}

// WaitHealthy polls every server until each answers a health check with
// nothing unsettled. A server whose process exited is reported first: it
// is the cause when the others wait for it.
func WaitHealthy(ctx context.Context, p *config.Params, timeout time.Duration) error {
	return WaitServers(ctx, p, ServerNames(p), timeout)
}

// WaitServers is WaitHealthy for the processes names alone.
func WaitServers(ctx context.Context, p *config.Params, names []string, timeout time.Duration) error {
	return PollHealthy(ctx, p, names, timeout, func(name string) error {
		if _, ok := Running(p, name); !ok {
			return fmt.Errorf("server %s exited; its log %s ends with:\n%s", name, LogFile(p, name), tail(LogFile(p, name), 10))
		}
		return nil
	})
}

// PollHealthy asks each of the named servers for its health until every
// one answers with nothing unsettled; exited reports a server whose
// process has ended (its error ends the wait at once: it is the cause
// when the others wait for it).
func PollHealthy(ctx context.Context, p *config.Params, names []string, timeout time.Duration, exited func(name string) error) error {
	cl, err := Client(p, "", "")
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	healthy := map[string]bool{}
	for {
		var last error
		var waiting string
		for _, name := range names {
			if err := exited(name); err != nil {
				return err
			}
			if healthy[name] {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			h, err := cl.Health(cctx, name)
			cancel()
			switch {
			case err == nil && h.InDoubt == 0:
				healthy[name] = true
			case err == nil:
				last, waiting = fmt.Errorf("%d transactions or changes still unsettled", h.InDoubt), name
			default:
				last, waiting = err, name
			}
		}
		if len(healthy) == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server %s not healthy after %v: %v (log: %s)", waiting, timeout, last, LogFile(p, waiting))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops one server: SIGTERM, then SIGKILL after grace.
func Stop(p *config.Params, name string, grace time.Duration) error {
	pid, ok := Running(p, name)
	if !ok {
		os.Remove(pidFile(p, name))
		return nil
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, ok := Running(p, name); !ok {
			os.Remove(pidFile(p, name))
			return nil
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	os.Remove(pidFile(p, name))
	return nil
}

// Kill sends SIGKILL at once (tests of crash recovery).
func Kill(p *config.Params, name string) error {
	pid, ok := Running(p, name)
	if !ok {
		return fmt.Errorf("server %s is not running", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for range 100 {
		if _, ok := Running(p, name); !ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return os.Remove(pidFile(p, name))
}

// Down stops every server.
func Down(p *config.Params) error {
	var errs []error
	for _, name := range ServerNames(p) {
		errs = append(errs, Stop(p, name, 15*time.Second))
	}
	return errors.Join(errs...)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
