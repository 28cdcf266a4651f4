// Package cluster creates and runs local idface clusters: a directory with
// the cluster config and an identity (key and self-signed certificate) for
// every party and client, and one OS process per party started from the
// idface binary itself ("idface serve"). Operators use it through
// "idface cluster init|up|down|status"; tests and experiments call it
// directly.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idface/idface/party"
	"github.com/idface/idface/transport"
)

// Options of a new cluster; zero values take party.Config's defaults.
type Options struct {
	Mode    string
	Parties int
	Clients int // client identities; default 1
	Dim     int
	Alpha   int
	Beta    int
	Tau     float64
	Host    string // default 127.0.0.1
	Force   bool   // overwrite an existing cluster.json
	Metrics bool   // give every party a loopback /metrics address
}

// Init writes a new cluster into dir.
func Init(dir string, o Options) (*party.Config, error) {
	if _, err := os.Stat(filepath.Join(dir, party.ConfigFile)); err == nil && !o.Force {
		return nil, fmt.Errorf("%s already holds a cluster (use --force to replace it)", dir)
	}
	if o.Mode == "he" {
		if o.Parties < 1 || o.Parties > 64 {
			return nil, fmt.Errorf("--parties %d: mode he needs 1..64 local servers", o.Parties)
		}
	} else if o.Parties < 2 || o.Parties > 64 {
		return nil, fmt.Errorf("--parties %d: want 2..64", o.Parties)
	}
	if o.Mode == "2pc" && o.Parties != 2 {
		return nil, fmt.Errorf("mode 2pc has 2 parties; use --mode mpc for %d", o.Parties)
	}
	if o.Clients == 0 {
		o.Clients = 1
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		return nil, err
	}
	cfg := &party.Config{Mode: o.Mode, Dim: o.Dim, Alpha: o.Alpha, Beta: o.Beta, Tau: o.Tau}
	newMember := func(name string) (party.Member, error) {
		id, err := transport.GenerateIdentity(name)
		if err != nil {
			return party.Member{}, err
		}
		m := party.Member{Name: name, Cert: filepath.Join("keys", name+".crt"), Key: filepath.Join("keys", name+".key"), Pin: id.Pin}
		if err := os.WriteFile(filepath.Join(dir, m.Cert), id.CertPEM, 0o644); err != nil {
			return m, err
		}
		return m, os.WriteFile(filepath.Join(dir, m.Key), id.KeyPEM, 0o600)
	}
	for i := 1; i <= o.Parties; i++ {
		m, err := newMember(fmt.Sprintf("p%d", i))
		if err != nil {
			return nil, err
		}
		port, err := freeUDPPort(o.Host)
		if err != nil {
			return nil, err
		}
		m.Addr = net.JoinHostPort(o.Host, strconv.Itoa(port))
		if o.Metrics {
			tp, err := freeTCPPort()
			if err != nil {
				return nil, err
			}
			m.Metrics = net.JoinHostPort("127.0.0.1", strconv.Itoa(tp))
		}
		cfg.Parties = append(cfg.Parties, m)
	}
	if o.Mode == "he" {
		m, err := newMember("key")
		if err != nil {
			return nil, err
		}
		port, err := freeUDPPort(o.Host)
		if err != nil {
			return nil, err
		}
		m.Addr = net.JoinHostPort(o.Host, strconv.Itoa(port))
		cfg.KeyServer = &m
	}
	for i := 1; i <= o.Clients; i++ {
		name := "client"
		if i > 1 {
			name = fmt.Sprintf("client%d", i)
		}
		m, err := newMember(name)
		if err != nil {
			return nil, err
		}
		cfg.Clients = append(cfg.Clients, m)
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := cfg.Save(dir); err != nil {
		return nil, err
	}
	return party.LoadConfig(dir)
}

// freeUDPPort asks the kernel for a free UDP port on host.
func freeUDPPort(host string) (int, error) {
	c, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func pidFile(cfg *party.Config, name string) string {
	return filepath.Join(cfg.Dir(), "run", name+".pid")
}

// LogFile is where "up" sends a party's log.
func LogFile(cfg *party.Config, name string) string {
	return filepath.Join(cfg.Dir(), "logs", name+".log")
}

// Start starts one party as its own process running exe (the idface
// binary) and records its pid. It does not wait for health.
func Start(cfg *party.Config, exe, name string) (int, error) {
	if pid, ok := Running(cfg, name); ok {
		return pid, fmt.Errorf("party %s is already running (pid %d)", name, pid)
	}
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir(), d), 0o700); err != nil {
			return 0, err
		}
	}
	logf, err := os.OpenFile(LogFile(cfg, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, "serve", "--cluster", cfg.Dir(), "--party", name)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survives the CLI
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting party %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	go cmd.Wait() // reap it if it dies while we run
	return pid, os.WriteFile(pidFile(cfg, name), []byte(strconv.Itoa(pid)+"\n"), 0o600)
}

