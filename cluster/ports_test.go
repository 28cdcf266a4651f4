package cluster

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePort: ports are bindable, below the ephemeral range (which
// outgoing connections draw from) when it leaves room, and never repeated.
func TestFreePort(t *testing.T) {
	low := ephemeralLow()
	seen := map[string]bool{}
	for i := range 50 {
		netw := []string{"udp", "tcp"}[i%2]
		port, err := FreePort(netw, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		k := netw + fmt.Sprint(port)
		if seen[k] {
			t.Fatalf("%s port %d handed out twice", netw, port)
		}
		seen[k] = true
		if low-minPort >= 1000 && (port < minPort || port >= low) {
			t.Fatalf("port %d is outside [%d, %d)", port, minPort, low)
		}
		if !bindable(netw, "127.0.0.1", port) {
			t.Fatalf("%s port %d is not bindable", netw, port)
		}
	}
	// A port in use is not handed out.
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	busy := c.LocalAddr().(*net.UDPAddr).Port
	if bindable("udp", "127.0.0.1", busy) {
		t.Fatalf("port %d reported bindable while bound", busy)
	}
	claim("test", 1)
	if claim("test", 1) {
		t.Fatal("a claimed port was claimed again")
	}
}
