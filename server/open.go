package server

import (
	"context"
	"crypto"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blind"
	"github.com/idface/idface/engine/hemode"
	"github.com/idface/idface/engine/mpcface"
	"github.com/idface/idface/internal/home"
	"github.com/idface/idface/internal/pairkey"
	"github.com/idface/idface/internal/seal"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/quicnet"
)

// Open builds the server whose home is h, as a real process runs it: its
// identity from the home (the configuration must pin the same
// certificate), a QUIC listener on the home's listen address and a dialer,
// both with pinned mutual TLS, its data in the home, and the engine of the
// cluster's mode and the server's role.
func Open(ctx context.Context, p *config.Params, h *home.Home, log *slog.Logger) (srv *Server, err error) {
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
	unlock, err := h.Lock("serve")
	if err != nil {
		return nil, err
	}
	defer func() {
		if srv == nil {
			unlock()
		}
	}()
	listen := h.Listen
	if listen == "" {
		listen = me.Addr
	}
	dialer := quicnet.NewDialer(cert, p.Lookup)
	ln, err := quicnet.Listen(listen, cert, p.Pins(), quicnet.ListenOptions{ConnsPerPin: p.Limits().ConnsPerPeer}, log)
	if err != nil {
		dialer.Close()
		return nil, err
	}
	opt := BuildOptions{Key: cert.PrivateKey}
	if p.Mode() == config.ModeBlind && p.PartyIndex(me.Name) >= 0 { // its enrollments are sealed to it
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
	log.Info("serving", "addr", ln.Addr(), "advertised", me.Addr, "mode", p.Mode(), "role", role(p, me.Name), "mu", p.Mu(),
		"config_serial", p.Serial(), "config_hash", fmt.Sprintf("%x", hash[:8]))
	return srv, nil
}

// BuildOptions adjust Build.
type BuildOptions struct {
	// Key is the server's identity key, from which it derives the keys it
	// shares with the other servers (internal/pairkey); without it the
	// server compares no row map with another and answers no query that
	// needs it.
	Key crypto.PrivateKey
	// SealKey opens the parts of sealed enrollments sealed to this server
	// (a blind share holder's; internal/seal).
	SealKey *seal.PrivateKey
	// WrapLog, when set, wraps the engine's log (to fail on purpose).
	WrapLog func(engine.Log) engine.Log
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
	env := engine.Env{Params: p, Self: name, Net: d, Log: log, Metrics: reg, PairKeys: keys, SealKey: opt.SealKey,
		Fatal: func(err error) { srv.Fatal(err) }}
	wrap := opt.WrapLog
	if wrap == nil {
		wrap = func(l engine.Log) engine.Log { return l }
	}
	eng, closers, err := openEngine(ctx, env, dir, wrap)
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

func role(p *config.Params, name string) string {
	if k, ok := p.KeyServer(); ok && k.Name == name {
		return "key server"
	}
	if name == p.DeciderName() {
		return "decider"
	}
	if p.Mode() == config.ModeHE {
		return "local server"
	}
	return "party"
}

// openEngine makes the engine of env.Self with its storage in dir; the
// returned closers release the storage.
func openEngine(ctx context.Context, env engine.Env, dir string, wrap func(engine.Log) engine.Log) (engine.Engine, []func() error, error) {
	p := env.Params
	switch {
	case p.Mode() == config.ModeBlind:
		if env.Self == p.DeciderName() {
			eng, err := blind.NewDecider(env)
			return eng, nil, err
		}
		eng, err := blind.New(env)
		if err != nil {
			return nil, nil, err
		}
		return openShares(env, eng, filepath.Join(dir, "shares.log"), Binding(p, env.Self, store.KindBlind, [32]byte{}), wrap)
	case p.Mode() == config.ModeHE:
		if k, _ := p.KeyServer(); k.Name == env.Self {
			key, err := store.LoadHEKey(dir, p.HE(), hemode.KeyBinding(p), env.Log)
			if err != nil {
				return nil, nil, err
			}
			eng, err := hemode.NewKeyServer(env, key)
			return eng, nil, err
		}
		return openHELocal(ctx, env, dir, wrap)
	default:
		return openMPC(env, dir, wrap)
	}
}

// Binding is what server name's data files must be bound to: this cluster,
// this member, this mode, and for HE the key fingerprint (zero otherwise).
// Any generation is accepted: the log holds the member's generation and
// the other files are checked against it.
func Binding(p *config.Params, name string, kind store.Kind, key [32]byte) store.Binding {
	return store.Binding{Kind: kind, Cluster: p.ClusterID(), Member: name, Mode: string(p.Mode()), Key: key}
}

// openLog opens an engine's log, replaying it, and reports what it found.
func openLog(env engine.Env, path string, b store.Binding, replay func(store.Entry) error) (*store.Log, error) {
	l, rep, err := store.Open(path, b, replay)
	if err != nil {
		return nil, err
	}
	if rep.TornBytes > 0 {
		env.Log.Warn("cut a torn record off the end of the log (a crash during a write); its bytes are kept aside",
			"bytes", rep.TornBytes, "kept_in", rep.TornFile)
	}
	return l, nil
}

func openMPC(env engine.Env, dir string, wrap func(engine.Log) engine.Log) (engine.Engine, []func() error, error) {
	eng, err := mpcface.New(env)
	if err != nil {
		return nil, nil, err
	}
	return openShares(env, eng, filepath.Join(dir, "shares.log"), Binding(env.Params, env.Self, store.KindShares, [32]byte{}), wrap)
}

// replayer is an engine recovered from a log.
type replayer interface {
	engine.Engine
	Replay(store.Entry) error
	Start(engine.Log) error
}

// openShares replays an engine's log into eng and starts it.
func openShares(env engine.Env, eng replayer, path string, b store.Binding, wrap func(engine.Log) engine.Log) (engine.Engine, []func() error, error) {
	l, err := openLog(env, path, b, eng.Replay)
	if err != nil {
		return nil, nil, err
	}
	if err := eng.Start(wrap(l)); err != nil {
		l.Close()
		return nil, nil, withFile(err, l.Path())
	}
	return eng, []func() error{l.Close}, nil
}

func openHELocal(ctx context.Context, env engine.Env, dir string, wrap func(engine.Log) engine.Log) (engine.Engine, []func() error, error) {
	groups, err := store.OpenGroups(filepath.Join(dir, "groups"), env.Params.HE())
	if err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(dir, "rows.log")
	existing, err := groups.Files() // a local server with data never fetches the key again
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(logPath); err == nil {
		existing = append([]string{logPath}, existing...)
	}
	eng, err := hemode.NewLocal(ctx, env, groups, hemode.PublicKeyFile(env.Params, dir), existing)
	if err != nil {
		return nil, nil, err
	}
	// The row log's key binding is its first record (hemode checks it
	// against public.key with a message about the key), not the header.
	return openShares(env, eng, logPath, Binding(env.Params, env.Self, store.KindHERows, [32]byte{}), wrap)
}

// withFile names the log in a damage report from an engine's recovery.
func withFile(err error, path string) error {
	if de, ok := err.(*store.DamageError); ok && de.File == "" {
		de.File = path
	}
	return err
}

// Compile-time checks that the implementations fit the interfaces.
var (
	_ network.Listener = (*quicnet.Listener)(nil)
	_ network.Dialer   = (*quicnet.Dialer)(nil)
	_ engine.Log       = (*store.Log)(nil)
)
