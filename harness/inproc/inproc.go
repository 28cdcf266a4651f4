// Package inproc runs a whole idface cluster in one process for tests:
// every server is the real runtime with its real engine and its real log
// in a temporary directory, and they talk over network/memnet, where a test
// can make any peer silent, slow or faulty, crash a server and restart it.
package inproc

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/server"
)

// Cluster is a running in-process cluster.
type Cluster struct {
	t   testing.TB
	P   *config.Params
	Net *memnet.Network
	Dir string
	// Storage, when set for a server before it (re)starts, opens its logs
	// (engine.Env.Storage): a FailingDisk, say.
	Storage map[string]engine.Storage

	mu      sync.Mutex
	running map[string]*running
	quiet   atomic.Bool // the test is over: drop late log lines
	// keys are the members' identity keys (Literal made them), from which
	// the servers derive the keys they share (host/pairkey), as
	// real ones do, and with which clients sign.
	keys map[string]crypto.PrivateKey
	// seals are the parties' seal keys (sealed enrollment), as 'party
	// init' makes them.
	seals map[string]*seal.PrivateKey
}

type running struct {
	srv    *server.Server
	ln     *memnet.Listener
	cancel context.CancelFunc
	done   chan error
}

// made holds the private keys of the members Literal made, for Start:
// identity keys by certificate (PEM) and the parties' seal keys by public
// key (Member.Seal). A test may rename or readdress a member of the
// literal; its certificate still finds its key.
var made = struct {
	sync.Mutex
	keys  map[string]crypto.PrivateKey
	seals map[string]*seal.PrivateKey
}{keys: map[string]crypto.PrivateKey{}, seals: map[string]*seal.PrivateKey{}}

// newIdentity makes a fresh ECDSA P-256 key and self-signed certificate
// for m (and its pin), as 'party init' and 'client init' do, and records
// the key under the certificate.
func newIdentity(m *config.Member) error {
	id, err := quicnet.GenerateIdentity(m.Name)
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		return err
	}
	m.Cert, m.Pin = string(id.CertPEM), id.Pin
	made.Lock()
	made.keys[m.Cert] = pair.PrivateKey
	made.Unlock()
	return nil
}

// newSealKey gives party m a fresh seal key, as 'party init' does, and
// records it under its public key.
func newSealKey(m *config.Member) error {
	k, err := seal.GenerateKey(nil)
	if err != nil {
		return err
	}
	m.Seal = k.Public().String()
	made.Lock()
	made.seals[m.Seal] = k
	made.Unlock()
	return nil
}

// Literal completes a literal with in-process members: mu parties "p1"..,
// the mode's helper ("key" for a key server, "decider"), one operator
// "client" and one device "device"; in a sharded literal every server has
// lit.Shards shards.
// Every member gets a real identity (certificate and pin) and every party
// a seal key, so the literal is a valid configuration as it is; Start
// finds their private keys. It panics if no key can be drawn.
func Literal(lit config.Literal, mu int) config.Literal {
	member := func(name string) config.Member {
		m := config.Member{Name: name, Addr: "mem:" + name}
		if err := newIdentity(&m); err != nil {
			panic(fmt.Sprintf("inproc: an identity for %s: %v", name, err))
		}
		for s := range max(lit.Shards, 1) {
			if lit.Shards > 1 {
				m.Shards = append(m.Shards, "mem:"+config.ShardName(name, s))
			}
		}
		return m
	}
	lit.Parties, lit.KeyServer, lit.Decider = nil, nil, nil
	spec, err := config.Spec(lit.Mode)
	if err != nil { // an unknown mode: Start says so; parties alone
		spec = &config.ModeSpec{}
	}
	for _, s := range spec.Members(mu) {
		m := member(s.Name)
		switch s.Role {
		case config.RoleKeyServer:
			lit.KeyServer = &m
		case config.RoleDecider:
			lit.Decider = &m
		default:
			if err := newSealKey(&m); err != nil {
				panic(fmt.Sprintf("inproc: a seal key for %s: %v", m.Name, err))
			}
			lit.Parties = append(lit.Parties, m)
		}
	}
	op, dev := member("client"), member("device")
	op.Addr, dev.Addr, op.Shards, dev.Shards = "", "", nil, nil
	op.Role, dev.Role = config.RoleOperator, config.RoleDevice
	lit.Clients = []config.Member{op, dev}
	return lit
}

