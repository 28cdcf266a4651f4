// Package replicated is 2-of-3 replicated additive sharing over Z_(2^k)
// (docs/REPLICATED-NOTES.md "Shares"): v = s_0 + s_1 + s_2 with s_0, s_1 uniform, and holder
// P_i keeps the pair (s_i, s_(i+1)) (indices mod 3). Any one holder's pair
// is uniform; any two holders' pairs give all three shares back.
//
// Indices are 0-based: holders 0..2 hold shares s_0..s_2.
//
// # Security model
//
// One holder may be corrupted (passively, or actively where the engines
// check each share twice): its pair is independent of v. Two holders
// together hold v. The share hash binds a share to its cluster, row and
// index so that the two holders of a share can compare it without sending
// it. The zero-sharing for a reshare is known to every holder (any holder
// knows two of its three terms, hence the third): it protects old and new
// epochs against a thief of data, not of the reshare key.
package replicated

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/idface/idface/sharing/additive"
)

// Holders is the number of share holders (and of shares).
const Holders = 3

// Held returns the two share indices holder i keeps: (i, i+1 mod 3).
func Held(i int) [2]int { return [2]int{i % Holders, (i + 1) % Holders} }

// HoldersOf returns the two holders of share j: (j, j-1 mod 3). The first
// keeps s_j as its own (first) share, the second as its next one.
func HoldersOf(j int) [2]int { return [2]int{j % Holders, (j + Holders - 1) % Holders} }

// Split writes the three shares of v into dst: dst[0], dst[1] uniform from
// rnd (crypto/rand when nil, or a CSPRNG stream keyed from it, never
// math/rand), dst[2] = v - dst[0] - dst[1] mod 2^k. Each dst[j] has len(v)
// entries; nothing is allocated.
func Split[E additive.Elem](dst *[Holders][]E, v []int8, rnd io.Reader) error {
	return additive.GenShare(dst[:], v, rnd)
}

// Pair returns holder i's pair (s_i, s_(i+1)) of the three shares.
func Pair[E additive.Elem](shares *[Holders][]E, i int) [2][]E {
	h := Held(i)
	return [2][]E{shares[h[0]], shares[h[1]]}
}

// Shares recovers all three shares from the pairs of two distinct holders
// a and b. The two pairs overlap in one share, which must agree: a
// mismatch means one of the pairs is damaged or forged (named in the
// error), and nothing is returned.
func Shares[E additive.Elem](a int, pa [2][]E, b int, pb [2][]E) ([Holders][]E, error) {
	var out [Holders][]E
	if a < 0 || b < 0 || a >= Holders || b >= Holders || a == b {
		return out, fmt.Errorf("replicated: pairs of holders %d and %d; want two distinct holders of 0..2", a, b)
	}
	d := len(pa[0])
	for _, s := range [][]E{pa[0], pa[1], pb[0], pb[1]} {
		if len(s) != d {
			return out, fmt.Errorf("replicated: shares of %d and %d entries", len(s), d)
		}
	}
	for k, j := range Held(a) {
		out[j] = pa[k]
	}
	for k, j := range Held(b) {
		if out[j] != nil && !equal(out[j], pb[k]) {
			return out, fmt.Errorf("replicated: holders %d and %d disagree on share %d", a, b, j)
		}
		out[j] = pb[k]
	}
	return out, nil
}

