package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/server"
)

func partyRebuild(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("party rebuild", "idface party rebuild --cluster DIR --party NAME\nidface party rebuild --config cluster.json --home DIR\n\n"+
		"Restores a stopped server whose data directory is gone from the other\n"+
		"servers, in a mode that can (replicated: each of the two other share\n"+
		"holders sends the one share it holds in common with this one, and both\n"+
		"send the ids; neither sends more). The home must be the server's own\n"+
		"(home.json, identity.key, identity.crt, seal.key and, in a keyed sharded\n"+
		"cluster, shard.key: restore them from the member's backup); its data\n"+
		"directory must hold no log (move a damaged or stale one aside first). The\n"+
		"other holders must be running. Then start the server: entries deliver\n"+
		"what was enrolled or deleted meanwhile, and checked answers resume.\n"+
		"In a sharded cluster each shard is rebuilt on its own (--shard N), from\n"+
		"the same shard of the other holders.", stderr)
	mf := addMemberFlags(fs, "party", "server name in a local cluster").withData(fs)
	shard := fs.Int("shard", config.Coordinator, "in a sharded cluster: the shard to rebuild (0..shards-1)")
	if err := parse(fs, args); err != nil {
		return err
	}
	p, h, _, err := mf.open("")
	if err != nil {
		return err
	}
	if _, err := h.Check(p); err != nil {
		return err
	}
	if p.Shards() > 1 && (*shard < 0 || *shard >= p.Shards()) || p.Shards() == 1 && *shard != config.Coordinator {
		return fmt.Errorf("--shard %d: this cluster has %d shards per server; a sharded server's rows are rebuilt one shard at a time (--shard 0..%d)", *shard, p.Shards(), p.Shards()-1)
	}
	if p.Shards() > 1 {
		h.UseShard(*shard)
	}
	name := h.Self.Name
	if p, err = server.WithShardKey(p, h, name); err != nil { // a rebuilt shard keeps only its rows
		return err
	}
	srv, err := modes.ServerOf(p, name)
	if err != nil {
		return err
	}
	if srv.Rebuild == nil {
		return fmt.Errorf("%s: a %s of mode %s cannot be rebuilt from the other servers (its data exists nowhere else): restore its own backup, or remove it from service and enroll its rows again", name, srv.Role, p.Mode())
	}
	unlock, err := h.Lock("rebuild") // never beside a running server
	if err != nil {
		return err
	}
	defer unlock()
	cert, err := h.Certificate()
	if err != nil {
		return err
	}
	d := quicnet.NewDialer(cert, p.Directory(*shard), protocol.Version) // a shard's peers are their same shard
	defer d.Close()
	data := h.DataDir()
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	env := engine.Env{Params: p, Self: name, Shard: *shard, Net: d, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(error) {}}
	fmt.Fprintf(stdout, "rebuilding %s (%s) in %s from the other servers\n", env.Member(), p.Mode(), data)
	if err := srv.Rebuild(ctx, env, data, stdout); err != nil {
		return fmt.Errorf("rebuild of %s: %w (nothing is served from a partial rebuild: move %s aside and run it again)", name, err, data)
	}
	fmt.Fprintf(stdout, "rebuilt: start %s ('idface cluster up' in a local cluster, or its service); the entries then deliver what changed meanwhile\n", name)
	return nil
}
