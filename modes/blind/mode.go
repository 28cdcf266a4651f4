package blind

import (
	"context"
	"fmt"
	"slices"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/engine/shard"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
)

// Mode is blind mode's engine (modes.List).
var Mode = engine.Mode{
	ModeSpec: config.MustSpec(config.ModeBlind),
	Server: func(p *config.Params, name string) engine.Server {
		if name == p.DeciderName() {
			return engine.Server{Role: "decider",
				Open: func(_ context.Context, env engine.Env, _ string) (engine.Engine, []func() error, error) {
					if env.Coordinating() {
						return merge.NewMerger(env), nil, nil
					}
					eng, err := NewDecider(env)
					return eng, nil, err
				},
			}
		}
		return shard.Server(rowtxn.HolderServer("party", "shares.log", store.KindBlind, New), func(p *config.Params) shard.Options {
			return shard.Options{Mode: "blind-coord", Ranked: true, Enroll: protocol.TSealedEnroll, EnrollMax: engine.SealedEnrollBound(p, p.Dim()*p.Ring().Bits/8)}
		})
	},
	Rebalance: blindbase.Rebalance,
	Describe: func(p *config.Params) string {
		g, q := p.Transform()
		return fmt.Sprintf("gallery levels %s, query levels %s, shares over Z_(2^%d)", g, q, p.Ring().Bits)
	},
	// d k-bit elements a row.
	Storage: func(p *config.Params, rows int) float64 { return float64(rows * p.Dim() * p.Ring().Bits / 8) },
	IdentifyFormula: func(p *config.Params, rows int) (string, float64) {
		return "mu*D*k + query", IdentifyBits(rows, p.Beta(), p.Mu(), p.Ring().Bits) / 8
	},
	CommCost:   []engine.CommTable{{Place: 40, Rows: commRows}},
	KernelPath: true,
}

// commRows are blind mode's rows of the communication tables, for two
// holders and every number asked; 'commcost --measure' runs up to three.
func commRows(s engine.CommSetting) ([]engine.CommRow, error) {
	k := blindbase.TernaryRingBits(s.Alpha, s.Beta)
	var rows []engine.CommRow
	for _, mu := range slices.Compact(slices.Sorted(slices.Values(append([]int{2}, s.Mus...)))) {
		id := engine.CommRow{Protocol: "blind", Phase: "identify", Mu: mu, Bits: IdentifyBits(s.IDs, s.Beta, mu, k)}
		if mu <= 3 {
			id.Run = &engine.CommRun{}
		}
		rows = append(rows, engine.CommRow{Protocol: "blind", Phase: "enroll", Mu: mu, Bits: EnrollBits(mu)}, id)
	}
	return rows, nil
}

// EnrollBits is blind mode's enrollment traffic per template: a 256-bit
// seed to each holder but one (the entry keeps its own share, the last
// holder gets the full share).
func EnrollBits(mu int) float64 { return float64((mu - 1) * 256) }

// IdentifyBits is blind mode's identification traffic: mu vectors of D
// k-bit score shares into the decider, and the query (beta positions of 16
// bits and coefficients of 8, a 128-bit query id and a 256-bit seed) to
// each of the mu-1 helpers.
func IdentifyBits(ids, beta, mu, k int) float64 {
	return float64(mu*ids*k + (mu-1)*(24*beta+384))
}
