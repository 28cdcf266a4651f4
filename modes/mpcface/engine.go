// Package mpcface is the protocol engine of 2PCFace and (mu,nu)-MPCFace
// (paper App. G and H): each of mu parties holds XOR shares of every
// enrolled row's T_alpha(x) in column-major stores; any party is the entry
// for its devices. Enrollment and deletion are the two-phase transactions
// of engine/rowtxn (coordinator: the entry, participants: every other
// party); a query broadcasts T_beta(y) and the helpers stream their
// selected columns to the entry, which XORs and scores them (Fig.
// "2pc_id").
//
// The engine holds no socket and opens no file: it talks through
// engine.Env's network and appends to an engine.Log; the server runtime
// wires both.
//
// # Security model
//
// Semi-honest, non-colluding parties. One party's store is uniformly random.
// The entry of a query reconstructs every row's ternary bits at the query's
// positions (the paper's design); see docs/SECURITY.md.
package mpcface

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// bits adapts a party's XOR column store to rowtxn.Shares: a share is z+
// and z- as little-endian words.
type bits struct{ *sharing.Store }

func (b bits) Put(seq int, share []byte, live bool) error {
	w := template.Words(b.Dim())
	sh := sharing.NewShare(b.Dim())
	if share != nil {
		if len(share) != 16*w {
			return fmt.Errorf("mpcface: a share of %d bytes, want %d", len(share), 16*w)
		}
		copy(network.WordBytes(sh.Plus), share[:8*w])
		copy(network.WordBytes(sh.Minus), share[8*w:])
	}
	return b.Store.Put(seq, sh, live)
}

// Erase zeroes the row's bits and marks it dead.
func (b bits) Erase(seq int) error { return b.Store.Put(seq, sharing.NewShare(b.Dim()), false) }

// PutRows stores a batch of new rows, 64 rows to a word.
func (b bits) PutRows(seq0 int, shares [][]byte) error {
	w := template.Words(b.Dim())
	rows := make([]sharing.Share, len(shares))
	buf := make([]uint64, 2*w*len(shares))
	for i, sh := range shares {
		if len(sh) != 16*w {
			return fmt.Errorf("mpcface: a share of %d bytes, want %d", len(sh), 16*w)
		}
		words := buf[2*w*i : 2*w*(i+1)]
		copy(network.WordBytes(words), sh)
		rows[i] = sharing.Share{Plus: words[:w:w], Minus: words[w:]}
	}
	return b.Store.PutRows(seq0, rows)
}

// shareBytes is the wire and log form of a share.
func shareBytes(sh sharing.Share) []byte {
	return append(append([]byte(nil), network.WordBytes(sh.Plus)...), network.WordBytes(sh.Minus)...)
}

// Engine is one party of a 2PC/MPC cluster.
type Engine struct {
	*rowtxn.Core[bits]
	env engine.Env
	p   *config.Params
	tr  *engine.Transformers // T_beta for queries
	// workers score an identification's blocks in parallel.
	workers int
	// batch groups concurrent identifies at the entry (nil: batch_max 1).
	batch *engine.Batcher[*probe, protocol.Msg]
	m     struct {
		wait, score      prometheus.Counter // entry: seconds waiting for helpers' blocks, scoring
		batches, batched prometheus.Counter // entry: batches run and their identifies
	}
}

// New makes the engine of party env.Self; feed it the log with Replay,
// then call Start.
func New(env engine.Env) (*Engine, error) {
	p := env.Params
	d := p.Dim()
	core, err := rowtxn.New(env, rowtxn.Options[bits]{
		ShareSize: 16 * template.Words(d),
		NewShares: func() (bits, error) {
			s, err := sharing.NewStore(d, 0)
			return bits{s}, err
		},
	})
	if err != nil {
		return nil, err
	}
	e := &Engine{Core: core, env: env, p: p, tr: engine.NewTransformers(d, p.Beta()), workers: env.Cores()}
	e.m.wait = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_identify_wait_seconds_total", Help: "Entry: time spent waiting for helpers' blocks."})
	e.m.score = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_identify_score_seconds_total", Help: "Entry: time spent on own columns and scoring."})
	env.Metrics.MustRegister(e.m.wait, e.m.score)
	e.m.batches, e.m.batched = engine.NewBatchCounters(p, env.Metrics)
	if bmax, bwait := p.Batch(); bmax > 1 {
		// Eager: an idle entry runs a lone identify at once (a pass costs
		// far more than batch_wait); identifies that arrive while a batch
		// runs gather into the next, which starts when it ends, when it
		// is full or batch_wait after it opened (then as a second flight).
		e.batch = engine.NewBatcher(min(bmax, protocol.MaxQueryBatch), bwait, 2, p.Timeouts().Identify, e.runBatch).Eager()
	}
	return e, nil
}

