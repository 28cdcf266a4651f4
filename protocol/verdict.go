package protocol

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"errors"
)

// The verdict of a hidden probe, sealed to the device (issue 44 item 3).
//
// The device puts a fresh verdict key K = c_0 xor c_1 xor c_2 in its
// probe as three components, replicated like the query shares: holder k's
// sealed part carries (c_k, c_(k+1)), so no holder, the entry included,
// holds all three. Each holder sends the decider its two components
// (ReplShare.VerdictKeys); the decider compares each with the other
// holder's copy, as it does the query shares, and seals one byte under K:
// answered, or refused because a check failed. The entry forwards the
// sealed byte (IdentifyOK.Verdicts) with the answer it would have got had
// every check passed (modes/replicated decideHidden), so a checker at the
// entry cannot tell its own check's outcome from the answer, and the
// device still learns that its probe was refused.

// VerdictKeySize is the bytes of one component of a verdict key.
const VerdictKeySize = 32

// VerdictSize is the bytes of a sealed verdict: one byte and its
// AES-GCM tag.
const VerdictSize = 1 + 16

// The sealed byte.
const (
	verdictAnswered = 1
	verdictRefused  = 2
)

// MaxVerdicts bounds the verdicts of one answer: one per shard.
const MaxVerdicts = 256

// ErrVerdict is a verdict that is missing, does not open under the
// device's key, or holds neither answer.
var ErrVerdict = errors.New("the decider's verdict on this hidden probe is missing or does not open under the probe's key (the entry, or a share holder that altered its part of the key, kept it from the device)")

// VerdictKey is the key the three components make, for cluster.
func VerdictKey(cluster [16]byte, c [3][VerdictKeySize]byte) [32]byte {
	var x [VerdictKeySize]byte
	for i := range x {
		x[i] = c[0][i] ^ c[1][i] ^ c[2][i]
	}
	h := sha256.New()
	h.Write([]byte("idface hidden-probe verdict v1\x00"))
	h.Write(cluster[:])
	h.Write(x[:])
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// verdictAEAD is AES-256-GCM under key. Each key seals one verdict per
// shard (the key is fresh per probe), so the nonce is the shard's index.
func verdictAEAD(key [32]byte) cipher.AEAD {
	b, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return a
}

func verdictNonce(shard int) []byte {
	var n [12]byte
	n[0], n[1] = byte(shard>>8), byte(shard)
	return n[:]
}

// SealVerdict seals the decider's verdict on one probe under its key: the
// decider of shard shard (0 outside shards).
func SealVerdict(key [32]byte, shard int, refused bool) []byte {
	v := byte(verdictAnswered)
	if refused {
		v = verdictRefused
	}
	return verdictAEAD(key).Seal(nil, verdictNonce(shard), []byte{v}, []byte("idface verdict"))
}

// OpenVerdict opens shard's sealed verdict: refused, or ErrVerdict.
func OpenVerdict(key [32]byte, shard int, sealed []byte) (refused bool, err error) {
	if len(sealed) != VerdictSize {
		return false, ErrVerdict
	}
	pt, err := verdictAEAD(key).Open(nil, verdictNonce(shard), sealed, []byte("idface verdict"))
	switch {
	case err != nil || len(pt) != 1:
		return false, ErrVerdict
	case pt[0] == verdictAnswered:
		return false, nil
	case pt[0] == verdictRefused:
		return true, nil
	}
	return false, ErrVerdict
}

// RefusedHidden is what a device is told of a hidden probe whose checks
// failed, whichever failed.
const RefusedHidden = "a check of this hidden probe failed (the holders' query shares, or a holder's product share): the query is refused, nothing was answered. One of the share holders is faulty or compromised; the decider's log and its metric idface_repl_refusals_total name them"

// RefusedByVerdict marks e as the device's own refusal of a hidden probe
// by its verdict (client.CheckVerdicts), so that IsRefusedHidden knows it.
// Only the device makes one: an error decoded from the wire is a plain
// *Error, whatever its text.
func RefusedByVerdict(e *Error) error { return refusedByVerdict{e} }

type refusedByVerdict struct{ e *Error }

func (r refusedByVerdict) Error() string { return r.e.Error() }
func (r refusedByVerdict) Unwrap() error { return r.e }

// IsRefusedHidden reports whether err is the device's refusal of a hidden
// probe by its verdict (RefusedByVerdict): refused by a failed check, or a
// verdict missing or that does not open.
func IsRefusedHidden(err error) bool {
	var r refusedByVerdict
	return errors.As(err, &r)
}
