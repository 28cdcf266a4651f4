//go:build linux

package netlab

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// inNamespace runs f on an OS thread that has entered the network namespace
// at path. Sockets f opens stay in that namespace after it returns, whatever
// thread later uses them. The thread is never unlocked, so the runtime
// discards it when the goroutine ends: no other goroutine ever runs in the
// namespace by accident.
func inNamespace(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netlab: opening namespace %s: %w", path, err)
			return
		}
		defer syscall.Close(fd)
		if _, _, e := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0); e != 0 {
			errc <- fmt.Errorf("netlab: entering namespace %s: %w", path, e)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// procAttr makes a command its own process group (so Stop reaches anything
// it starts) and kills it if this process dies (Pdeathsig): a crashed test
// leaves no server running in a namespace.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Pdeathsig fires when the thread that started the child ends, not the
// process, and Go does end threads: inNamespace's, for one, which may be
// any thread that earlier started a process. So every process starts
// from one thread that is locked to a goroutine that never returns.
var (
	spawnOnce sync.Once
	spawns    = make(chan spawn)
)

type spawn struct {
	cmd  *exec.Cmd
	done chan error
}

// start starts cmd from the spawning thread.
func start(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // for good: this thread outlives every child
			for s := range spawns {
				s.done <- s.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawns <- spawn{cmd, done}
	return <-done
}

// signalGroup signals a process group started with procAttr.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// alive reports whether a process exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) != syscall.ESRCH }

// tryLock takes an exclusive lock on path without waiting; the kernel
// releases it when this process ends, which is how a later lab tells a
// crashed lab's leftovers from a running lab's.
func tryLock(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// setBuffers asks for large socket buffers, so that bursts at gigabit
// rates wait in the socket rather than being dropped while a goroutine is
// descheduled. As root, SO_*BUFFORCE passes net.core.rmem_max; otherwise
// the kernel caps the request there. Best effort: a small buffer only
// costs drops.
func setBuffers(c *net.UDPConn) {
	const size = 16 << 20
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size) != nil {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		}
		if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, size) != nil {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, size)
		}
	})
}

// Linux moves runs of equal-sized datagrams through a socket in one call:
// a sender's GSO batch (UDP_SEGMENT) reaches a socket with UDP_GRO set as
// one buffer and a control message with the segment size, and can be sent
// on the same way. quic-go sends with GSO, so the relay forwards a run of
// QUIC packets with two system calls instead of two per packet, which is
// what lets it keep up with gigabit paths on a two-core machine.
const (
	udpSegment = 103 // UDP_SEGMENT
	udpGRO     = 104 // UDP_GRO
)

// coalesce asks the kernel to hand over runs of datagrams as one.
func coalesce(c *net.UDPConn) {
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.IPPROTO_UDP, udpGRO, 1) })
	}
}

// oobSize is room for the control messages a read may carry.
const oobSize = 64

// readRun reads one datagram or a run of them; seg is the size of each
// datagram of a run (the last may be shorter), 0 for a single datagram.
func readRun(c *net.UDPConn, buf, oob []byte) (n, seg int, from netip.AddrPort, err error) {
	n, oobn, _, from, err := c.ReadMsgUDPAddrPort(buf, oob)
	if err != nil || oobn == 0 {
		return n, 0, from, err
	}
	msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
	if perr != nil {
		return n, 0, from, nil
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.IPPROTO_UDP && m.Header.Type == udpGRO && len(m.Data) >= 4 {
			seg = int(binary.NativeEndian.Uint32(m.Data))
		}
	}
	if seg >= n {
		seg = 0
	}
	return n, seg, from, nil
}

// writeRun sends what readRun read: a run as one UDP_SEGMENT send; should
// the kernel refuse that (a device without segmentation offload in the
// path), one datagram at a time.
func writeRun(c *net.UDPConn, b []byte, seg int, to netip.AddrPort) error {
	if seg == 0 {
		_, err := c.WriteToUDPAddrPort(b, to)
		return err
	}
	var oob [32]byte
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = syscall.IPPROTO_UDP, udpSegment
	h.SetLen(syscall.CmsgLen(2))
	binary.NativeEndian.PutUint16(oob[syscall.CmsgLen(0):], uint16(seg))
	if _, _, err := c.WriteMsgUDPAddrPort(b, oob[:syscall.CmsgSpace(2)], to); err == nil {
		return nil
	}
	var err error
	for len(b) > 0 {
		k := min(seg, len(b))
		if _, e := c.WriteToUDPAddrPort(b[:k], to); e != nil {
			err = e
		}
		b = b[k:]
	}
	return err
}
