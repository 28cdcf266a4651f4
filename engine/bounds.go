package engine

import (
	"fmt"
	"sort"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
)

// Request bounds, for Route.Max: each is the message's own bound in
// protocol (protocol/bounds.go, beside the messages), given this cluster's
// numbers. These wrappers stay because protocol cannot take a
// *config.Params (config imports protocol: an import cycle); they only
// pass the numbers on (Limits).

// Limits are the numbers of p the request bounds depend on.
func Limits(p *config.Params) protocol.Limits {
	return protocol.Limits{Dim: p.Dim(), Mu: p.Mu(), MaxEnrollBatch: p.MaxEnrollBatch(), MaxTopK: p.MaxTopK()}
}

// IdentifyBound is protocol.IdentifyBound in cluster p.
func IdentifyBound(p *config.Params) int { return protocol.IdentifyBound(Limits(p)) }

// ShardIdentifyBound is protocol.ShardIdentifyBound in cluster p.
func ShardIdentifyBound(p *config.Params) int { return protocol.ShardIdentifyBound(Limits(p)) }

// ShardHiddenBound is protocol.ShardHiddenBound in cluster p.
func ShardHiddenBound(p *config.Params) int { return protocol.ShardHiddenBound(Limits(p)) }

// EnrollBound is protocol.EnrollBound in cluster p.
func EnrollBound(p *config.Params) int { return protocol.EnrollBound(Limits(p)) }

// PrepareBound is protocol.PrepareBound in cluster p.
func PrepareBound(p *config.Params, share int) int { return protocol.PrepareBound(Limits(p), share) }

// SealedEnrollBound is protocol.SealedEnrollBound in cluster p.
func SealedEnrollBound(p *config.Params, share int) int {
	return protocol.SealedEnrollBound(Limits(p), share)
}

// SealedPrepareBound is protocol.SealedPrepareBound in cluster p.
func SealedPrepareBound(p *config.Params, share int) int {
	return protocol.SealedPrepareBound(Limits(p), share)
}

// QueryBound is protocol.QueryBound in cluster p.
func QueryBound(p *config.Params) int { return protocol.QueryBound(Limits(p)) }

// QueryBatchBound is protocol.QueryBatchBound in cluster p.
func QueryBatchBound(p *config.Params) int { return protocol.QueryBatchBound(Limits(p)) }

// BlindQueryBound is protocol.BlindQueryBound in cluster p.
func BlindQueryBound(p *config.Params) int { return protocol.BlindQueryBound(Limits(p)) }

// HiddenQueryBound is protocol.HiddenQueryBound in cluster p.
func HiddenQueryBound(p *config.Params) int { return protocol.HiddenQueryBound(Limits(p)) }

// HiddenIdentifyBound is protocol.HiddenIdentifyBound in cluster p.
func HiddenIdentifyBound(p *config.Params) int { return protocol.HiddenIdentifyBound(Limits(p)) }

// CheckRoutes refuses a route table the runtime cannot serve safely: a
// route without a handler, a sender or a size bound.
func CheckRoutes(routes map[protocol.Type]Route) error {
	var bad []string
	for t, r := range routes {
		if r.Handle == nil || r.From == 0 || r.Max <= 0 || r.Op == "" {
			bad = append(bad, fmt.Sprintf("%v (op %q, max %d)", t, r.Op, r.Max))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("engine: routes without a handler, sender roles, size bound or name: %v", bad)
	}
	return nil
}
