package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network"
)

// raceDialer is a dialer whose handshakes are scripted: p1 never
// answers (until the caller gives up), p2 connects, p3 fails. It records
// the handshakes given up and the streams opened, and opens none.
type raceDialer struct {
	mu        sync.Mutex
	opened    []string
	cancelled []string
}

func (d *raceDialer) Connect(ctx context.Context, to string) error {
	switch to {
	case "p1":
		<-ctx.Done()
		d.mu.Lock()
		d.cancelled = append(d.cancelled, to)
		d.mu.Unlock()
		return ctx.Err()
	case "p2":
		return nil
	}
	return errors.New("unreachable")
}

func (d *raceDialer) Open(_ context.Context, to string) (*network.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opened = append(d.opened, to)
	return nil, errors.New("no streams here")
}

func (d *raceDialer) Connected(string) bool { return false }

func (d *raceDialer) Close() error { return nil }

// replicatedClient is a client of a replicated cluster of three (d = 64)
// whose entry is p1, over dialer d.
func replicatedClient(t *testing.T, d network.Dialer) *client.Client {
	t.Helper()
	p, err := config.New(inproc.Literal(config.Literal{Mode: config.ModeReplicated, Dim: 64}, 3), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(p, d, "p1")
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestEntryRace: in a mode that answers with a party down, a client
// whose entry does not finish its handshake also connects to the other
// parties and sends the identify to the first that does (p2 here), which
// becomes its entry; the entry's handshake is given up, and nothing is
// sent to it. Before, a new client waited out the entry's handshake
// timeout (3 s) on its first identify whenever its entry was down.
func TestEntryRace(t *testing.T) {
	d := &raceDialer{}
	cl := replicatedClient(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.Identify(ctx, inproc.Templates(1, 64, 3)[0], 1); err == nil {
		t.Fatal("an identify through a dialer that opens no stream succeeded")
	}
	// p1's handshake is given up as the race ends (its goroutine says so
	// a moment later).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		d.mu.Lock()
		n := len(d.cancelled)
		d.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.opened) == 0 || d.opened[0] != "p2" {
		t.Fatalf("streams opened to %v; want the identify sent first to p2, the party that connected", d.opened)
	}
	for _, to := range d.opened {
		if to == "p1" && len(d.opened) < 3 {
			t.Fatalf("streams opened to %v: p1, which never connected, got the probe before every other party was tried", d.opened)
		}
	}
	if len(d.cancelled) != 1 {
		t.Fatalf("p1's handshake given up %d times, want once (the race ended it)", len(d.cancelled))
	}
}

// downDialer reaches no party.
type downDialer struct{ raceDialer }

func (d *downDialer) Connect(context.Context, string) error { return errors.New("handshake timed out") }

// TestNoEntryReached: with every party's handshake failing, an identify
// fails at once, saying so, and sends nothing (before, each party's
// handshake was timed out again in turn, 3 s each).
func TestNoEntryReached(t *testing.T) {
	d := &downDialer{}
	cl := replicatedClient(t, d)
	_, err := cl.Identify(context.Background(), inproc.Templates(1, 64, 4)[0], 1)
	if err == nil || !strings.Contains(err.Error(), "no party of the cluster could be reached (3 tried)") {
		t.Fatalf("identify with no party reachable: %v", err)
	}
	if len(d.opened) != 0 {
		t.Fatalf("streams opened to %v with no party reachable", d.opened)
	}
}
