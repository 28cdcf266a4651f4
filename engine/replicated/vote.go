package replicated

import (
	"bytes"
	"crypto/sha256"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/replicated"
)

// The share-hash vote of enrollment. Every share s_j is held by two
// holders (j and j-1), which must hold the same copy: an operator's client
// that gave them different copies would make every later query refused.
// So before the batch commits, every holder's vote carries a digest of
// each of its two shares of the batch, each row's share hashed with its
// row address and share index (replicated.ShareHash), and the entry (the
// transaction's origin) aborts the batch, naming the pair, unless the two
// digests of every share agree. One deviating server: an honest entry
// catches a deviating client; a deviating entry can only refuse batches
// (or commit inconsistent ones, which every query then refuses).

// checkSize is a vote's check: the digests of the holder's own and next
// shares of the batch.
const checkSize = 2 * sha256.Size

// shareCheck is holder self's check of prep: the digests of its own share
// and of its next share over the batch's rows.
func shareCheck(cluster [16]byte, prep *protocol.Prepare, self int) []byte {
	held := replicated.Held(self)
	own, next := sha256.New(), sha256.New()
	for _, op := range prep.Ops {
		if op.Kind == protocol.OpDelete { // puts, and a reshare's new shares
			continue
		}
		half := len(op.Share) / 2 // the pair is s_i then s_(i+1)
		a := replicated.ShareHash(cluster, uint32(prep.Origin), op.Seq, held[0], op.Share[:half])
		b := replicated.ShareHash(cluster, uint32(prep.Origin), op.Seq, held[1], op.Share[half:])
		own.Write(a[:])
		next.Write(b[:])
	}
	return next.Sum(own.Sum(make([]byte, 0, checkSize)))
}

// compareChecks names the pairs of holders whose digests of a share they
// both hold differ (a missing or malformed check counts as differing).
// With holder down down (a change held for it), the two shares it holds
// have one holder up each and are not compared; it opens the copy the
// operator sealed to it when it is back.
func compareChecks(p *Params, checks [][]byte, down int) []string {
	var pairs []string
	for j := range replicated.Holders {
		h := replicated.HoldersOf(j) // h[0] keeps s_j as its own share, h[1] as its next
		if h[0] == down || h[1] == down {
			continue
		}
		a, b := checks[h[0]], checks[h[1]]
		if len(a) != checkSize || len(b) != checkSize || !bytes.Equal(a[:sha256.Size], b[sha256.Size:]) {
			pairs = append(pairs, pairLabel(p, h[0], h[1]))
		}
	}
	return pairs
}
