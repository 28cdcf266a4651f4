package replicated_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/modes/replicated"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/host/pairkey"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/server"
)

// An in-process replicated cluster: three share holders and a decider,
// each the real server runtime with this package's engine and (holders)
// a real log, talking over network/memnet, where a test makes any member
// tamper with what it sends. Until the mode is registered, the cluster
// is a blind-mode configuration of three holders and a decider, and the
// engines are built here instead of by server.Build.

const dim = 128

type cluster struct {
	t    *testing.T
	p    *config.Params
	net  *memnet.Network
	dir  string
	keys map[string]crypto.PrivateKey
	// seals are the holders' seal keys (sealed enrollment).
	seals map[string]*seal.PrivateKey
	regs  map[string]*prometheus.Registry
	dec   *replicated.Decider
	// holders are the running holders' engines, by name.
	holders map[string]replicated.Engine
	mu      sync.Mutex
	stop    map[string]func()
	// clock is every server's engine.Env.Clock: the wall clock's time
	// until a test holds it still.
	clock stillClock
}

// stillClock is the wall clock until hold stops it at a time.
type stillClock struct {
	mu sync.Mutex
	at time.Time // zero: the wall clock
}

func (s *stillClock) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		return time.Now()
	}
	return s.at
}

// hold stops the clock at at.
func (s *stillClock) hold(at time.Time) {
	s.mu.Lock()
	s.at = at
	s.mu.Unlock()
}

// literal is a replicated literal of three holders and a decider.
func literal(lit config.Literal) config.Literal {
	lit.Mode = config.ModeReplicated
	lit.Dim = dim
	if lit.Tau == nil {
		tau := 0.25
		lit.Tau = &tau
	}
	if lit.Timeout == 0 {
		lit.Timeout = config.Duration(3 * time.Second)
	}
	if lit.MaxTopK == 0 {
		lit.MaxTopK = 1000
	}
	return inproc.Literal(lit, 3)
}

