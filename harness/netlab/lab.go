// Package netlab builds a lab of separate "hosts" on one Linux machine: a
// network namespace per host, each with its own IPv4 address on a veth
// pair plugged into a bridge in this process's namespace, optional rate
// limits on each host's link (tc tbf), and a WAN whose delay comes from
// UDP relays in a router host (the kernel here has no netem). Programs run
// inside a host with "ip netns exec"; this process reaches every host over
// the bridge.
//
// Everything a lab creates is named with its prefix ("idfl" and a two-digit
// slot) and removed by Close. A lab holds a lock on its slot while it
// lives; New removes the leftovers of any slot whose lock is free (a lab
// whose process crashed), so a crash costs nothing but a little time.
package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrUnavailable wraps every reason this machine cannot hold a lab (not
// Linux, not root, no iproute2, namespaces refused). Tests skip on it.
var ErrUnavailable = errors.New("netlab: network lab unavailable")

var errNotLinux = fmt.Errorf("%w: network namespaces need Linux", ErrUnavailable)

const (
	namePrefix = "idfl" // every lab resource's name starts with it
	slots      = 64     // labs at once on one machine
	maxHosts   = 200    // hosts per lab: addresses .10 to .209
	lockDir    = "/run/netlab"
	netnsDir   = "/run/netns" // where "ip netns" keeps named namespaces
)

// Check reports why a lab cannot be built here (wrapping ErrUnavailable),
// or nil: it needs Linux, root, the ip command, and the kernel must allow
// network namespaces, veth pairs and bridges.
func Check() error {
	if runtime.GOOS != "linux" {
		return errNotLinux
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: creating network namespaces needs root (run as root, or in a container with CAP_NET_ADMIN and CAP_SYS_ADMIN)", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: the ip command (iproute2) is not installed", ErrUnavailable)
	}
	probe := fmt.Sprintf("%sp%d", namePrefix, os.Getpid())
	defer func() {
		ip("netns", "del", probe)
		ip("link", "del", probe+"b")
		ip("link", "del", probe+"v")
	}()
	steps := [][]string{
		{"netns", "add", probe},
		{"link", "add", probe + "b", "type", "bridge"},
		{"link", "add", probe + "v", "type", "veth", "peer", "name", probe + "p"},
		{"link", "set", probe + "p", "netns", probe},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return fmt.Errorf("%w: this kernel or container refuses %v", ErrUnavailable, err)
		}
	}
	return nil
}

// CheckShaping reports whether tc can put a tbf rate limit on a link.
func CheckShaping() error {
	if err := Check(); err != nil {
		return err
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return fmt.Errorf("%w: the tc command (iproute2) is not installed: rate limits need it", ErrUnavailable)
	}
	probe := fmt.Sprintf("%sp%dv", namePrefix, os.Getpid())
	defer ip("link", "del", probe)
	if err := ip("link", "add", probe, "type", "veth", "peer", "name", probe+"p"); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := run("tc", "qdisc", "add", "dev", probe, "root", "tbf", "rate", "1gbit", "burst", "64kb", "latency", "20ms"); err != nil {
		return fmt.Errorf("%w: this kernel has no tbf qdisc (CONFIG_NET_SCH_TBF): %v", ErrUnavailable, err)
	}
	return nil
}

// Lab is a bridge in this process's namespace and the hosts plugged into
// it. Its methods may be called from several goroutines.
type Lab struct {
	prefix string // "idfl07"
	slot   int
	lock   *os.File
	bridge string

	mu     sync.Mutex
	hosts  []*Host
	procs  []*Proc
	wans   []*WAN
	closed bool
}

// Host is one network namespace of a lab.
type Host struct {
	Name string     // as given to AddHost
	NS   string     // the namespace's name (for "ip netns exec")
	Addr netip.Addr // its address on the lab's bridge

	lab   *Lab
	index int
	outer string // the veth end on the bridge, in this process's namespace
}

