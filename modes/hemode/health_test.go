package hemode_test

import (
	"testing"

	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/protocol"
)

// TestHealthHidesRowMapFromClients (review 17, item 6), for local servers:
// a device's or an operator's health answer holds no row map, so the
// guess "alice.smith-0 was enrolled at row 5" cannot be checked against
// the set hash (keyed with the cluster id, which clients hold) across the
// enrollment; another server gets the counts and a hash sealed for the
// pair, against which the guess fails too. The operator learns instead
// whether the local servers agree, from the local servers themselves.
func TestHealthHidesRowMapFromClients(t *testing.T) {
	c := start(t, 2)
	op := c.Client("client", "")
	if err := op.Enroll(ctx(t), items(templates(5, 70), "a")); err != nil {
		t.Fatal(err)
	}
	type view struct {
		name string
		ask  func() (*protocol.HealthOK, error)
	}
	views := []view{
		{"device", func() (*protocol.HealthOK, error) { return c.Client("device", "").ComparePeers(ctx(t), "p2") }},
		{"operator", func() (*protocol.HealthOK, error) { return op.ComparePeers(ctx(t), "p2") }},
		{"key server", func() (*protocol.HealthOK, error) {
			g, err := c.RowMap("p2", "key")
			return &protocol.HealthOK{Digest: g}, err
		}},
	}
	before := make([]*protocol.HealthOK, len(views))
	for i, v := range views {
		var err error
		if before[i], err = v.ask(); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
	}
	if err := op.Enroll(ctx(t), items(templates(1, 71), "alice.smith")); err != nil {
		t.Fatal(err)
	}
	c.WaitSettled()
	guess := rowmap.RowHash(c.P.ClusterID(), 0, 5, "alice.smith-0")
	for i, v := range views {
		a, err := v.ask()
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		b := before[i]
		if len(a.Digest) == 1 && len(b.Digest) == 1 {
			x := rowmap.Hash(b.Digest[0].Hash)
			x.Toggle(guess)
			if x == rowmap.Hash(a.Digest[0].Hash) {
				t.Errorf("%s: the set hash confirmed alice.smith-0 at row 5", v.name)
			}
		}
		switch v.name {
		case "key server":
			if len(a.Digest) != 1 || a.Digest[0].Live != 6 {
				t.Errorf("%s: a server gets the row counts: %v", v.name, a.Digest)
			}
		case "device":
			if len(a.Digest) != 0 || a.InDoubt != 0 || len(a.Peers) != 0 {
				t.Errorf("%s got more than liveness and the configuration: %+v", v.name, a)
			}
		case "operator":
			if len(a.Digest) != 0 {
				t.Errorf("%s got a row map: %v", v.name, a.Digest)
			}
			if len(a.Peers) != 1 || a.Peers[0].Name != "p1" || a.Peers[0].State != protocol.PeerAgrees {
				t.Errorf("p2's peers: %+v", a.Peers)
			}
		}
	}
}
