package netlab

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// Throughput is what MeasureThroughput saw.
type Throughput struct {
	Sent, Received int     // datagrams
	OfferedMbit    float64 // what the sender managed to send
	DeliveredMbit  float64 // what reached the sink, per second of sending
	LossPct        float64
}

// DatagramSize is the payload MeasureThroughput sends: a full QUIC packet
// on a 1,500-byte path.
const DatagramSize = 1300

// MeasureThroughput sends DatagramSize-byte datagrams on src for d, paced
// to rate bit/s (0: as fast as the sender can), run datagrams per system
// call (more than 1: one UDP_SEGMENT send, as quic-go sends on Linux),
// and counts what arrives at sink until nothing more comes for 300 ms.
// UDP has no flow control: a path slower than the offer drops the excess,
// so the delivered rate is the path's capacity on this machine. src must
// be connected.
func MeasureThroughput(src, sink *net.UDPConn, rate uint64, run int, d time.Duration) Throughput {
	var received atomic.Int64
	done := make(chan struct{})
	giveUp := time.Now().Add(d + 5*time.Second) // nothing ever arrived
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			sink.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, _, err := sink.ReadFromUDPAddrPort(buf); err != nil {
				if received.Load() > 0 || time.Now().After(giveUp) {
					return
				}
				continue
			}
			received.Add(1)
		}
	}()
	run = max(run, 1)
	msg := make([]byte, run*DatagramSize)
	seg := 0
	if run > 1 {
		seg = DatagramSize
	}
	start := time.Now()
	sent := 0
	perDatagram := time.Duration(0)
	if rate > 0 {
		perDatagram = time.Duration(float64(DatagramSize*8) / float64(rate) * 1e9)
	}
	for {
		now := time.Since(start)
		if now >= d {
			break
		}
		if perDatagram > 0 && time.Duration(sent)*perDatagram > now {
			// Ahead of the pace: a short sleep (the timer's resolution
			// makes the sender bursty at the scale of ~100 us, as a
			// paced QUIC sender is).
			time.Sleep(100 * time.Microsecond)
			continue
		}
		var err error
		if seg == 0 {
			_, err = src.Write(msg)
		} else {
			err = writeRun(src, msg, seg, netip.AddrPort{})
		}
		if err == nil {
			sent += run
		}
	}
	elapsed := time.Since(start).Seconds()
	<-done
	got := int(received.Load())
	t := Throughput{Sent: sent, Received: got,
		OfferedMbit:   float64(sent*DatagramSize*8) / elapsed / 1e6,
		DeliveredMbit: float64(got*DatagramSize*8) / elapsed / 1e6}
	if sent > 0 {
		t.LossPct = 100 * float64(sent-got) / float64(sent)
	}
	return t
}
