package replicated

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/engine/shard"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/replicated"
)

// Kind is the record kind of a replicated holder's log: rowtxn records
// whose shares are the holder's pair (s_i, s_(i+1)).
const Kind = store.KindReplicated

// Mode is replicated blind mode's engine (modes.List).
var Mode = engine.Mode{
	ModeSpec: config.MustSpec(config.ModeReplicated),
	Server: func(p *config.Params, name string) engine.Server {
		if name == p.DeciderName() {
			return engine.Server{Role: "decider",
				Open: func(_ context.Context, env engine.Env, _ string) (engine.Engine, []func() error, error) {
					if env.Coordinating() { // merges its shards' best scores
						return merge.NewMerger(env), nil, nil
					}
					eng, err := NewDecider(env)
					return eng, nil, err
				},
			}
		}
		srv := rowtxn.HolderServer("party", "shares.log", Kind, New)
		srv.Rebuild = func(ctx context.Context, env engine.Env, dir string, out io.Writer) error {
			return rebuildInto(ctx, env, filepath.Join(dir, srv.Log), out)
		}
		open := srv.Open
		srv.Open = func(ctx context.Context, env engine.Env, dir string) (engine.Engine, []func() error, error) {
			eng, closers, err := open(ctx, env, dir)
			if h, ok := eng.(interface{ lookAtStart(context.Context) }); ok && err == nil {
				h.lookAtStart(ctx) // a copy older than the others' stands down before it serves
			}
			return eng, closers, err
		}
		srv.Fsck = func(env engine.Env, dir string, opt engine.FsckOptions, out io.Writer) ([]string, error) {
			eng, err := New(env)
			if err != nil {
				return nil, err
			}
			problems, err := rowtxn.Fsck(env, eng, dir, srv.Log, Kind, opt, out)
			if err != nil || len(problems) > 0 { // (no log is one)
				return problems, err
			}
			// An intact log may still be older than the other holders'
			// rows (a restored backup).
			if h, ok := eng.(interface{ fsckCurrency(io.Writer) []string }); ok {
				problems = h.fsckCurrency(out)
			}
			return problems, nil
		}
		return shard.Server(srv, func(p *config.Params) shard.Options {
			return shard.Options{Mode: string(config.ModeReplicated) + "-coord", Merged: true,
				Enroll: protocol.TSealedEnroll, EnrollMax: engine.SealedEnrollBound(p, 2*p.Dim()*p.Ring().Bits/8)}
		})
	},
	Rebalance: blindbase.Rebalance,
	Describe: func(p *config.Params) string {
		g, q := p.Transform()
		return fmt.Sprintf("gallery levels %s, query levels %s, 2-of-3 shares over Z_(2^%d)", g, q, p.Ring().Bits)
	},
	// Two k-bit shares of d elements a row.
	Storage: func(p *config.Params, rows int) float64 { return float64(2 * rows * p.Dim() * p.Ring().Bits / 8) },
	IdentifyFormula: func(p *config.Params, rows int) (string, float64) {
		if p.HideProbes() {
			return "6*D*k + checks + tags of the answer + sealed query", HiddenIdentifyBits(rows, p.Dim(), p.Ring().Bits) / 8
		}
		return "3*D*k + tags of the answer + query", IdentifyBits(rows, p.Beta(), p.Ring().Bits) / 8
	},
	CommCost: []engine.CommTable{{Place: 50, Rows: commRows}},
}

// commRows are the mode's rows of the communication tables: enrollment,
// identification, and identification with hidden probes (--hide-probes
// --beta beta: the T_beta query, sealed, its cost independent of beta but
// for the ring).
func commRows(s engine.CommSetting) ([]engine.CommRow, error) {
	k := blindbase.TernaryRingBits(s.Alpha, s.Beta)
	// The entry sends each other holder its pair of d k-bit shares.
	return []engine.CommRow{{Protocol: "replicated", Phase: "enroll", Mu: replicated.Holders, Bits: float64(2 * 2 * s.Dim * k)},
		{Protocol: "replicated", Phase: "identify", Mu: replicated.Holders, Bits: IdentifyBits(s.IDs, s.Beta, k), Run: &engine.CommRun{}},
		{Protocol: "replicated-hidden", Phase: "identify", Mu: replicated.Holders, Bits: HiddenIdentifyBits(s.IDs, s.Dim, k), Run: &engine.CommRun{HideProbes: true}}}, nil
}

// IdentifyBits is one identification's traffic between the servers: three
// vectors of D k-bit masked score shares into the decider and three
// digests of them, the decider's fetch of the answer's tag (TagFetchBits,
// top 1), and the query (beta positions of 16 bits and coefficients of 8,
// a query id and a seed) to each of the two helpers.
func IdentifyBits(ids, beta, k int) float64 {
	return float64(3*ids*k+3*256+2*(24*beta+384)) + TagFetchBits(ids, 1)
}

// HiddenIdentifyBits is one hidden-probe identification's traffic between
// the servers: three vectors of D k-bit masked product shares and three
// pairs of query-share digests into the decider, each vector also to the
// holder that checks it, and each holder's two parts of the checks
// (CheckRounds x d + d + CheckRounds elements each) and a digest; the
// decider's fetch of the answer's tag (top 1); to each of the two helpers
// a query id, a seed, a nonce and its sealed pair of d-element query
// shares.
func HiddenIdentifyBits(ids, d, k int) float64 {
	checks := 3 * (2*replicated.CheckPartSize(d)*k + 256)
	return float64(6*ids*k+3*2*256+checks+2*(8*(16+32+16+seal.Overhead)+2*d*k)) + TagFetchBits(ids, 1)
}

// TagFetchBits is the decider's fetch of the tags of topK answered
// positions of ids rows from the two helpers: the digests of the tag
// grid's rows (128 bits each) from one and their digest from the other,
// and per position, to each a selection (a bit per grid row) and from each
// a grid row (32 bits per column): O(sqrt(ids)), not the 32 ids bits of
// every tag.
func TagFetchBits(ids, topK int) float64 {
	cols, rows := replicated.TagGrid(ids)
	return float64(8*(replicated.TagRowDigestSize*rows+32) + 2*topK*(8*replicated.TagSelectBytes(rows)+32*cols))
}
