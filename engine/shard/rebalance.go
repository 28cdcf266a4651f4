package shard

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
)

// Rebalance moves a stopped row-holding member's rows from the shards of one
// configuration to the shards of another with another shard count,
// without re-enrolment: its own shares, as they are, each row to the shard
// rowmap.ShardOf names under the new count. from[s] is the data
// directory of old shard s (one directory, the server's own, for an
// unsharded cluster) of party server srv, to[s] the empty directory of
// new shard s (the
// caller checks both: an engine touches no file but through its log).
//
// Every holder runs it on its own data; their new shards agree because
// each builds them in the same order: for each new shard and each origin's
// segment, the live rows of old shard 0, then 1, ..., each in row order.
// Deleted rows are dropped. A holder with anything unsettled (an undecided
// transaction, a decision not yet delivered to a peer) is refused: start
// the cluster until 'cluster status' shows nothing unsettled, and stop it
// again.
//
// A mode whose rows depend on a derived parameter checks it stays before
// calling (blind mode: the share ring).
func Rebalance(ctx context.Context, srv engine.Server, old, next *config.Params, self string, from, to []string, out io.Writer) error {
	if err := checkRebalance(old, next, self, from, to); err != nil {
		return err
	}
	env := func(p *config.Params, shard int) engine.Env {
		if p.Shards() == 1 {
			shard = config.Coordinator // the server of an unsharded cluster
		}
		return engine.Env{Params: p, Self: self, Shard: shard, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()}
	}

	// The rows, by new shard and origin: ids and shares in the order above.
	rows := make([][]segment, next.Shards())
	for s := range rows {
		rows[s] = make([]segment, old.Mu())
	}
	// A segment's reshare epoch in the new shards: the highest of the old
	// shards' (replicated mode), the same at every holder.
	epochs := make([]uint32, old.Mu())
	moved := 0
	for s, dir := range from {
		eng, closers, err := srv.Open(ctx, env(old, s), dir)
		if err != nil {
			return fmt.Errorf("old shard %d (%s): %w", s, dir, err)
		}
		err = func() error {
			h, ok := eng.(rowSource)
			if !ok {
				return fmt.Errorf("%s's engine keeps no rows", self)
			}
			if n := h.Unsettled(); n > 0 {
				return fmt.Errorf("old shard %d has %d changes unsettled: start the cluster until 'idface cluster status' shows none, stop it, and rebalance again", s, n)
			}
			for k := range old.Mu() {
				epochs[k] = max(epochs[k], h.Epoch(k))
				ids, live := h.RowIDs(k, 0, 1<<31)
				for seq, id := range ids {
					if !live[seq] {
						continue
					}
					share, err := h.RowShare(k, seq)
					if err != nil {
						return err
					}
					t := next.ShardOf(id)
					rows[t][k].ids = append(rows[t][k].ids, id)
					rows[t][k].shares = append(rows[t][k].shares, share)
					moved++
				}
			}
			return nil
		}()
		for _, c := range closers {
			c()
		}
		if err != nil {
			return err
		}
	}

	// Each new shard written through the holder's own engine, as a rebuild
	// writes its rows (rowtxn.Restore): a log that replays as any other.
	for t, dir := range to {
		eng, closers, err := srv.Open(ctx, env(next, t), dir)
		if err != nil {
			return fmt.Errorf("new shard %d: %w", t, err)
		}
		n, err := restoreSegments(eng.(rowSource), rows[t], epochs)
		if err == nil {
			fmt.Fprintf(out, "%s shard %d of %d: %d rows\n", self, t, next.Shards(), n)
		}
		for _, c := range closers {
			c()
		}
		if err != nil {
			return err
		}
		rows[t] = nil // written: let the collector have them
	}
	fmt.Fprintf(out, "%s: %d live rows from %d shards to %d\n", self, moved, old.Shards(), next.Shards())
	return nil
}

// segment is the rows of one origin moved to one new shard: ids and
// shares in row order.
type segment struct {
	ids    []string
	shares [][]byte
}

// restoreSegments writes a new shard's rows, origin by origin, in chunks
// through the holder's Restore (as a rebuild does), and counts them.
func restoreSegments(h rowSource, segs []segment, epochs []uint32) (int, error) {
	const chunk = 8192
	n := 0
	for k, seg := range segs {
		for base := 0; base < len(seg.ids); base += chunk {
			end := min(base+chunk, len(seg.ids))
			live := make([]bool, end-base)
			for i := range live {
				live[i] = true
			}
			if err := h.Restore(k, base, seg.ids[base:end], live, seg.shares[base:end], epochs[k]); err != nil {
				return n, err
			}
		}
		n += len(seg.ids)
	}
	return n, nil
}

// checkRebalance refuses a rebalance that is not one cluster's, of the
// same holders and transform, by one of them, from and to one directory
// per shard.
func checkRebalance(old, next *config.Params, self string, from, to []string) error {
	if len(from) != old.Shards() || len(to) != next.Shards() {
		return fmt.Errorf("rebalance from %d directories for %d shards to %d for %d", len(from), old.Shards(), len(to), next.Shards())
	}
	og, oq := old.Transform()
	ng, nq := next.Transform()
	if old.Mode() != next.Mode() || old.ClusterID() != next.ClusterID() || old.Mu() != next.Mu() || old.Dim() != next.Dim() || old.Alpha() != next.Alpha() || og.String() != ng.String() || oq.String() != nq.String() {
		return fmt.Errorf("rebalance within one cluster only: the mode, cluster id, holders, dimension, alpha and transform levels must stay")
	}
	for k := range old.Mu() {
		if old.Party(k).Name != next.Party(k).Name {
			return fmt.Errorf("holder %d is %s before and %s after: rebalance keeps the holders", k, old.Party(k).Name, next.Party(k).Name)
		}
	}
	if old.PartyIndex(self) < 0 {
		return fmt.Errorf("%s holds no rows", self)
	}
	return nil
}

// rowSource is what Rebalance reads and writes of a holder.
type rowSource interface {
	Unsettled() int
	RowIDs(k, lo, hi int) ([]string, []bool)
	RowShare(k, seq int) ([]byte, error) // the holder's share of a row, as its log writes it
	Epoch(k int) uint32                  // origin k's segment's reshare epoch
	Restore(k, base int, ids []string, live []bool, shares [][]byte, epoch uint32) error
}
