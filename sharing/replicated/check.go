package replicated

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/idface/idface/sharing/additive"
)

// The checks of a replicated query (docs/REPLICATED-NOTES.md): the decider
// compares the full vector of share j from one of its holders with the
// digest of the same bytes from the other, and the entry checks each value
// the decider answers with against a one-time MAC whose key only the two
// helpers and the entry know.

// VectorDigest is the digest of the permuted, masked share-score vector
// of share j of query qid (its raw little-endian bytes): SHA-256 bound to
// the query, the share index, the ring and the length.
func VectorDigest(qid [16]byte, j, bits int, vec []byte) [32]byte {
	return digest("idface/repl/vector", qid, j, bits, vec)
}

func digest(label string, qid [16]byte, j, bits int, b []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(label))
	var hdr [16 + 1 + 1 + 8]byte
	copy(hdr[:], qid[:])
	hdr[16], hdr[17] = byte(j), byte(bits)
	binary.BigEndian.PutUint64(hdr[18:], uint64(len(b)))
	h.Write(hdr[:])
	h.Write(b)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// TagKey is a query's MAC key: HMAC-SHA256 of the query id under the key
// the two helpers share, so neither the entry (until they tell it) nor the
// decider (ever) knows it.
func TagKey(pair *[32]byte, qid [16]byte) [32]byte { return ShardTagKey(pair, qid, -1) }

// ShardTagKey is TagKey for shard s of a sharded cluster (s < 0: an
// unsharded one). Every shard of one identify runs under the coordinator's
// query id, and the decider sees all its shards' tags: under one key, two
// shards' (value, tag) pairs at one position would give it the MAC's
// coefficients, and with them a forged tag for any value. So each shard's
// key is its own.
func ShardTagKey(pair *[32]byte, qid [16]byte, s int) [32]byte {
	m := hmac.New(sha256.New, pair[:])
	if s >= 0 {
		m.Write([]byte("idface/repl/shard tag key"))
		m.Write([]byte{byte(s), byte(s >> 8)})
	} else {
		m.Write([]byte("idface/repl/tag key"))
	}
	m.Write(qid[:])
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// TagPrime is the MAC's modulus, the largest prime below 2^32. Values (at
// most 16 bits) differ mod TagPrime whenever they differ.
const TagPrime = 1<<32 - 5

// labelTag is the tag keystream's counter-block label.
const labelTag = 'T'

// Tags writes the tag of every position p of vec into dst (len(vec) * 4
// bytes, little-endian): t_p = a_p * vec[p] + b_p mod TagPrime with
// (a_p, b_p) from the AES-256-CTR keystream of key at byte 8p, a_p != 0. A
// one-time MAC per position: whoever does not know the key forges the tag
// of another value with probability at most about 2^-32.
func Tags[E additive.Elem](dst []byte, vec []E, key *[32]byte) error {
	if len(dst) != 4*len(vec) {
		return fmt.Errorf("replicated: %d bytes for the tags of %d values", len(dst), len(vec))
	}
	ks, err := tagStream(key, 0)
	if err != nil {
		return err
	}
	var buf [8 * 512]byte
	for lo := 0; lo < len(vec); lo += 512 {
		hi := min(lo+512, len(vec))
		b := buf[:8*(hi-lo)]
		clear(b)
		ks.XORKeyStream(b, b)
		for p := lo; p < hi; p++ {
			k := b[8*(p-lo):]
			binary.LittleEndian.PutUint32(dst[4*p:], mac(k, uint64(vec[p])))
		}
	}
	return nil
}

// Tag is the tag of value v at position p (the entry's check of one
// answered position).
func Tag(key *[32]byte, p int, v uint64) (uint32, error) {
	ks, err := tagStream(key, uint64(p))
	if err != nil {
		return 0, err
	}
	var k [8]byte
	ks.XORKeyStream(k[:], k[:])
	return mac(k[:], v), nil
}

// tagStream is the keystream positioned at position p's 8 bytes (two per
// AES block).
func tagStream(key *[32]byte, p uint64) (cipher.Stream, error) {
	b, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, fmt.Errorf("replicated: %w", err)
	}
	var iv [16]byte
	iv[0] = labelTag
	binary.BigEndian.PutUint64(iv[8:], p/2)
	s := cipher.NewCTR(b, iv[:])
	if p%2 == 1 {
		var skip [8]byte
		s.XORKeyStream(skip[:], skip[:])
	}
	return s, nil
}

func mac(k []byte, v uint64) uint32 {
	a := uint64(binary.LittleEndian.Uint32(k)) % TagPrime
	if a == 0 {
		a = 1
	}
	b := uint64(binary.LittleEndian.Uint32(k[4:])) % TagPrime
	return uint32((a*v + b) % TagPrime)
}