func equal[E additive.Elem](x, y []E) bool {
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

// Reconstruct writes v (signed) from the pairs of two distinct holders.
func Reconstruct[E additive.Elem](dst []int, a int, pa [2][]E, b int, pb [2][]E) error {
	s, err := Shares(a, pa, b, pb)
	if err != nil {
		return err
	}
	return additive.Combine(dst, s[0], s[1], s[2])
}

// Rebuild makes holder i's pair again from its neighbours' pairs: s_i is
// the next share of holder i-1, s_(i+1) the own share of holder i+1
// (docs/REPLICATED-NOTES.md "Rebuild").
func Rebuild[E additive.Elem](i int, prev, next [2][]E) [2][]E {
	return [2][]E{prev[1], next[0]}
}

// ShareHash binds share j of row (origin, seq) of a cluster to its bytes:
// the two holders of a share compare it before voting on an enrollment,
// without sending the share itself.
func ShareHash(cluster [16]byte, origin, seq uint32, j int, share []byte) [32]byte {
	h := sha256.New()
	var hdr [12 + 16 + 4 + 4 + 1]byte
	copy(hdr[:], "idface/repl/")
	copy(hdr[12:], cluster[:])
	binary.BigEndian.PutUint32(hdr[28:], origin)
	binary.BigEndian.PutUint32(hdr[32:], seq)
	hdr[36] = byte(j)
	h.Write(hdr[:])
	h.Write(share)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// ReshareKey is the 32-byte key of one reshare epoch's zero-sharings,
// known to the three holders.
type ReshareKey [32]byte

// labelZero keeps the zero-sharing's keystream apart from every other use
// of a 32-byte key as an AES key in this code (additive's labels are other
// letters).
const labelZero = 'Z'

// ZeroShare writes r_j of the zero-sharing of row (epoch, row) into dst:
// r_0 and r_1 are AES-256-CTR keystreams under key, with the counter block
// 'Z' | j | epoch | row | counter, and r_2 = -(r_0 + r_1), so that
// r_0 + r_1 + r_2 = 0 mod 2^k. Adding r_j to s_j at both its holders
// reshares a row without changing v; shares of two epochs never combine.
// Deterministic: the two holders of s_j compute the same r_j.
func ZeroShare[E additive.Elem](dst []E, j int, key *ReshareKey, epoch uint32, row uint64) error {
	if j < 0 || j >= Holders {
		return fmt.Errorf("replicated: share index %d, want 0..2", j)
	}
	if len(dst)*additive.RingOf[E]().Bits/8 > 1<<20 {
		return fmt.Errorf("replicated: a zero-sharing of %d entries is longer than a row", len(dst))
	}
	if j < 2 {
		return zeroStream(dst, j, key, epoch, row)
	}
	tmp := make([]E, len(dst))
	if err := zeroStream(dst, 0, key, epoch, row); err != nil {
		return err
	}
	if err := zeroStream(tmp, 1, key, epoch, row); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = -(dst[i] + tmp[i])
	}
	return nil
}

func zeroStream[E additive.Elem](dst []E, j int, key *ReshareKey, epoch uint32, row uint64) error {
	b, err := aes.NewCipher(key[:])
	if err != nil {
		return fmt.Errorf("replicated: %w", err)
	}
	// 'Z' | j | epoch (4) | row (8) | 2-byte block counter: rows are at
	// most 1 MiB here (2^16 blocks), so streams of two rows never overlap.
	var iv [16]byte
	iv[0], iv[1] = labelZero, byte(j)
	binary.BigEndian.PutUint32(iv[2:], epoch)
	binary.BigEndian.PutUint64(iv[6:], row)
	out := additive.ElemBytes(dst)
	clear(out)
	cipher.NewCTR(b, iv[:]).XORKeyStream(out, out)
	return nil
}

// ProductCoefficients returns the coefficients of holder i's share of a
// product <x, y> of two replicated-shared vectors, from its pair of y's
// shares (y_i, y_(i+1)): z_i = <x_i, y_i + y_(i+1)> + <x_(i+1), y_i>. The
// three z_i are an additive sharing of <x, y>: together they hold each of
// the nine terms <x_a, y_b> once. The diagonal terms are computable by two
// holders; the cross terms <x_i, y_(i+1)> and <x_(i+1), y_i> by holder i
// alone, so no other holder can check them.
func ProductCoefficients[E additive.Elem](y [2][]E) (own, next []E) {
	own = make([]E, len(y[0]))
	for j := range own {
		own[j] = y[0][j] + y[1][j]
	}
	return own, y[0]
}