// New builds an empty lab: it removes the leftovers of crashed labs, takes
// a free slot and creates the slot's bridge with Gateway as this process's
// address on it.
func New() (*Lab, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	names, err := existing()
	if err != nil {
		return nil, err
	}
	var l *Lab
	for slot := range slots {
		prefix := fmt.Sprintf("%s%02d", namePrefix, slot)
		if l != nil && !names.has(prefix) {
			continue // nothing to sweep
		}
		f, ok, err := tryLock(fmt.Sprintf("%s/%s.lock", lockDir, prefix))
		if err != nil {
			if l != nil {
				l.lock.Close()
			}
			return nil, fmt.Errorf("netlab: locking slot %d (%s): %w", slot, lockDir, err)
		}
		if !ok {
			continue // a running lab
		}
		removeAll(prefix, names) // a crashed lab's, if any
		if l == nil {
			l = &Lab{prefix: prefix, slot: slot, lock: f, bridge: prefix + "br"}
			continue
		}
		f.Close() // only swept
	}
	if l == nil {
		return nil, fmt.Errorf("netlab: all %d lab slots are in use (%s/*.lock): close a lab first", slots, lockDir)
	}
	if err := l.createBridge(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) createBridge() error {
	for _, s := range [][]string{
		{"link", "add", l.bridge, "type", "bridge"},
		{"addr", "add", l.Gateway().String() + "/24", "dev", l.bridge},
		{"link", "set", l.bridge, "up"},
	} {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// Prefix starts the name of everything the lab creates.
func (l *Lab) Prefix() string { return l.prefix }

// Gateway is this process's address on the lab's bridge: hosts reach the
// process (and the process them) directly.
func (l *Lab) Gateway() netip.Addr { return l.addr(0, 1) }

// addr is an address of the lab's slot: net 0 holds the hosts, net 1 the
// WAN addresses (10.77.2*slot.0/24 and the /24 after it).
func (l *Lab) addr(net, host int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 77, byte(2*l.slot + net), byte(host)})
}

// AddHost creates a host: a namespace with loopback up and eth0 on the
// lab's bridge at the next free address.
func (l *Lab) AddHost(name string) (*Host, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("netlab: the lab is closed")
	}
	for _, h := range l.hosts {
		if h.Name == name {
			l.mu.Unlock()
			return nil, fmt.Errorf("netlab: host %q exists", name)
		}
	}
	if len(l.hosts) == maxHosts {
		l.mu.Unlock()
		return nil, fmt.Errorf("netlab: a lab holds at most %d hosts", maxHosts)
	}
	i := len(l.hosts)
	h := &Host{Name: name, NS: l.prefix + "-" + name, Addr: l.addr(0, 10+i), lab: l, index: i,
		outer: fmt.Sprintf("%sv%d", l.prefix, i)}
	l.hosts = append(l.hosts, h) // before creating anything: Close removes it
	l.mu.Unlock()
	if strings.ContainsAny(name, "/ \t\n") || name == "" || len(h.NS) > 200 {
		return nil, fmt.Errorf("netlab: host name %q: want a short name without '/' or spaces", name)
	}
	inner := fmt.Sprintf("%sp%d", l.prefix, i)
	steps := [][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.outer, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", h.NS},
		{"link", "set", h.outer, "master", l.bridge, "up"},
		{"-n", h.NS, "link", "set", inner, "name", "eth0"},
		{"-n", h.NS, "addr", "add", h.Addr.String() + "/24", "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return nil, fmt.Errorf("netlab: host %s: %w", name, err)
		}
	}
	return h, nil
}

// IP runs "ip ARGS" inside the host's namespace ("ip -n NS ARGS").
func (h *Host) IP(args ...string) error { return ip(append([]string{"-n", h.NS}, args...)...) }

// Command prepares name with args to run inside the host ("ip netns exec",
// which execs in place: the command's pid is the program's). It is its own
// process group and is killed if this process dies. Start it with
// Host.Start so that Close stops it.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
	cmd.SysProcAttr = procAttr()
	return cmd
}

// Output runs name inside the host and returns its standard output; the
// error carries its standard error.
func (h *Host) Output(name string, args ...string) ([]byte, error) {
	cmd := h.Command(name, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), h.Name, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out, nil
}

