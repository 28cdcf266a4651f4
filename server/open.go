package server

import (
	"context"
	"crypto"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/host/pairkey"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
)

// Open builds the server whose home is h, as a real process runs it: its
// identity from the home (the configuration must pin the same
// certificate), a QUIC listener on the home's listen address and a dialer,
// both with pinned mutual TLS, its data in the home, and the engine of the
// cluster's mode and the server's role.
func Open(ctx context.Context, p *config.Params, h *home.Home, log *slog.Logger) (srv *Server, err error) {
	return OpenLocked(ctx, p, h, log, nil)
}

// OpenLocked is Open for a caller that already holds the data's lock
// (h.Lock; unlock releases it, after Serve or when opening fails): 'idface
// serve' takes it before anything else, so that a second server is
// refused as already running rather than by a port in use. A nil unlock
// takes the lock here.
func OpenLocked(ctx context.Context, p *config.Params, h *home.Home, log *slog.Logger, unlock func() error) (srv *Server, err error) {
	return OpenShard(ctx, p, h, config.Coordinator, log, unlock)
}

// OpenShard is OpenLocked for shard shard of a sharded member
// (config.Coordinator: its coordinator, or the server of an unsharded
// cluster). The home's data directory must be the shard's
// (home.UseShard); it listens on the shard's address unless the home
// names another.
func OpenShard(ctx context.Context, p *config.Params, h *home.Home, shard int, log *slog.Logger, unlock func() error) (srv *Server, err error) {
	if unlock != nil {
		defer func() {
			if srv == nil {
				unlock()
			}
		}()
	}
	me, err := h.Check(p)
	if err != nil {
		return nil, err
	}
	if _, ok := p.Server(me.Name); !ok {
		return nil, fmt.Errorf("%s is a client of the cluster, not a server", me.Name)
	}
	cert, err := h.Certificate()
	if err != nil {
		return nil, err
	}
	if unlock == nil {
		if unlock, err = h.Lock("serve"); err != nil {
			return nil, err
		}
		defer func() {
			if srv == nil {
				unlock()
			}
		}()
	}
	if shard < config.Coordinator || shard >= p.Shards() || shard >= 0 && p.Shards() == 1 && shard != 0 {
		return nil, fmt.Errorf("shard %d: this cluster has %d shards (0..%d)", shard, p.Shards(), p.Shards()-1)
	}
	if p, err = WithShardKey(p, h, me.Name); err != nil {
		return nil, err
	}
	listen := h.Listen
	if listen == "" || listen == me.Addr { // a shard binds its own address, unless the home binds a wildcard (a pod)
		listen = me.ShardAddr(shard)
	}
	dialer := quicnet.NewDialer(cert, p.Directory(shard), protocol.Version)
	ln, err := quicnet.Listen(listen, cert, p.Pins(), quicnet.ListenOptions{Version: protocol.Version, ConnsPerPin: p.Limits().ConnsPerPeer}, log)
	if err != nil {
		dialer.Close()
		return nil, err
	}
	pairKey, err := h.PairKey(me, cert.PrivateKey) // the key of the certificate the config names (a rotation may be finishing)
	if err != nil {
		ln.Close()
		dialer.Close()
		return nil, err
	}
	opt := BuildOptions{Key: pairKey, Shard: shard}
	if p.Spec().Sealed && p.PartyIndex(me.Name) >= 0 { // its enrollments are sealed to it
		if opt.SealKey, err = h.SealKey(); err != nil {
			ln.Close()
			dialer.Close()
			return nil, err
		}
	}
	srv, err = Build(ctx, p, me.Name, h.DataDir(), dialer, ln, log, opt)
	if err != nil {
		ln.Close()
		dialer.Close()
		return nil, err
	}
	srv.closer = append(srv.closer, dialer.Close, unlock)
	hash := p.Hash()
	role, _ := modes.ServerOf(p, me.Name) // Build succeeded: known
	log.Info("serving", "addr", ln.Addr(), "advertised", me.ShardAddr(shard), "shard", shard, "mode", p.Mode(), "role", role.Role, "mu", p.Mu(),
		"config_serial", p.Serial(), "config_hash", fmt.Sprintf("%x", hash[:8]))
	return srv, nil
}