// Sign authorises op on ids as the operator "client" (for tests that
// send parties' messages by hand).
func (c *Cluster) Sign(op protocol.OpKind, ids ...string) protocol.Auth {
	key, ok := c.keys["client"].(crypto.Signer)
	if !ok {
		c.t.Fatal("no operator key for client")
	}
	a, err := protocol.Sign(key, "client", c.P.ClusterID(), op, ids)
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

// SignSealed authorises a sealed enrollment of ids with parts of these
// hashes as the operator "client" (for tests that build requests by hand).
func (c *Cluster) SignSealed(nonce [16]byte, ids []string, hashes [][32]byte) protocol.Auth {
	key, ok := c.keys["client"].(crypto.Signer)
	if !ok {
		c.t.Fatal("no operator key for client")
	}
	a, err := protocol.SignSealed(key, "client", c.P.ClusterID(), nonce, ids, hashes)
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

// Start checks lit (see Literal) and starts every server; they stop at the
// test's cleanup.
func Start(t testing.TB, lit config.Literal) *Cluster {
	t.Helper()
	dir := t.TempDir()
	keys, seals, err := identities(&lit)
	if err != nil {
		t.Fatal(err)
	}
	// A sharded cluster places rows under a shard key, as 'cluster init'
	// makes one: the parties (and the tests' clients: c.P) hold it, the
	// helper does not (TryRestart).
	var shardKey [32]byte
	if lit.Shards > 1 && lit.ShardKeyID == "" {
		if _, err := rand.Read(shardKey[:]); err != nil {
			t.Fatal(err)
		}
		lit.ShardKeyID = config.ShardKeyID(&shardKey)
	}
	p, err := config.New(lit, dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.ShardKeyed() {
		if p, err = p.WithShardKey(&shardKey); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{t: t, P: p, Net: memnet.New(), Dir: dir, Storage: map[string]engine.Storage{}, running: map[string]*running{}, keys: keys, seals: seals}
	t.Cleanup(func() { c.StopAll(); c.quiet.Store(true) })
	if k, ok := p.KeyServer(); ok { // local servers fetch its key first (each shard its own shard's)
		for _, name := range c.ServerNames(k.Name) {
			if err := c.TryRestart(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	var members []config.Member
	if d, ok := p.Decider(); ok {
		members = append(members, d)
	}
	for _, m := range append(members, p.Parties()...) {
		for _, name := range c.ServerNames(m.Name) {
			if err := c.TryRestart(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.WaitSettled()
	return c
}

// ServerNames are the servers of member name: the member itself, and in a
// sharded cluster its shards, "name#0".. (the member's name is then its
// coordinator).
func (c *Cluster) ServerNames(name string) []string {
	names := []string{name}
	if c.P.Shards() > 1 {
		for s := range c.P.Shards() {
			names = append(names, config.ShardName(name, s))
		}
	}
	return names
}

// shardDialer is a shard's dialer: names resolve as over QUIC
// (config.Params.Resolve) to the memnet names servers listen on.
type shardDialer struct {
	network.Dialer
	p     *config.Params
	shard int
}

func (d shardDialer) Open(ctx context.Context, to string) (*network.Stream, error) {
	if m, shard, ok := d.p.Resolve(d.shard, to); ok {
		to = m.Name
		if shard != config.Coordinator {
			to = config.ShardName(m.Name, shard)
		}
	}
	return d.Dialer.Open(ctx, to)
}

// identities returns the private keys of lit's members by name: those
// Literal made, found by certificate and by seal key; a member whose
// certificate Literal did not make has none. A party without a seal key
// (a test dropped it) gets a fresh one, as 'party init' makes them.
func identities(lit *config.Literal) (map[string]crypto.PrivateKey, map[string]*seal.PrivateKey, error) {
	// The literal's parties may be the caller's: copy them before writing.
	lit.Parties = append([]config.Member(nil), lit.Parties...)
	for i := range lit.Parties {
		if m := &lit.Parties[i]; m.Seal == "" {
			if err := newSealKey(m); err != nil {
				return nil, nil, err
			}
		}
	}
	all := append(append([]config.Member(nil), lit.Parties...), lit.Clients...)
	for _, m := range []*config.Member{lit.KeyServer, lit.Decider} {
		if m != nil {
			all = append(all, *m)
		}
	}
	keys, seals := map[string]crypto.PrivateKey{}, map[string]*seal.PrivateKey{}
	made.Lock()
	defer made.Unlock()
	for _, m := range all {
		if k, ok := made.keys[m.Cert]; ok {
			keys[m.Name] = k
		}
	}
	for _, m := range lit.Parties {
		if k, ok := made.seals[m.Seal]; ok {
			seals[m.Name] = k
		}
	}
	return keys, seals, nil
}

// RowMap is server of's row map as server as sees it (it asks as that
// server): rows and live rows per origin, the set hashes sealed for the
// two, so comparable only between answers to the same asker. Clients get
// no row map.
func (c *Cluster) RowMap(of, as string) (protocol.Digest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rpc.Call(ctx, c.Dialer(as), of, &protocol.Health{})
	if err != nil {
		return nil, err
	}
	h, ok := resp.(*protocol.HealthOK)
	if !ok {
		return nil, fmt.Errorf("%s answered health with %v", of, resp.Type())
	}
	return h.Digest, nil
}

// Agreement asks server name, as the operator, to compare its row map with
// its peers'.
func (c *Cluster) Agreement(name string) ([]protocol.PeerState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := rpc.Call(ctx, c.Dialer("client"), name, &protocol.Health{Peers: true})
	if err != nil {
		return nil, err
	}
	h, ok := resp.(*protocol.HealthOK)
	if !ok {
		return nil, fmt.Errorf("%s answered health with %v", name, resp.Type())
	}
	return h.Peers, nil
}

// WaitSettled waits until every running server reports nothing unsettled
// (no undecided transaction, no undelivered change), like 'cluster up'.
func (c *Cluster) WaitSettled() {
	c.t.Helper()
	cl := c.Client("client", "")
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range c.P.Servers() {
		for _, name := range c.ServerNames(m.Name) {
			c.mu.Lock()
			_, up := c.running[name]
			c.mu.Unlock()
			for up {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				h, err := cl.Health(ctx, name)
				cancel()
				if err == nil && h.InDoubt == 0 {
					break
				}
				if time.Now().After(deadline) {
					c.t.Fatalf("%s did not settle: %v %+v", name, err, h)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// Dialer returns a dialer presenting the identity of member name (of its
// shard, for "name#s").
func (c *Cluster) Dialer(name string) network.Dialer {
	if member, shard := config.SplitServer(name); shard != config.Coordinator {
		return shardDialer{Dialer: c.Dialer(member), p: c.P, shard: shard}
	}
	role := network.RoleHelper
	if c.P.PartyIndex(name) >= 0 {
		role = network.RoleParty
	}
	if m, ok := c.P.Client(name); ok && m.Name == name {
		role = network.RoleOperator
		if config.ClientRole(m) == config.RoleDevice {
			role = network.RoleDevice
		}
	}
	return c.Net.Dialer(network.Peer{Name: name, Role: role})
}

// Client returns a client with the named identity talking to entry.
// Signer is the signing key of client name (an operator's or a device's).
func (c *Cluster) Signer(name string) crypto.Signer {
	key, ok := c.keys[name].(crypto.Signer)
	if !ok {
		c.t.Fatalf("no signing key for %s", name)
	}
	return key
}

func (c *Cluster) Client(name, entry string) *client.Client {
	cl, err := client.New(c.P, c.Dialer(name), entry)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, ok := c.P.Client(name); ok {
		if key, ok := c.keys[name].(crypto.Signer); ok {
			cl.SetSigner(name, key) // an operator's changes, any client's hidden probes
		}
	}
	return cl
}

// Restart (re)starts the named server from its data directory and waits
// until the cluster has settled.
func (c *Cluster) Restart(name string) {
	c.t.Helper()
	if err := c.TryRestart(name); err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	c.WaitSettled()
}

// TryRestart is Restart that returns the error (a server that refuses to
// start).
func (c *Cluster) TryRestart(name string) error {
	c.Stop(name)
	ln, err := c.Net.Listen(name)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(testWriter{c}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("server", name)
	ctx, cancel := context.WithCancel(context.Background())
	member, shard := config.SplitServer(name)
	p := c.P
	if p.PartyIndex(member) < 0 { // the helper never holds the shard key
		p, _ = p.WithShardKey(nil)
	}
	srv, err := server.Build(ctx, p, member, filepath.Join(c.Dir, "data", name), c.Dialer(name), ln, log,
		server.BuildOptions{Key: c.keys[member], SealKey: c.seals[member], Storage: c.Storage[name], Shard: shard})
	if err != nil {
		cancel()
		ln.Close()
		return err
	}
	r := &running{srv: srv, ln: ln, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Serve(ctx) }()
	c.mu.Lock()
	c.running[name] = r
	c.mu.Unlock()
	return nil
}

// RestoreBehind gives the named server the data it had before change: it
// is copied aside, change runs with the server up, and the copy is put
// back (a restore from a backup that misses change).
func (c *Cluster) RestoreBehind(name string, change func()) {
	c.t.Helper()
	backup := c.t.TempDir()
	c.Stop(name)
	if err := os.CopyFS(backup, os.DirFS(c.DataDir(name))); err != nil {
		c.t.Fatal(err)
	}
	c.Restart(name)
	change()
	c.Stop(name)
	os.RemoveAll(c.DataDir(name))
	if err := os.CopyFS(c.DataDir(name), os.DirFS(backup)); err != nil {
		c.t.Fatal(err)
	}
	c.Restart(name)
}

// Stop stops the named server like a crash: its listener breaks every
// stream at once, requests in progress are abandoned (their log writes,
// if any, complete: a crash cannot be placed between two instructions
// here; tests that need that wrap the log). It returns the server's exit
// error.
func (c *Cluster) Stop(name string) error {
	c.mu.Lock()
	r := c.running[name]
	delete(c.running, name)
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	r.ln.Close() // every stream breaks, as in a crash
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not stop", name)
	}
}

// Wait waits for the named server to stop by itself (a fatal error) and
// returns its error.
func (c *Cluster) Wait(name string, d time.Duration) error {
	c.mu.Lock()
	r := c.running[name]
	c.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%s is not running", name)
	}
	select {
	case err := <-r.done:
		c.mu.Lock()
		delete(c.running, name)
		c.mu.Unlock()
		return err
	case <-time.After(d):
		return fmt.Errorf("%s still runs after %v", name, d)
	}
}

// StopAll stops every server.
func (c *Cluster) StopAll() {
	c.mu.Lock()
	var names []string
	for n := range c.running {
		names = append(names, n)
	}
	c.mu.Unlock()
	for _, n := range names {
		c.Stop(n)
	}
}

// Routes returns the running server name's routes (nil if it is not running).
func (c *Cluster) Routes(name string) map[protocol.Type]engine.Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[name]; r != nil {
		return r.srv.Routes()
	}
	return nil
}

// Engine returns the running server name's engine (nil if it is not
// running): for a test's hook into one server.
func (c *Cluster) Engine(name string) engine.Engine {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[name]; r != nil {
		return r.srv.Engine()
	}
	return nil
}

// Metrics is the running server name's /metrics page (empty if it is not
// running).
func (c *Cluster) Metrics(name string) string {
	c.mu.Lock()
	r := c.running[name]
	c.mu.Unlock()
	if r == nil {
		return ""
	}
	rec := httptest.NewRecorder()
	r.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// DataDir is a server's data directory.
func (c *Cluster) DataDir(name string) string { return filepath.Join(c.Dir, "data", name) }

// testWriter sends server logs to the test log (shown on failure), or to
// stderr with IDFACE_TEST_LOGS=1.
type testWriter struct{ c *Cluster }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("IDFACE_TEST_LOGS") != "" {
		os.Stderr.Write(p)
	} else if !w.c.quiet.Load() {
		w.c.t.Log(string(p))
	}
	return len(p), nil
}
