package engine

import (
	"fmt"
	"sort"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// Request bounds, in bytes of the framed request (version and type
// included), for Route.Max. The runtime checks the announced length
// against the route's bound before it reads or allocates anything, so
// every route must have one (CheckRoutes).

// Small bounds every request that carries no template or share.
const Small = 4096

// digestBytes bounds a row-map digest on the wire.
const digestBytes = 4 + 24*protocol.MaxParties

// IdentifyBound is a client's identify: top-K and one template.
func IdentifyBound(p *config.Params) int { return 2 + 2 + 4 + 4*p.Dim() }

// ShardIdentifyBound bounds a coordinator's ShardIdentify: an Identify
// and a query id.
func ShardIdentifyBound(p *config.Params) int { return IdentifyBound(p) + 16 }

// ShardHiddenBound is a device's hidden probe with the coordinator's
// query id.
func ShardHiddenBound(p *config.Params) int { return HiddenIdentifyBound(p) + 16 }

// EnrollBound is a batch of templates with the operator's Auth, at most
// what the cluster takes in one request.
func EnrollBound(p *config.Params) int {
	return 2 + protocol.MaxAuth + 4 + p.MaxEnrollBatch()*(2+protocol.MaxIDLen+4+4*p.Dim())
}

// PrepareBound is a batch of ops for one party, each with a share of at
// most share bytes (a seed is smaller), and the operator's Auth.
func PrepareBound(p *config.Params, share int) int {
	return 2 + 16 + 1 + 2 + 4 + protocol.MaxAuth + 4 + p.MaxEnrollBatch()*(1+4+2+protocol.MaxIDLen+1+4+share) + priorBytes
}

// priorBytes is a Prepare's trailer: the Prior decision (a transaction id
// and a flag) and the reshare (a flag, an epoch and a key).
const priorBytes = 16 + 1 + 1 + 4 + 32

// SealedEnrollBound is a sealed batch: ids, and one sealed part per
// party of a flag and a share of at most share bytes per id.
func SealedEnrollBound(p *config.Params, share int) int {
	return 2 + protocol.MaxAuth + 4 + p.MaxEnrollBatch()*(2+protocol.MaxIDLen) + 1 + p.Mu()*sealedPartBound(p, share)
}

// SealedPrepareBound is a prepare without shares, one party's sealed part,
// every part's hash and the third party's part (SealedPrepare.Held).
func SealedPrepareBound(p *config.Params, share int) int {
	return PrepareBound(p, 0) + 2*sealedPartBound(p, share) + 1 + 32*p.Mu()
}

func sealedPartBound(p *config.Params, share int) int {
	return 4 + seal.Overhead + 1 + p.MaxEnrollBatch()*share
}

// QueryBound is a 2PC/MPC query: the selection's words and a digest.
func QueryBound(p *config.Params) int {
	return 2 + 4 + 16*template.Words(p.Dim()) + digestBytes + 4
}

// QueryBatchBound is a 2PC/MPC entry's batch of queries: up to
// protocol.MaxQueryBatch probes of two bitsets, the digest and the block
// size.
func QueryBatchBound(p *config.Params) int {
	return 2 + 4 + 2 + protocol.MaxQueryBatch*16*template.Words(p.Dim()) + digestBytes + 4
}

// BlindQueryBound is a blind query: ids, sigma, digest, at most d
// coefficients of 3 bytes, the down holder, and a hidden probe's nonce
// and sealed pair of query shares.
func BlindQueryBound(p *config.Params) int {
	return 2 + 16 + 32 + digestBytes + 4 + 3*p.Dim() + 1
}

// HiddenQueryBound is an entry's batch of hidden probes for a helper: the
// sealed row map and, per probe, ids, nonce, time, the helper's sealed
// part and the device's signature.
func HiddenQueryBound(p *config.Params) int {
	return 2 + digestBytes + 2 + protocol.MaxHiddenBatch*(16+32+16+8+4+queryPartBound(p)+probeAuthBound(p))
}

// probeAuthBound is a hidden probe's signature with its parts' hashes
// (protocol.ProbeAuth).
func probeAuthBound(p *config.Params) int { return 2 + 1 + 32*p.Mu() + protocol.MaxAuth }

// HiddenIdentifyBound is a device's hidden-probe identify: top-K, nonce
// time, one sealed pair of query shares per party and the device's
// signature.
func HiddenIdentifyBound(p *config.Params) int {
	return 2 + 2 + 16 + 8 + 4 + p.Mu()*(4+queryPartBound(p)) + protocol.MaxAuth
}

// queryPartBound is one sealed pair of query shares (two d-vectors of at
// most 16-bit elements).
func queryPartBound(p *config.Params) int { return seal.Overhead + 4*p.Dim() }

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
