package blindbase

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestAcksWait: a stopping holder's wait for the decider's
// acknowledgements returns at once with none awaited, as soon as the last
// one comes, and after its bound when one never does, saying so; a send
// while it waits is waited for too.
func TestAcksWait(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var a Acks
	a.Wait(time.Hour, log) // none awaited

	add := func() {
		a.mu.Lock()
		a.n++
		a.mu.Unlock()
	}
	add()
	go func() {
		time.Sleep(20 * time.Millisecond)
		add() // a handler still sending
		a.done()
		time.Sleep(20 * time.Millisecond)
		a.done()
	}()
	a.Wait(time.Hour, log)
	if a.n != 0 || buf.Len() != 0 {
		t.Fatalf("returned with %d awaited, logged %q", a.n, buf.String())
	}

	add()
	t0 := time.Now()
	a.Wait(30*time.Millisecond, log)
	if time.Since(t0) < 30*time.Millisecond || !strings.Contains(buf.String(), "unacknowledged=1") {
		t.Fatalf("an ack that never came: returned after %v, logged %q", time.Since(t0), buf.String())
	}
	a.done()
	a.Wait(time.Hour, log) // the late one came: nothing awaited
}
