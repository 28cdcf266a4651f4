package rowmap

import (
	"fmt"
	"testing"
)

// TestShardOf: shards are in range and balanced; growing from S to S+1
// shards moves only rows onto the new shard, about 1/(S+1) of them; and
// the mapping is pinned (every party and every release must agree on
// it: a change would put rows on the wrong shard).
func TestShardOf(t *testing.T) {
	cluster := [16]byte{1, 2, 3}
	const n = 100000
	for _, s := range []int{1, 2, 3, 4, 7, 16} {
		count := make([]int, s)
		moved := 0
		for i := range n {
			id := fmt.Sprintf("person-%d", i)
			a := ShardOf(cluster, id, s)
			if a < 0 || a >= s {
				t.Fatalf("%s: shard %d of %d", id, a, s)
			}
			count[a]++
			if b := ShardOf(cluster, id, s+1); b != a {
				if b != s {
					t.Fatalf("%s moved from shard %d to %d going to %d shards: only to the new one", id, a, b, s+1)
				}
				moved++
			}
		}
		for k, c := range count {
			if want := n / s; c < want*95/100 || c > want*105/100 {
				t.Errorf("%d shards: shard %d holds %d rows, want about %d", s, k, c, want)
			}
		}
		if want := n / (s + 1); moved < want*95/100 || moved > want*105/100 {
			t.Errorf("%d -> %d shards moved %d rows, want about %d", s, s+1, moved, want)
		}
	}
	if ShardOf(cluster, "x", 0) != 0 || ShardOf(cluster, "x", 1) != 0 {
		t.Fatal("fewer than two shards: not shard 0")
	}
	other := [16]byte{9}
	same := 0
	for i := range 1000 {
		id := fmt.Sprint(i)
		if ShardOf(cluster, id, 8) == ShardOf(other, id, 8) {
			same++
		}
	}
	if same > 200 { // 125 expected
		t.Errorf("two clusters place %d of 1000 ids alike: the cluster id does not key the mapping", same)
	}
	var got []int
	for _, id := range []string{"alice", "bob", "carol", "dave", "erin", "frank"} {
		got = append(got, ShardOf(cluster, id, 10))
	}
	if want := fmt.Sprint(pinnedShards); fmt.Sprint(got) != want {
		t.Fatalf("ShardOf of the pinned ids over 10 shards is %v, pinned %s: the mapping changed", got, want)
	}
}

// pinnedShards is ShardOf({1, 2, 3}, id, 10) for alice..frank, computed
// apart from this code (Python's hashlib and the paper's jump loop).
var pinnedShards = []int{4, 6, 2, 4, 9, 7}

// TestShardOfKeyed: the keyed placement is in range, balanced, moves only
// rows onto a new shard, differs under another key (and from the public
// placement), and is pinned by values computed apart from this code
// (Python's hmac and the same jump loop).
func TestShardOfKeyed(t *testing.T) {
	key := [32]byte{7, 7, 7}
	const n = 100000
	for _, s := range []int{2, 3, 8} {
		count := make([]int, s)
		for i := range n {
			id := fmt.Sprintf("person-%d", i)
			a := ShardOfKeyed(&key, id, s)
			count[a]++
			if b := ShardOfKeyed(&key, id, s+1); b != a && b != s {
				t.Fatalf("%s moved from shard %d to %d going to %d shards", id, a, b, s+1)
			}
		}
		for k, c := range count {
			if want := n / s; c < want*95/100 || c > want*105/100 {
				t.Errorf("%d shards: shard %d holds %d rows, want about %d", s, k, c, want)
			}
		}
	}
	other, sameKey, samePublic := [32]byte{8}, 0, 0
	for i := range 1000 {
		id := fmt.Sprint(i)
		a := ShardOfKeyed(&key, id, 8)
		if a == ShardOfKeyed(&other, id, 8) {
			sameKey++
		}
		if a == ShardOf([16]byte{7, 7, 7}, id, 8) {
			samePublic++
		}
	}
	if sameKey > 200 || samePublic > 200 { // 125 expected
		t.Errorf("%d of 1000 ids placed alike under another key, %d as by the public placement", sameKey, samePublic)
	}
	var got []int
	for _, id := range []string{"alice", "bob", "carol", "dave", "erin", "frank"} {
		got = append(got, ShardOfKeyed(&key, id, 10))
	}
	if fmt.Sprint(got) != "[1 8 9 9 2 9]" {
		t.Fatalf("ShardOfKeyed of the pinned ids over 10 shards is %v, pinned [1 8 9 9 2 9]: the mapping changed", got)
	}
}
