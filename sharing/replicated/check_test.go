package replicated

import (
	"crypto/rand"
	"encoding/binary"
	"testing"
)

// TestTags: the bulk tags equal the per-position ones (the entry's check),
// and a different value, position or key gives another tag.
func TestTags(t *testing.T) {
	var key, other [32]byte
	rand.Read(key[:])
	rand.Read(other[:])
	vec := make([]uint16, 1500)
	for i := range vec {
		vec[i] = uint16(i * 37)
	}
	tags := make([]byte, 4*len(vec))
	if err := Tags(tags, vec, &key); err != nil {
		t.Fatal(err)
	}
	same := 0
	for _, p := range []int{0, 1, 2, 511, 512, 513, 1499} {
		want := binary.LittleEndian.Uint32(tags[4*p:])
		got, err := Tag(&key, p, uint64(vec[p]))
		if err != nil || got != want {
			t.Fatalf("position %d: tag %d, bulk %d (%v)", p, got, want, err)
		}
		for _, alt := range []struct {
			key *[32]byte
			p   int
			v   uint64
		}{{&key, p, uint64(vec[p]) + 1}, {&key, p, uint64(vec[p]) ^ 0x8000}, {&other, p, uint64(vec[p])}, {&key, (p + 1) % len(vec), uint64(vec[p])}} {
			if g, _ := Tag(alt.key, alt.p, alt.v); g == want {
				same++
			}
		}
	}
	if same > 0 { // probability about 28 * 2^-32 on a correct MAC
		t.Fatalf("%d altered values or keys gave the same tag", same)
	}
	if err := Tags(tags[:8], vec, &key); err == nil {
		t.Fatal("a short tag buffer was accepted")
	}
}

func TestDigestsBind(t *testing.T) {
	v := []byte{1, 2, 3}
	base := VectorDigest([16]byte{1}, 0, 8, v)
	for name, d := range map[string][32]byte{
		"query": VectorDigest([16]byte{2}, 0, 8, v),
		"share": VectorDigest([16]byte{1}, 1, 8, v),
		"ring":  VectorDigest([16]byte{1}, 0, 16, v),
		"bytes": VectorDigest([16]byte{1}, 0, 8, []byte{1, 2, 4}),
		"len":   VectorDigest([16]byte{1}, 0, 8, v[:2]),
	} {
		if d == base {
			t.Fatalf("the vector digest ignores the %s", name)
		}
	}
	k1, k2 := TagKey(&[32]byte{1}, [16]byte{1}), TagKey(&[32]byte{1}, [16]byte{2})
	if k1 == k2 || k1 == TagKey(&[32]byte{2}, [16]byte{1}) {
		t.Fatal("the tag key ignores the query or the pair key")
	}
	// Shards of one query, under one query id, each have their own key.
	s0, s1 := ShardTagKey(&[32]byte{1}, [16]byte{1}, 0), ShardTagKey(&[32]byte{1}, [16]byte{1}, 1)
	if s0 == s1 || s0 == k1 || s1 == k1 || ShardTagKey(&[32]byte{1}, [16]byte{1}, -1) != k1 {
		t.Fatal("shards of one query share a tag key, or the unsharded key changed")
	}
}