// startCluster starts every server of lit; deciderTau, when set, makes a
// deviating decider that applies its own threshold.
func startCluster(t *testing.T, lit config.Literal, deciderTau *float64) *cluster {
	t.Helper()
	lit = literal(lit)
	c := &cluster{t: t, net: memnet.New(), dir: t.TempDir(), keys: map[string]crypto.PrivateKey{}, seals: map[string]*seal.PrivateKey{}, regs: map[string]*prometheus.Registry{}, stop: map[string]func(){}, holders: map[string]replicated.Engine{}}
	lit.Parties = append([]config.Member(nil), lit.Parties...)
	lit.Clients = append([]config.Member(nil), lit.Clients...)
	dec := *lit.Decider
	lit.Decider = &dec
	members := []*config.Member{lit.Decider}
	for i := range lit.Parties {
		members = append(members, &lit.Parties[i])
	}
	for i := range lit.Clients {
		members = append(members, &lit.Clients[i])
	}
	for _, m := range members {
		id, err := quicnet.GenerateIdentity(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		m.Cert, m.Pin, c.keys[m.Name] = string(id.CertPEM), id.Pin, pair.PrivateKey
	}
	for i := range lit.Parties {
		k, err := seal.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		lit.Parties[i].Seal, c.seals[lit.Parties[i].Name] = k.Public().String(), k
	}
	p, err := config.New(lit, c.dir)
	if err != nil {
		t.Fatal(err)
	}
	c.p = p
	t.Cleanup(c.stopAll)
	dp := p
	if deciderTau != nil {
		bad := lit
		bad.Tau = deciderTau
		if dp, err = config.New(bad, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	c.start(dec.Name, dp)
	for _, m := range p.Parties() {
		c.start(m.Name, p)
	}
	return c
}

// start builds and serves one server with parameters p.
func (c *cluster) start(name string, p *config.Params) {
	t := c.t
	t.Helper()
	ln, err := c.net.Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pairkey.Derive(p, name, c.keys[name])
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("server", name)
	reg := prometheus.NewRegistry()
	var srv *server.Server
	env := engine.Env{Params: p, Self: name, Net: c.dialer(name), Log: log, Metrics: reg, PairKeys: keys, SealKey: c.seals[name], Fatal: func(err error) { srv.Fatal(err) }, Clock: c.clock.now}
	var eng engine.Engine
	var closers []func() error
	if name == p.DeciderName() {
		d, err := replicated.NewDecider(env)
		if err != nil {
			t.Fatal(err)
		}
		eng, c.dec = d, d
	} else {
		h, err := replicated.New(env)
		if err != nil {
			t.Fatal(err)
		}
		l, _, err := store.Open(filepath.Join(c.dir, name+".log"), store.Binding{Kind: replicated.Kind, Cluster: p.ClusterID(), Member: name, Mode: string(p.Mode())}, h.Replay)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Start(l); err != nil {
			t.Fatal(err)
		}
		eng, closers = h, []func() error{l.Close}
		c.mu.Lock()
		c.holders[name] = h
		c.mu.Unlock()
	}
	srv, err = server.New(p, name, eng, ln, log, server.Options{Registry: reg, Closers: closers})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	c.mu.Lock()
	c.regs[name] = reg
	c.stop[name] = func() { ln.Close(); cancel(); <-done }
	c.mu.Unlock()
}

func (c *cluster) restart(name string) {
	c.mu.Lock()
	stop := c.stop[name]
	delete(c.stop, name)
	c.mu.Unlock()
	stop()
	c.start(name, c.p)
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, s := range c.stop {
		s()
		delete(c.stop, n)
	}
}

func (c *cluster) dialer(name string) network.Dialer {
	role := network.RoleHelper
	if c.p.PartyIndex(name) >= 0 {
		role = network.RoleParty
	}
	switch name {
	case "client":
		role = network.RoleOperator
	case "device":
		role = network.RoleDevice
	}
	return c.net.Dialer(network.Peer{Name: name, Role: role})
}

func (c *cluster) client(name, entry string) *client.Client {
	cl, err := client.New(c.p, c.dialer(name), entry)
	if err != nil {
		c.t.Fatal(err)
	}
	if key, ok := c.keys[name].(crypto.Signer); ok {
		cl.SetSigner(name, key) // an operator's changes, any client's hidden probes
	}
	return cl
}

// signer is the named member's signing key.
func (c *cluster) signer(name string) crypto.Signer {
	key, ok := c.keys[name].(crypto.Signer)
	if !ok {
		c.t.Fatalf("no signing key for %s", name)
	}
	return key
}

// settle waits, if the decider holds many unfinished queries (a refused
// query leaves the parts already sent until DeciderWait), until it has
// dropped them, so that a test of many refusals does not fill its table.
func (c *cluster) settle() {
	for range 100 {
		if c.dec.Pending() < merge.MaxQueries/4 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("the decider keeps its queries")
}

// counter reads a counter of server name by metric and label value ("":
// the counter without labels).
func (c *cluster) counter(name, metric, label string) float64 {
	c.mu.Lock()
	reg := c.regs[name]
	c.mu.Unlock()
	mfs, err := reg.Gather()
	if err != nil {
		c.t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 { // a counter without labels
				total += m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func ctx(t *testing.T) context.Context { return inproc.Ctx(t, 30*time.Second) }

// flipper corrupts byte at of everything one member writes to another
// from now on (counted over writes), XOR mask. With only set, it counts
// from the first frame of that type: other traffic between the two (a
// health request of a background survey) neither takes the flip nor
// moves it.
type flipper struct {
	mu     sync.Mutex
	seen   int
	at     int
	mask   byte
	only   protocol.Type
	armed  bool
	header bool // a frame's 4-byte length came alone: its body follows
}

func (f *flipper) corrupt(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.only != 0 && !f.armed {
		is := func(b []byte) bool { return len(b) >= 2 && b[0] == protocol.Version && protocol.Type(b[1]) == f.only }
		switch {
		case len(p) > 4 && is(p[4:]):
			f.armed = true
		case f.header && is(p):
			f.armed, f.seen = true, 4
		default:
			f.header = len(p) == 4
			return
		}
	}
	if i := f.at - f.seen; i >= 0 && i < len(p) {
		p[i] ^= f.mask
	}
	f.seen += len(p)
}

func (f *flipper) String() string { return fmt.Sprintf("byte %d ^ %#x", f.at, f.mask) }