// WithShardKey is p for server name of home h: with the home's shard key
// at a party of a cluster whose placement is keyed (it places ids), and
// never at a helper, which must not hold the key (a decider or key server
// with it could tell which ids a shard holds, the leak the key closes).
func WithShardKey(p *config.Params, h *home.Home, name string) (*config.Params, error) {
	key, err := h.ShardKey()
	if err != nil {
		return nil, err
	}
	switch {
	case p.PartyIndex(name) < 0 && key != nil:
		return nil, fmt.Errorf("%s holds %s, but %s is the cluster's helper, which must never hold the shard key: remove the file (and, if it was the cluster's key, know that this server could place ids)", h.Dir, config.ShardKeyFile, name)
	case p.PartyIndex(name) < 0 || !p.ShardKeyed():
		return p.WithShardKey(nil)
	case key == nil:
		return nil, fmt.Errorf("this cluster places rows under a shard key (shard_key_id %s), and %s has no %s: copy the cluster's key there (every row-holding server and operator holds it)", p.Literal().ShardKeyID, h.Dir, config.ShardKeyFile)
	}
	return p.WithShardKey(key)
}

// BuildOptions adjust Build.
type BuildOptions struct {
	// Key is the server's identity key, from which it derives the keys it
	// shares with the other servers (host/pairkey); without it the
	// server compares no row map with another and answers no query that
	// needs it.
	Key crypto.PrivateKey
	// SealKey opens the parts of sealed enrollments sealed to this server
	// (a blind share holder's; internal/codec/seal).
	SealKey *seal.PrivateKey
	// Storage opens the engine's logs (engine.Env.Storage): engine.Files
	// when nil; in-process tests may give a disk that fails.
	Storage engine.Storage
	// Shard is the server's shard in a sharded cluster, or
	// config.Coordinator for its coordinator (engine.Env.Shard).
	Shard int
}

// Build makes the named server of cluster p over any network: its engine
// with its data in dir, behind ln, reaching the other servers through d.
// Tests build whole clusters in one process with network/memnet.
func Build(ctx context.Context, p *config.Params, name, dir string, d network.Dialer, ln network.Listener, log *slog.Logger, opt BuildOptions) (*Server, error) {
	if _, ok := p.Server(name); !ok {
		return nil, fmt.Errorf("server %q is not in the cluster config", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	keys, err := pairkey.Derive(p, name, opt.Key)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	var srv *Server
	env := engine.Env{Params: p, Self: name, Net: d, Storage: opt.Storage, Log: log, Metrics: reg, PairKeys: keys, SealKey: opt.SealKey, Shard: opt.Shard,
		Fatal: func(err error) { srv.Fatal(err) }}
	eng, closers, err := openEngine(ctx, env, dir)
	if err != nil {
		return nil, err
	}
	srv, err = New(p, name, eng, ln, log, Options{Registry: reg, Closers: closers})
	if err != nil {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	return srv, nil
}

// openEngine makes the engine of env.Self, as its mode declares it
// (engine.Mode.Server), with its storage in dir; the returned closers
// release the storage.
func openEngine(ctx context.Context, env engine.Env, dir string) (engine.Engine, []func() error, error) {
	srv, err := modes.ServerOf(env.Params, env.Self)
	if err != nil {
		return nil, nil, err
	}
	return srv.Open(ctx, env, dir)
}

// Compile-time checks that the implementations fit the interfaces.
var (
	_ network.Listener = (*quicnet.Listener)(nil)
	_ network.Dialer   = (*quicnet.Dialer)(nil)
	_ engine.Log       = (*store.Log)(nil)
)
