package netlab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// newLab builds a lab or skips the test, printing why.
func newLab(t *testing.T) *Lab {
	t.Helper()
	l, err := New()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return l
}

func addHost(t *testing.T, l *Lab, name string) *Host {
	t.Helper()
	h, err := l.AddHost(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func listen(t *testing.T, h *Host, addr string) *net.UDPConn {
	t.Helper()
	c, err := h.ListenUDP(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoOn answers every datagram on c until c is closed.
func echoOn(c *net.UDPConn) {
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}

// roundTrip is the median time of a few echoes from c to to.
func roundTrip(t *testing.T, c *net.UDPConn, to netip.AddrPort) time.Duration {
	t.Helper()
	var best []time.Duration
	buf := make([]byte, 64)
	for i := range 5 {
		t0 := time.Now()
		if _, err := c.WriteToUDPAddrPort([]byte{byte(i)}, to); err != nil {
			t.Fatal(err)
		}
		for {
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				t.Fatalf("no echo from %v: %v", to, err)
			}
			if n == 1 && buf[0] == byte(i) {
				break
			}
		}
		best = append(best, time.Since(t0))
	}
	for i := range best { // insertion sort, five values
		for j := i; j > 0 && best[j] < best[j-1]; j-- {
			best[j], best[j-1] = best[j-1], best[j]
		}
	}
	return best[len(best)/2]
}

func TestCheckExplains(t *testing.T) {
	err := Check()
	if err == nil {
		return
	}
	if !errors.Is(err, ErrUnavailable) || len(err.Error()) < 40 {
		t.Fatalf("Check: %v: want a reason wrapping ErrUnavailable", err)
	}
	t.Skipf("skipping: %v", err)
}

// TestLabHosts builds two hosts: each sees only its own address, they
// reach each other and this process over the bridge, a command runs in a
// host, and Close removes everything and stops the command.
func TestLabHosts(t *testing.T) {
	l := newLab(t)
	a, b := addHost(t, l, "a"), addHost(t, l, "b")
	if a.Addr == b.Addr || !strings.HasPrefix(a.NS, l.Prefix()+"-") {
		t.Fatalf("hosts %+v %+v", a, b)
	}
	if _, err := l.AddHost("a"); err == nil {
		t.Fatal("a second host a was accepted")
	}
	out, err := a.Output("ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if err != nil || !strings.Contains(string(out), a.Addr.String()+"/24") {
		t.Fatalf("eth0 of a: %q, %v", out, err)
	}
	// b cannot bind a's address: separate stacks.
	if c, err := b.ListenUDP(HostPort(a.Addr, 0)); err == nil {
		c.Close()
		t.Fatal("host b bound host a's address")
	}
	srv := listen(t, b, HostPort(b.Addr, 7000))
	echoOn(srv)
	cli := listen(t, a, "0.0.0.0:0")
	if rtt := roundTrip(t, cli, netip.AddrPortFrom(b.Addr, 7000)); rtt > 50*time.Millisecond {
		t.Errorf("a to b: %v", rtt)
	}
	self, err := net.ListenUDP("udp", nil) // this process's namespace
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	roundTrip(t, self, netip.AddrPortFrom(b.Addr, 7000))

	// The command says when it runs (ip has entered the namespace by
	// then), and stays in it.
	cmd := a.Command("sh", "-c", "echo ready; exec sleep 600")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the command in a said %q, %v", line, err)
	}
	out, err = exec.Command("ip", "netns", "pids", a.NS).Output()
	if err != nil || !strings.Contains(string(out), fmt.Sprint(p.Pid())) {
		t.Fatalf("sleep (pid %d) is not in %s: %q %v", p.Pid(), a.NS, out, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Close left the command running")
	}
	assertGone(t, l.Prefix())
}

// assertGone fails if anything named with prefix is left.
func assertGone(t *testing.T, prefix string) {
	t.Helper()
	n, err := existing()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(n.ns, n.links...) {
		if strings.HasPrefix(name, prefix) {
			t.Errorf("%s is left behind", name)
		}
	}
}

// TestLabCleansUpAfterCrash lets a child process build a lab with a
// running command and die without closing it; the next lab removes what
// it left.
func TestLabCleansUpAfterCrash(t *testing.T) {
	if os.Getenv("NETLAB_CRASH_CHILD") == "1" {
		l, err := New()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		h, err := l.AddHost("x")
		if err == nil {
			_, err = h.Start(h.Command("sleep", "600"))
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Println("prefix", l.Prefix())
		os.Exit(0) // no Close: as a crash
	}
	if err := Check(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLabCleansUpAfterCrash$")
	cmd.Env = append(os.Environ(), "NETLAB_CRASH_CHILD=1")
	out, err := cmd.Output()
	var prefix string
	if _, serr := fmt.Sscanf(string(bytes.TrimSpace(out)), "prefix %s", &prefix); err != nil || serr != nil {
		t.Fatalf("child: %v %q", err, out)
	}
	n, _ := existing()
	found := false
	for _, ns := range n.ns {
		found = found || ns == prefix+"-x"
	}
	if !found {
		t.Fatalf("the child's namespace %s-x is not there to clean up", prefix)
	}
	l := newLab(t) // sweeps the crashed slot, and may take it
	if l.Prefix() != prefix {
		assertGone(t, prefix)
	}
	n, _ = existing()
	for _, ns := range n.ns {
		if ns == prefix+"-x" {
			t.Fatalf("the crashed lab's namespace %s is still there", ns)
		}
	}
	// The command the child left was killed with it (Pdeathsig) or by the
	// sweep; either way no process holds the namespace now.
	if out, _ := exec.Command("ip", "netns", "pids", prefix+"-x").Output(); len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("processes left in %s-x: %s", prefix, out)
	}
}

// TestWANDelay exposes an echo service on host b through the router:
// from host a and from this process the round trip is twice the delay;
// from b itself, and from this process once it sits beside b, it is not.
func TestWANDelay(t *testing.T) {
	l := newLab(t)
	const delay = 10 * time.Millisecond
	w, err := l.NewWAN(delay)
	if err != nil {
		t.Fatal(err)
	}
	a, b := addHost(t, l, "a"), addHost(t, l, "b")
	echoOn(listen(t, b, "0.0.0.0:7000"))
	wan, err := w.Expose(b, 7000)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Join(a); err != nil {
		t.Fatal(err)
	}
	check := func(what string, c *net.UDPConn, lo, hi time.Duration) {
		t.Helper()
		if rtt := roundTrip(t, c, wan); rtt < lo || rtt > hi {
			t.Errorf("%s: round trip %v, want %v..%v", what, rtt, lo, hi)
		}
	}
	check("from a", listen(t, a, "0.0.0.0:0"), 2*delay, 2*delay+20*time.Millisecond)
	check("from b", listen(t, b, "0.0.0.0:0"), 0, delay)
	self, err := net.ListenUDP("udp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	check("from this process", self, 2*delay, 2*delay+20*time.Millisecond)
	if err := w.Beside(b); err != nil {
		t.Fatal(err)
	}
	check("from this process beside b", self, 0, delay)
	if s := w.Stats(); s.Packets < 20 || s.Drops != 0 {
		t.Errorf("relay stats %+v", s)
	}
}

// TestShapeAndRelayThroughput shapes a host to 100 Mbit/s and checks what
// arrives; then reports what the router's relay carries between two
// unshaped hosts (the figure docs/RESULTS.md quotes).
func TestShapeAndRelayThroughput(t *testing.T) {
	if err := CheckShaping(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	l := newLab(t)
	w, err := l.NewWAN(5 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := addHost(t, l, "a"), addHost(t, l, "b"), addHost(t, l, "c")
	if err := c.Shape(Shape{Rate: 100e6}); err != nil {
		t.Fatal(err)
	}
	connect := func(to netip.AddrPort) *net.UDPConn {
		conn, err := a.DialUDP(to)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	sinkC := listen(t, c, "0.0.0.0:7001")
	setBuffers(sinkC)
	r := MeasureThroughput(connect(netip.AddrPortFrom(c.Addr, 7001)), sinkC, 300e6, 1, time.Second)
	t.Logf("shaped to 100 Mbit/s, offered %.0f: delivered %.1f Mbit/s, loss %.1f%%", r.OfferedMbit, r.DeliveredMbit, r.LossPct)
	if r.DeliveredMbit < 85 || r.DeliveredMbit > 115 {
		t.Errorf("a 100 Mbit/s link delivered %.1f Mbit/s", r.DeliveredMbit)
	}

	sinkB := listen(t, b, "0.0.0.0:7002")
	setBuffers(sinkB)
	wan, err := w.Expose(b, 7002)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Join(a); err != nil {
		t.Fatal(err)
	}
	// One datagram per send, paced to 1 Gbit/s and as fast as one
	// sender goes; then runs of 20 in one UDP_SEGMENT send, as quic-go
	// sends, which the relay passes on as runs.
	for _, c := range []struct {
		rate uint64
		run  int
	}{{1e9, 1}, {0, 1}, {0, 20}} {
		r := MeasureThroughput(connect(wan), sinkB, c.rate, c.run, time.Second)
		t.Logf("relay (5 ms), offered %.0f Mbit/s of %d-byte datagrams, %d per send: delivered %.0f Mbit/s, loss %.2f%%",
			r.OfferedMbit, DatagramSize, c.run, r.DeliveredMbit, r.LossPct)
	}
}