// Routes lists the requests a party answers.
func (e *Engine) Routes() map[protocol.Type]engine.Route {
	r := e.Core.Routes()
	r[protocol.TEnroll] = engine.Route{Op: "enroll", From: engine.Operators, Handle: e.Guard(e.enroll), Max: engine.EnrollBound(e.p)}
	r[protocol.TIdentify] = engine.Route{Op: "identify", From: engine.Clients, Handle: e.Guard(e.identify), Max: engine.IdentifyBound(e.p), Long: true, Query: true}
	if e.env.Sharded() {
		r[protocol.TShardIdentify] = engine.Route{Op: "identify", From: engine.Parties, Handle: e.Guard(e.shardIdentify), Max: engine.ShardIdentifyBound(e.p), Long: true, Query: true}
	}
	r[protocol.TQuery] = engine.Route{Op: "query", From: engine.Parties, Handle: e.Guard(e.serveQuery), Max: engine.QueryBound(e.p), Long: true, Query: true}
	r[protocol.TQueryBatch] = engine.Route{Op: "query", From: engine.Parties, Handle: e.Guard(e.serveQueryBatch), Max: engine.QueryBatchBound(e.p), Long: true, Query: true}
	return r
}

// enroll handles a batch at its entry party (MPCFace.Enroll).
func (e *Engine) enroll(ctx context.Context, r engine.Request) protocol.Msg {
	return e.Enroll(ctx, r.Msg.(*protocol.Enroll), e.share)
}

// share transforms and splits a batch on all cores; ops[k] holds party k's
// shares. Seq is filled in by the transaction.
func (e *Engine) share(items []protocol.Item) ([][]protocol.Op, error) {
	mu, d := e.p.Mu(), e.p.Dim()
	ops := make([][]protocol.Op, mu)
	for k := range ops {
		ops[k] = make([]protocol.Op, len(items))
	}
	err := engine.Parallel(len(items), 64, func(lo, hi int) error {
		tr, err := template.NewTransformer(d, e.p.Alpha())
		if err != nil {
			return err
		}
		rnd, err := sharing.NewStream(e.env.Rand) // AES-CTR keyed from crypto/rand
		if err != nil {
			return err
		}
		z := template.NewTernary(d)
		defer func() { clear(z.Plus); clear(z.Minus) }()
		sh := make([]sharing.Share, mu)
		for k := range sh {
			sh[k] = sharing.NewShare(d)
		}
		for i := lo; i < hi; i++ {
			if err := template.Apply(tr, items[i].Template, z); err != nil {
				return fmt.Errorf("item %d (%s): %w", i, items[i].ID, err)
			}
			if err := sharing.GenShareInto(sh, z, rnd); err != nil {
				return err
			}
			for k := range ops {
				ops[k][i] = protocol.Op{Kind: protocol.OpPut, ID: items[i].ID, Share: shareBytes(sh[k])}
			}
		}
		return nil
	})
	return ops, err
}

// blockWords is the number of 64-row words per streamed block: the
// configured Block bytes of n selected columns (2*beta for one query, the
// union's for a batch).
func blockWords(p *config.Params, n int) int { return max(1, p.Block()/(n*8)) }

// RowShare is this party's share of row seq of origin k's segment, as its
// log writes it (shard.Rebalance).
func (e *Engine) RowShare(k, seq int) ([]byte, error) {
	e.RLock()
	defer e.RUnlock()
	sh, err := e.Shares(k).Row(seq)
	if err != nil {
		return nil, err
	}
	return shareBytes(sh), nil
}
