package protocol

import (
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/template"
)

// Request bounds, in bytes of the framed request (version and type
// included), for a route's size limit (engine.Route.Max). The runtime
// checks the announced length against the route's bound before it reads
// or allocates anything, so every route must have one. Each bound follows
// its message's layout; those of a cluster's messages take the cluster's
// numbers (Limits).

// Small bounds every request that carries no template or share.
const Small = 4096

// Limits are the numbers of a cluster that its requests' bounds depend on
// (config.Params has them: protocol cannot take a config.Params, since
// config imports protocol).
type Limits struct {
	Dim            int // a template's dimension d
	Mu             int // the parties that hold rows
	MaxEnrollBatch int // the templates (or ids) of one enrollment request
	MaxTopK        int // the most candidates an identify asks for
}

// digestBytes bounds a row-map digest on the wire.
const digestBytes = 4 + 24*MaxParties

// IdentifyBound is a client's identify: top-K and one template.
func IdentifyBound(l Limits) int { return 2 + 2 + 4 + 4*l.Dim }

// ShardIdentifyBound bounds a coordinator's ShardIdentify: an Identify
// and a query id.
func ShardIdentifyBound(l Limits) int { return IdentifyBound(l) + 16 }

// ShardHiddenBound is a device's hidden probe with the coordinator's
// query id.
func ShardHiddenBound(l Limits) int { return HiddenIdentifyBound(l) + 16 }

// EnrollBound is a batch of templates with the operator's Auth, at most
// what the cluster takes in one request.
func EnrollBound(l Limits) int {
	return 2 + MaxAuth + 4 + l.MaxEnrollBatch*(2+MaxIDLen+4+4*l.Dim)
}

// PrepareBound is a batch of ops for one party, each with a share of at
// most share bytes (a seed is smaller), and the operator's Auth.
func PrepareBound(l Limits, share int) int {
	return 2 + 16 + 1 + 2 + 4 + MaxAuth + 4 + l.MaxEnrollBatch*(1+4+2+MaxIDLen+1+4+share) + priorBytes
}

// priorBytes is a Prepare's trailer: the Prior decision (a transaction id
// and a flag) and the reshare (a flag, an epoch and a key).
const priorBytes = 16 + 1 + 1 + 4 + 32

// SealedEnrollBound is a sealed batch: ids, and one sealed part per
// party of a flag and a share of at most share bytes per id.
func SealedEnrollBound(l Limits, share int) int {
	return 2 + MaxAuth + 4 + l.MaxEnrollBatch*(2+MaxIDLen) + 1 + l.Mu*sealedPartBound(l, share)
}

// SealedPrepareBound is a prepare without shares, one party's sealed part,
// every part's hash and the third party's part (SealedPrepare.Held).
func SealedPrepareBound(l Limits, share int) int {
	return PrepareBound(l, 0) + 2*sealedPartBound(l, share) + 1 + 32*l.Mu
}

func sealedPartBound(l Limits, share int) int {
	return 4 + seal.Overhead + 1 + l.MaxEnrollBatch*share
}

// QueryBound is a 2PC/MPC query: the selection's words and a digest.
func QueryBound(l Limits) int {
	return 2 + 4 + 16*template.Words(l.Dim) + digestBytes + 4
}

// QueryBatchBound is a 2PC/MPC entry's batch of queries: up to
// MaxQueryBatch probes of two bitsets, the digest and the block size.
func QueryBatchBound(l Limits) int {
	return 2 + 4 + 2 + MaxQueryBatch*16*template.Words(l.Dim) + digestBytes + 4
}

// BlindQueryBound is a blind query: ids, sigma, digest, at most d
// coefficients of 3 bytes, the down holder, and a hidden probe's nonce
// and sealed pair of query shares.
func BlindQueryBound(l Limits) int {
	return 2 + 16 + 32 + digestBytes + 4 + 3*l.Dim + 1
}

// HiddenQueryBound is an entry's batch of hidden probes for a helper: the
// sealed row map and, per probe, ids, nonce, time, the helper's sealed
// part and the device's signature.
func HiddenQueryBound(l Limits) int {
	return 2 + digestBytes + 2 + MaxHiddenBatch*(16+32+16+8+4+queryPartBound(l)+probeAuthBound(l))
}

// probeAuthBound is a hidden probe's signature with its parts' hashes
// (ProbeAuth).
func probeAuthBound(l Limits) int { return 2 + 1 + 32*l.Mu + MaxAuth }

// HiddenIdentifyBound is a device's hidden-probe identify: top-K, nonce
// time, one sealed pair of query shares per party and the device's
// signature.
func HiddenIdentifyBound(l Limits) int {
	return 2 + 2 + 16 + 8 + 4 + l.Mu*(4+queryPartBound(l)) + MaxAuth
}

// queryPartBound is one sealed pair of query shares (two d-vectors of at
// most 16-bit elements) and two components of the verdict key.
func queryPartBound(l Limits) int { return seal.Overhead + 4*l.Dim + 2*VerdictKeySize }

// TagAskBound is the largest TagAsk a holder reads: a selection of
// selection bytes (that of the largest tag grid,
// sharing/replicated.TagGrid of MaxRows, which protocol does not import:
// its tests reach config, which imports protocol) per candidate.
func TagAskBound(l Limits, selection int) int { return 64 + l.MaxTopK*(4+selection) }

// LogBatch is the most rows of share units of share bytes one prepare
// record of a party's log holds (store.MaxRecord, with room for the
// header): the enrollment batch of a mode whose parties log a whole batch
// in one record, where a full batch of MaxBatch would not fit (replicated
// mode's pairs at k = 16 and d = 512).
func LogBatch(share int) int {
	perRow := 1 + 4 + 2 + MaxIDLen + share + 4 // kind, seq, id, unit, its checksum
	return max(1, min(MaxBatch, (store.MaxRecord-1<<16)/perRow))
}
