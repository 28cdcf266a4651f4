package mpcface_test

import (
	"strings"
	"testing"

	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/protocol"
)

// TestHealthHidesRowMapFromClients (review 17, item 6): health was open
// to devices and answered with per-origin row counts and each origin's set
// hash of live (row, id) pairs, keyed with the cluster id that every
// client holds: XORing the hash across one enrollment confirmed a guessed
// id at a guessed row ("alice.smith enrolled at p3 seq 5? true"). Now
// clients get the configuration (operators also the unsettled count) and
// no row map at all, and the set hashes one server gives another are
// sealed with the key the two share: the same guess fails against them.
func TestHealthHidesRowMapFromClients(t *testing.T) {
	c := startDefault(t, 3)
	op := c.Client("client", "p3")
	if err := op.Enroll(ctx(t), items(templates(5, 30), "a")); err != nil {
		t.Fatal(err)
	}
	askers := map[string]func() (*protocol.HealthOK, error){
		"device":             func() (*protocol.HealthOK, error) { return c.Client("device", "").Health(ctx(t), "p1") },
		"device, peers":      func() (*protocol.HealthOK, error) { return c.Client("device", "").ComparePeers(ctx(t), "p1") },
		"operator":           func() (*protocol.HealthOK, error) { return op.Health(ctx(t), "p1") },
		"operator, peers":    func() (*protocol.HealthOK, error) { return op.ComparePeers(ctx(t), "p1") },
		"p2 (another party)": func() (*protocol.HealthOK, error) { return healthAs(t, c, "p2", "p1") },
	}
	ask := func() map[string]*protocol.HealthOK {
		out := map[string]*protocol.HealthOK{}
		for name, f := range askers {
			h, err := f()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = h
		}
		return out
	}
	before := ask()
	if err := op.Enroll(ctx(t), items(templates(1, 31), "alice.smith")); err != nil {
		t.Fatal(err)
	}
	c.WaitSettled()
	after := ask()
	// alice.smith-0 is row 5 of origin p3 (segment 2): the attacker's guess.
	guess := rowmap.RowHash(c.P.ClusterID(), 2, 5, "alice.smith-0")
	for name, a := range after {
		b := before[name]
		confirmed := false
		if len(a.Digest) == 3 && len(b.Digest) == 3 {
			x := rowmap.Hash(b.Digest[2].Hash)
			x.Toggle(guess)
			confirmed = x == rowmap.Hash(a.Digest[2].Hash)
		}
		if confirmed {
			t.Errorf("%s: the row map's set hash confirmed alice.smith-0 at p3 row 5", name)
		}
		if strings.HasPrefix(name, "p2") {
			if len(a.Digest) != 3 || a.Digest[2].Rows != 6 || a.Digest[2].Live != 6 {
				t.Errorf("%s: a server gets the row counts: %v", name, a.Digest)
			}
			continue
		}
		if len(a.Digest) != 0 {
			t.Errorf("%s got a row map: %v", name, a.Digest)
		}
		if strings.HasPrefix(name, "device") && (a.InDoubt != 0 || len(a.Peers) != 0) {
			t.Errorf("%s got more than liveness and the configuration: %+v", name, a)
		}
		if a.ConfigSerial != uint32(c.P.Serial()) {
			t.Errorf("%s: configuration serial %d", name, a.ConfigSerial)
		}
	}
	peers := after["operator, peers"].Peers
	if len(peers) != 2 || peers[0].State != protocol.PeerAgrees || peers[1].State != protocol.PeerAgrees {
		t.Fatalf("p1's peers: %+v", peers)
	}
	if len(after["operator"].Peers) != 0 {
		t.Fatal("peers compared without being asked")
	}
}

// healthAs is what server `as` learns of server of's row map.
func healthAs(t *testing.T, c *inproc.Cluster, as, of string) (*protocol.HealthOK, error) {
	t.Helper()
	g, err := c.RowMap(of, as)
	if err != nil {
		return nil, err
	}
	return &protocol.HealthOK{Digest: g}, nil
}

// TestOperatorSeesPeersDisagree (review 17, item 6): with no row map for
// clients, an operator learns whether the servers agree from the servers
// themselves: each compares its row map with every peer's, server to
// server (sealed digests), and reports agreement, a difference (naming the
// origins whose rows differ, never counts or hashes) or an unreachable
// peer.
func TestOperatorSeesPeersDisagree(t *testing.T) {
	c := startDefault(t, 3)
	op := c.Client("client", "p1")
	if err := op.Enroll(ctx(t), items(templates(10, 40), "a")); err != nil {
		t.Fatal(err)
	}
	agree(t, c)
	// p3 restored from a copy that misses the next enrollment.
	c.RestoreBehind("p3", func() {
		if err := op.Enroll(ctx(t), items(templates(3, 41), "b")); err != nil {
			t.Fatal(err)
		}
	})
	want := map[string]map[string]protocol.Agreement{
		"p1": {"p2": protocol.PeerAgrees, "p3": protocol.PeerDiffers},
		"p2": {"p1": protocol.PeerAgrees, "p3": protocol.PeerDiffers},
		"p3": {"p1": protocol.PeerDiffers, "p2": protocol.PeerDiffers},
	}
	check := func(want map[string]map[string]protocol.Agreement) {
		t.Helper()
		for server, peers := range want {
			got, err := c.Agreement(server)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(peers) {
				t.Fatalf("%s reported %+v, want %v", server, got, peers)
			}
			for _, p := range got {
				if p.State != peers[p.Name] {
					t.Errorf("%s on %s: %v (%s), want %v", server, p.Name, p.State, p.Note, peers[p.Name])
				}
				if p.State == protocol.PeerDiffers && !strings.Contains(p.Note, "origin p1") {
					t.Errorf("%s on %s: the note %q does not name the origin whose rows differ", server, p.Name, p.Note)
				}
			}
		}
	}
	check(want)
	c.Stop("p3")
	check(map[string]map[string]protocol.Agreement{"p1": {"p2": protocol.PeerAgrees, "p3": protocol.PeerUnreachable}})
}