// Start starts cmd (from Command) and keeps it for Close to stop.
func (h *Host) Start(cmd *exec.Cmd) (*Proc, error) {
	h.lab.mu.Lock()
	defer h.lab.mu.Unlock()
	if h.lab.closed {
		return nil, errors.New("netlab: the lab is closed")
	}
	if err := start(cmd); err != nil {
		return nil, fmt.Errorf("netlab: starting %s in %s: %w", cmd.Args[4:], h.Name, err)
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	h.lab.procs = append(h.lab.procs, p)
	return p, nil
}

// Do runs f with the host's network namespace: every socket f opens (and
// only those) is the host's, also when another goroutine uses it later.
// f must not start goroutines that open sockets.
func (h *Host) Do(f func() error) error { return inNamespace(netnsDir+"/"+h.NS, f) }

// ListenUDP opens a UDP socket bound to addr inside the host's namespace;
// this process uses it like any socket.
func (h *Host) ListenUDP(addr string) (*net.UDPConn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	var c *net.UDPConn
	err = inNamespace(netnsDir+"/"+h.NS, func() error {
		var err error
		c, err = net.ListenUDP("udp", ua)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: listening on %s in %s: %w", addr, h.Name, err)
	}
	return c, nil
}

// DialUDP opens a UDP socket inside the host's namespace connected to to.
func (h *Host) DialUDP(to netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := inNamespace(netnsDir+"/"+h.NS, func() error {
		var err error
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: dialing %v from %s: %w", to, h.Name, err)
	}
	return c, nil
}

// Proc is a process started in a host.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Pid is the program's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (after Done).
func (p *Proc) Err() error { <-p.done; return p.err }

// Stop asks the process group to end (SIGTERM) and kills it after grace.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	signalGroup(p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	signalGroup(p.Pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("netlab: process %d survived SIGKILL for 5 s", p.Pid())
	}
}

// Close stops the lab's relays and processes and removes its namespaces,
// links and bridge. It is safe to call more than once and after a failed
// New or AddHost.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs, wans := l.procs, l.wans
	l.mu.Unlock()
	for _, w := range wans {
		w.close()
	}
	stopErrs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { stopErrs[i] = p.Stop(5 * time.Second) })
	}
	wg.Wait()
	errs := stopErrs
	names, err := existing()
	if err != nil {
		errs = append(errs, err)
	}
	if err := removeAll(l.prefix, names); err != nil {
		errs = append(errs, err)
	}
	if l.lock != nil {
		l.lock.Close() // releases the slot
	}
	return errors.Join(errs...)
}

// names lists the namespaces and links of this process's namespace.
type names struct{ ns, links []string }

// has reports whether any name starts with prefix.
func (n names) has(prefix string) bool {
	for _, name := range append(n.ns, n.links...) {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// existing lists the namespaces and links now present.
func existing() (names, error) {
	var n names
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return n, fmt.Errorf("netlab: ip netns list: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 { // "name (id: 3)"
			n.ns = append(n.ns, f[0])
		}
	}
	out, err = exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return n, fmt.Errorf("netlab: ip link show: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line) // "7: idfl00v0@if6: <...> ..."
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		n.links = append(n.links, name)
	}
	return n, nil
}

// removeAll removes every namespace and link named with prefix, killing
// the processes still inside the namespaces first (a namespace outlives
// "ip netns del" while a process holds it); it also removes probes that
// Check left behind in a process that died.
func removeAll(prefix string, n names) error {
	var errs []error
	for _, ns := range n.ns {
		if !strings.HasPrefix(ns, prefix+"-") && !staleProbe(ns) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, f := range strings.Fields(string(out)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, link := range n.links {
		// Slots are two digits wide: no slot's prefix starts another's names.
		if strings.HasPrefix(link, prefix) || staleProbe(link) {
			ip("link", "del", link) // a veth end goes with its namespace: errors expected
		}
	}
	return errors.Join(errs...)
}

// staleProbe reports a name Check made ("idflp", a pid, a letter or two)
// in a process that no longer runs.
func staleProbe(name string) bool {
	rest, ok := strings.CutPrefix(name, namePrefix+"p")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimRight(rest, "bvp"))
	return err == nil && pid != os.Getpid() && !alive(pid)
}

// ip runs the ip command; its error carries what ip printed.
func ip(args ...string) error { return run("ip", args...) }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
