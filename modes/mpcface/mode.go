package mpcface

import (
	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/engine/shard"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
)

// Mode2PC and ModeMPC are 2PCFace's and (mu,nu)-MPCFace's engines
// (modes.List): the same engine, the paper's two settings.
var (
	Mode2PC = mpcMode(config.Mode2PC, engine.CommTable{Place: 10, Rows: func(s engine.CommSetting) ([]engine.CommRow, error) {
		return []engine.CommRow{{Protocol: "2pcface", Phase: "enroll", Mu: 2, Bits: float64(2 * s.Dim)},
			{Protocol: "2pcface", Phase: "identify", Mu: 2, Bits: identifyBits(s), Run: &engine.CommRun{}}}, nil
	}})
	ModeMPC = mpcMode(config.ModeMPC, engine.CommTable{Place: 20, Rows: func(s engine.CommSetting) ([]engine.CommRow, error) {
		var rows []engine.CommRow
		for _, mu := range s.Mus {
			id := engine.CommRow{Protocol: "mpcface", Phase: "identify", Mu: mu, Bits: float64(mu-1) * identifyBits(s)}
			if mu > 2 && mu <= 6 { // mu = 2 is 2pc's row; more is too many processes for one machine
				id.Run = &engine.CommRun{}
			}
			rows = append(rows, engine.CommRow{Protocol: "mpcface", Phase: "enroll", Mu: mu, Bits: float64((mu - 1) * 2 * s.Dim)}, id)
		}
		return rows, nil
	}})
)

func mpcMode(name config.Mode, comm engine.CommTable) engine.Mode {
	return engine.Mode{
		ModeSpec: config.MustSpec(name),
		Server: func(*config.Params, string) engine.Server {
			srv := rowtxn.HolderServer("party", "shares.log", store.KindShares, func(env engine.Env) (rowtxn.Holder, error) { return New(env) })
			return shard.Server(srv, func(p *config.Params) shard.Options {
				return shard.Options{Mode: string(p.Mode()) + "-coord", Enroll: protocol.TEnroll, EnrollMax: engine.EnrollBound(p)}
			})
		},
		Rebalance:       shard.Rebalance,
		IdentifyFormula: IdentifyFormula,
		// Two bit planes (the ternary value's sign and magnitude) of d
		// columns of rows bits.
		Storage:  func(p *config.Params, rows int) float64 { return float64(2 * p.Dim() * ((rows + 63) / 64) * 8) },
		CommCost: []engine.CommTable{comm},
	}
}

// identifyBits is the paper's traffic of one identification between two
// parties (App. G): 2*beta selected columns of D bits and the query's 2d
// bits; (mu,nu)-MPCFace moves it between the entry and each of mu-1.
func identifyBits(s engine.CommSetting) float64 { return float64(2*s.IDs*s.Beta + 2*s.Dim) }

// IdentifyFormula is the paper's traffic of one identification over rows
// rows (App. G, H): each of the mu-1 helpers sends 2*beta selected
// columns of rows bits and receives the query's 2d bits.
func IdentifyFormula(p *config.Params, rows int) (string, float64) {
	return "(mu-1)(2D*beta+2d)", float64(p.Mu()-1) * float64(2*rows*p.Beta()+2*p.Dim()) / 8
}
