package cluster

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports of a local cluster. A port the kernel hands out for ":0" comes
// from the ephemeral range, which every outgoing connection on the host
// draws from too (each QUIC dialer binds one): between "cluster init"
// picking a server's port and the server binding it, or while a server
// restarts, a client elsewhere on the host could take it, and the server
// then fails with "address already in use". So ports are drawn at random
// below the ephemeral range, where only explicit binds land, checked free,
// and never handed out twice by one process.

// minPort is the lowest port picked: clear of well-known services.
const minPort = 10000

var (
	pickedMu sync.Mutex
	picked   = map[string]bool{} // network/port handed out by this process
)

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; the IANA range's 49152 elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 49152
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 1 || lo > 65535 {
		return 49152
	}
	return lo
}

// FreePort returns a port on host that is free for network ("udp" or
// "tcp") now, outside the ephemeral range when that leaves room
// (otherwise one the kernel picks), and not returned before by this
// process: for a server that binds it later.
func FreePort(network, host string) (int, error) {
	lo, hi := minPort, ephemeralLow() // [lo, hi)
	for try := 0; hi-lo >= 1000 && try < 200; try++ {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(hi-lo)))
		if err != nil {
			return 0, err
		}
		port := lo + int(n.Int64())
		if claim(network, port) && bindable(network, host, port) {
			return port, nil
		}
	}
	for try := 0; try < 100; try++ { // no room below the range: the kernel's pick
		port, err := kernelPort(network, host)
		if err != nil {
			return 0, err
		}
		if claim(network, port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free %s port on %s", network, host)
}

// claim records port as handed out; false if it already was.
func claim(network string, port int) bool {
	pickedMu.Lock()
	defer pickedMu.Unlock()
	k := network + "/" + strconv.Itoa(port)
	if picked[k] {
		return false
	}
	picked[k] = true
	return true
}

func bindable(network, host string, port int) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if network == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func kernelPort(network, host string) (int, error) {
	addr := net.JoinHostPort(host, "0")
	if network == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
