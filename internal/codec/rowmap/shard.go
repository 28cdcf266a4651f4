package rowmap

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
)

// ShardOf is the shard, in [0, shards), that holds the row with this id
// in a cluster whose parties are split into shards: the same at every
// party and every coordinator, from the cluster id and the row's id alone,
// so every operation on an id (enroll, delete, a transaction) touches one
// shard, and shard s of each party holds the same rows. It is Lamping and
// Veach's jump consistent hash (arXiv:1406.2294) of SHA-256(cluster, id):
// balanced, and going from S to S+1 shards moves only the rows that land
// on the new shard, about 1/(S+1) of them (a rebalance moves no other).
// shards < 1 is read as 1.
func ShardOf(cluster [16]byte, id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := sha256.New()
	h.Write([]byte("idface shard\x00"))
	h.Write(cluster[:])
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	return jump(binary.BigEndian.Uint64(h.Sum(sum[:0])), shards)
}

// ShardOfKeyed is ShardOf in a cluster whose placement is secret: the
// jump consistent hash of HMAC-SHA256(key, id), key being the cluster's
// shard key (config: shard_key_id), which the row-holding members and
// the operators hold and the decider or key server does not. Without it
// the shard an id lives in is a pseudorandom function of the id, so a
// helper that sees which shard matched learns nothing of which ids that
// shard holds.
func ShardOfKeyed(key *[32]byte, id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("idface shard\x00"))
	m.Write([]byte(id))
	var sum [sha256.Size]byte
	return jump(binary.BigEndian.Uint64(m.Sum(sum[:0])), shards)
}

// jump is Lamping and Veach's jump consistent hash of key into shards.
func jump(key uint64, shards int) int {
	b, j := int64(-1), int64(0)
	for j < int64(shards) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64(key>>33+1)))
	}
	return int(b)
}