// Running reports whether the party's recorded process is alive.
func Running(cfg *party.Config, name string) (int, bool) {
	b, err := os.ReadFile(pidFile(cfg, name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if syscall.Kill(pid, 0) != nil {
		return pid, false
	}
	// A zombie or a recycled pid is not our party.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(st)); len(f) > 2 && f[2] == "Z" {
			return pid, false
		}
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(string(cmdline), "serve") {
		return pid, false
	}
	return pid, true
}

// Up starts every party that is not running and waits until all answer a
// health check, or timeout passes.
func Up(ctx context.Context, cfg *party.Config, exe string, timeout time.Duration) error {
	// The key server first: local servers fetch the public key from it.
	servers := cfg.Servers()
	if cfg.KeyServer != nil {
		servers = append([]party.Member{*cfg.KeyServer}, cfg.Parties...)
	}
	for _, p := range servers {
		if _, ok := Running(cfg, p.Name); ok {
			continue
		}
		if _, err := Start(cfg, exe, p.Name); err != nil {
			return err
		}
	}
	return WaitHealthy(ctx, cfg, timeout)
}

// WaitHealthy polls every party until it answers a health check with no
// undecided transactions.
func WaitHealthy(ctx context.Context, cfg *party.Config, timeout time.Duration) error {
	cl, err := party.NewClient(cfg, "", "")
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for _, p := range cfg.Servers() {
		for {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			h, err := cl.HealthOf(cctx, p)
			cancel()
			if err == nil && h.InDoubt == 0 {
				break
			}
			if _, ok := Running(cfg, p.Name); !ok {
				return fmt.Errorf("party %s exited; its log %s ends with:\n%s", p.Name, LogFile(cfg, p.Name), tail(LogFile(cfg, p.Name), 10))
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = fmt.Errorf("%d transactions still undecided", h.InDoubt)
				}
				return fmt.Errorf("party %s not healthy after %v: %v (log: %s)", p.Name, timeout, err, LogFile(cfg, p.Name))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// Stop stops one party: SIGTERM, then SIGKILL after grace.
func Stop(cfg *party.Config, name string, grace time.Duration) error {
	pid, ok := Running(cfg, name)
	if !ok {
		os.Remove(pidFile(cfg, name))
		return nil
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, ok := Running(cfg, name); !ok {
			os.Remove(pidFile(cfg, name))
			return nil
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	os.Remove(pidFile(cfg, name))
	return nil
}

// Kill sends SIGKILL at once (tests of crash recovery).
func Kill(cfg *party.Config, name string) error {
	pid, ok := Running(cfg, name)
	if !ok {
		return fmt.Errorf("party %s is not running", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for range 100 {
		if _, ok := Running(cfg, name); !ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return os.Remove(pidFile(cfg, name))
}

// Down stops every party.
func Down(cfg *party.Config) error {
	var errs []error
	for _, p := range cfg.Servers() {
		errs = append(errs, Stop(cfg, p.Name, 10*time.Second))
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
