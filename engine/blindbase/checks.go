package blindbase

import (
	"context"
	"fmt"
	"io"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/shard"
	"github.com/idface/idface/protocol"
)

// MaxRows bounds the rows of one query (n*k/8 bytes per vector).
const MaxRows = 1 << 27

// CheckShare checks the header of a holder's score shares against the
// cluster: its ring, a top-K it answers, at most MaxRows rows.
func CheckShare(p *config.Params, bits, topK int, rows uint32) *protocol.Error {
	switch {
	case bits != p.Ring().Bits:
		return protocol.Errorf(protocol.CodeBadRequest, "score shares of %d bits; this cluster's ring has %d", bits, p.Ring().Bits)
	case topK > p.MaxTopK() || topK < 1:
		return protocol.Errorf(protocol.CodeBadRequest, "top %d, the cluster allows 1..%d", topK, p.MaxTopK())
	case rows > MaxRows:
		return protocol.Errorf(protocol.CodeBadRequest, "%d rows, a decider takes at most %d", rows, MaxRows)
	}
	return nil
}

// MaxRunsAgain bounds the runs of an identify after its first lost to a
// decider's restart or to a helper's commit while it waited (a helper's
// rows may move more than once while a query waits).
const MaxRunsAgain = 2

// TernaryRingBits is the k of the share ring for the ternary gallery and
// query of weights alpha and beta (the communication tables): the
// smallest that holds every score, up to min(alpha, beta), as a signed
// value.
func TernaryRingBits(alpha, beta int) int {
	if min(alpha, beta) <= 127 {
		return 8
	}
	return 16
}

// Rebalance is shard.Rebalance for a mode sharing over blind mode's ring
// (blind and replicated), which must stay.
func Rebalance(ctx context.Context, srv engine.Server, old, next *config.Params, self string, from, to []string, out io.Writer) error {
	if old.Ring() != next.Ring() {
		return fmt.Errorf("rebalance keeps the share ring: Z_(2^%d) before, Z_(2^%d) after", old.Ring().Bits, next.Ring().Bits)
	}
	return shard.Rebalance(ctx, srv, old, next, self, from, to, out)
}
