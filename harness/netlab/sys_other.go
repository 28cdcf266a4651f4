//go:build !linux

package netlab

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
)

// A lab needs Linux network namespaces; elsewhere only the relay works.

func inNamespace(string, func() error) error { return errNotLinux }

func procAttr() *syscall.SysProcAttr { return nil }

func start(cmd *exec.Cmd) error { return cmd.Start() }

func signalGroup(int, syscall.Signal) error { return errNotLinux }

func alive(int) bool { return false }

func tryLock(string) (*os.File, bool, error) { return nil, false, errNotLinux }

func setBuffers(c *net.UDPConn) {
	c.SetReadBuffer(16 << 20)
	c.SetWriteBuffer(16 << 20)
}

// Elsewhere every datagram is read and sent on its own.

func coalesce(*net.UDPConn) {}

const oobSize = 0

func readRun(c *net.UDPConn, buf, _ []byte) (int, int, netip.AddrPort, error) {
	n, from, err := c.ReadFromUDPAddrPort(buf)
	return n, 0, from, err
}

func writeRun(c *net.UDPConn, b []byte, _ int, to netip.AddrPort) error {
	_, err := c.WriteToUDPAddrPort(b, to)
	return err
}
