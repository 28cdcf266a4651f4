package rowmap

import (
	"fmt"
	"slices"
	"testing"
)

type liveRow struct {
	seg, seq int
	id       string
}

// digestOf is the set hash a server keeps for rows, toggled in the given
// order.
func digestOf(cluster [16]byte, rows []liveRow) Hash {
	var h Hash
	for _, r := range rows {
		h.Toggle(RowHash(cluster, r.seg, r.seq, r.id))
	}
	return h
}

// TestDigestBindsTheCluster (audit: "row-map digest has no cluster
// identity"): two row maps with the same rows at the same places have the
// same digest in one cluster and different digests in two clusters, so
// servers of different clusters never take each other's rows for theirs.
func TestDigestBindsTheCluster(t *testing.T) {
	var rows []liveRow
	for i := range 40 {
		rows = append(rows, liveRow{seg: i % 3, seq: i / 3, id: fmt.Sprintf("id-%d", i)})
	}
	reversed := make([]liveRow, len(rows))
	for i, r := range rows {
		reversed[len(rows)-1-i] = r
	}
	a, b := [16]byte{1, 2, 3}, [16]byte{1, 2, 4}
	if digestOf(a, rows) != digestOf(a, reversed) {
		t.Fatal("the same rows in one cluster give different digests")
	}
	for i := range a { // any byte of the cluster id counts
		c := a
		c[i] ^= 0x80
		if digestOf(a, rows) == digestOf(c, rows) {
			t.Fatalf("clusters differing in byte %d give the same digest", i)
		}
	}
	if digestOf(a, rows) == digestOf(b, rows) {
		t.Fatal("two clusters with the same rows give the same digest")
	}
	// A single row too (the smallest row map that can be compared).
	one := rows[:1]
	if digestOf(a, one) == digestOf(b, one) || digestOf(a, one) != digestOf(a, slices.Clone(one)) {
		t.Fatal("one row: the digest does not follow the cluster id")
	}
	// Row hashes themselves differ across clusters, not only their XOR.
	for _, r := range rows {
		if RowHash(a, r.seg, r.seq, r.id) == RowHash(b, r.seg, r.seq, r.id) {
			t.Fatalf("row %+v hashes alike in two clusters", r)
		}
	}
}

// TestDigestFollowsTheRows: the place and the id of a row count, and
// removing a row undoes its toggle.
func TestDigestFollowsTheRows(t *testing.T) {
	cl := [16]byte{9}
	base := []liveRow{{0, 0, "a"}, {0, 1, "b"}, {1, 0, "c"}}
	h := digestOf(cl, base)
	for name, changed := range map[string][]liveRow{
		"segment":  {{0, 0, "a"}, {0, 1, "b"}, {2, 0, "c"}},
		"sequence": {{0, 0, "a"}, {0, 2, "b"}, {1, 0, "c"}},
		"id":       {{0, 0, "a"}, {0, 1, "bb"}, {1, 0, "c"}},
		"swapped":  {{0, 0, "b"}, {0, 1, "a"}, {1, 0, "c"}},
		"missing":  {{0, 0, "a"}, {0, 1, "b"}},
	} {
		if digestOf(cl, changed) == h {
			t.Errorf("%s: the digest did not change", name)
		}
	}
	g := h
	g.Toggle(RowHash(cl, 1, 1, "d"))
	g.Toggle(RowHash(cl, 1, 1, "d"))
	if g != h {
		t.Fatal("adding and removing a row changed the digest")
	}
}

// TestShardHashesCombine (issue 16 item 6): the hashes of the live rows
// of each shard (ShardOf), each computed on its own as a shard would,
// combine into the hash of all of them, whatever the number of shards; a
// row counted twice or left out changes the result.
func TestShardHashesCombine(t *testing.T) {
	cluster := [16]byte{9}
	var rows []liveRow
	for i := range 100 {
		rows = append(rows, liveRow{seg: i % 3, seq: i / 3, id: fmt.Sprintf("id-%d", i)})
	}
	whole := digestOf(cluster, rows)
	for _, shards := range []int{1, 2, 3, 7, 100} {
		parts := make([][]liveRow, shards)
		for _, row := range rows {
			s := ShardOf(cluster, row.id, shards)
			parts[s] = append(parts[s], row)
		}
		var hs []Hash
		for _, in := range parts {
			hs = append(hs, digestOf(cluster, in))
		}
		if got := Combine(hs...); got != whole {
			t.Fatalf("%d shards: combined %x, whole %x", shards, got, whole)
		}
	}
	if Combine(digestOf(cluster, rows[:60]), digestOf(cluster, rows[50:])) == whole {
		t.Fatal("overlapping parts combine to the whole")
	}
	if Combine(digestOf(cluster, rows[:50]), digestOf(cluster, rows[51:])) == whole {
		t.Fatal("a missing row is not seen")
	}
}
