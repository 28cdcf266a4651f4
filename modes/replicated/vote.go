package replicated

import (
	"bytes"
	"crypto/sha256"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/replicated"
)

// The share-hash vote of enrollment. Every share s_j is held by two
// holders (j and j-1), which must hold the same copy: an operator's client
// that gave them different copies would make every later query refused.
// And the third holder keeps a record of s_j (records.go), which must be
// the record of that copy. So before the batch commits, every holder's
// vote carries a digest of each of its two shares of the batch (each
// row's record, replicated.Record, computed from its copy and its salt)
// and a digest of its records of the third share, and the entry (the
// transaction's origin) aborts the batch, naming the pair, unless for
// every share the three agree. One deviating server: an honest entry
// catches a deviating client; a deviating entry can only refuse batches
// (or commit inconsistent ones, which every query then refuses).
//
// A reshare's new shares have no record yet (the recorder cannot compute
// one): every holder's digest of the third share is all zeros, and the
// recorder asks both holders for the new records once the reshare
// commits (attestRecords).

// checkSize is a vote's check: the digests of the holder's own and next
// shares of the batch, and of its records of the third.
const checkSize = 3 * sha256.Size

// shareCheck is holder self's check of prep.
func shareCheck(p *config.Params, prep *protocol.Prepare, self int) []byte {
	held := replicated.Held(self)
	half := p.Dim() * p.Ring().Bits / 8
	own, next, recs := sha256.New(), sha256.New(), sha256.New()
	cluster := p.ClusterID()
	for _, op := range prep.Ops {
		if op.Kind == protocol.OpDelete { // puts, and a reshare's new shares
			continue
		}
		if len(op.Share) != 2*half+replicated.TrailerSize {
			return nil // (validated before: a check that cannot match)
		}
		tr, _ := replicated.ParseTrailer(op.Share[2*half:])
		a := replicated.Record(cluster, op.ID, held[0], tr.Salts[0][:], op.Share[:half])
		b := replicated.Record(cluster, op.ID, held[1], tr.Salts[1][:], op.Share[half:2*half])
		own.Write(a[:])
		next.Write(b[:])
		recs.Write(tr.Record[:])
	}
	out := next.Sum(own.Sum(make([]byte, 0, checkSize)))
	if prep.Reshare != nil {
		return append(out, make([]byte, sha256.Size)...)
	}
	return recs.Sum(out)
}

// compareChecks names the pairs of holders whose digests of a share they
// both hold differ, and the recorder and holder whose record and digest of
// a share differ (a missing or malformed check counts as differing). With
// holder down down (a change held for it), what it would have compared is
// not: it opens the copy the operator sealed to it when it is back. In a
// reshare the records are unset and every digest of them must be zeros:
// a holder that sends another is named alone.
func compareChecks(p *Params, checks [][]byte, down int, reshare bool) []string {
	var named []string
	zero := make([]byte, sha256.Size)
	ok := func(c []byte) bool { return len(c) == checkSize }
	for j := range replicated.Holders {
		h := replicated.HoldersOf(j) // h[0] keeps s_j as its own share, h[1] as its next
		r := replicated.Recorder(j)
		a, b, c := checks[h[0]], checks[h[1]], checks[r]
		switch {
		case h[0] != down && h[1] != down && (!ok(a) || !ok(b) || !bytes.Equal(a[:sha256.Size], b[sha256.Size:2*sha256.Size])):
			named = append(named, pairLabel(p, h[0], h[1]))
		case r == down:
		case reshare:
			if !ok(c) || !bytes.Equal(c[2*sha256.Size:], zero) {
				named = append(named, p.Party(r).Name)
			}
		case h[0] != down && (!ok(a) || !ok(c) || !bytes.Equal(a[:sha256.Size], c[2*sha256.Size:])):
			named = append(named, pairLabel(p, r, h[0]))
		case h[0] == down && (!ok(b) || !ok(c) || !bytes.Equal(b[sha256.Size:2*sha256.Size], c[2*sha256.Size:])):
			named = append(named, pairLabel(p, r, h[1]))
		}
	}
	return named
}
