package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
)

// TestPlacementKey: a new sharded configuration needs the shard key (its
// file or its id); a carried-over one keeps its key; one placed by the
// public hash takes a key only with a new shard count (the same count
// would leave its rows where the key does not place them: a review
// found it accepted); a key file and an id that disagree are refused.
func TestPlacementKey(t *testing.T) {
	key := [32]byte{9}
	file := filepath.Join(t.TempDir(), "shard.key")
	if err := home.WriteShardKey(file, &key); err != nil {
		t.Fatal(err)
	}
	id := config.ShardKeyID(&key)
	for _, c := range []struct {
		name       string
		lit        config.Literal
		file, id   string
		carried    bool
		prevShards int
		want       string // "" for success
		wantID     string
	}{
		{"new, no key", config.Literal{Shards: 3}, "", "", false, 3, "needs the cluster's shard key", ""},
		{"new, key file", config.Literal{Shards: 3}, file, "", false, 3, "", id},
		{"new, key id", config.Literal{Shards: 3}, "", strings.ToUpper(id), false, 3, "", id},
		{"new, file and another id", config.Literal{Shards: 3}, file, strings.Repeat("0", 32), false, 3, "says", ""},
		{"unsharded with a key", config.Literal{}, file, "", false, 0, "without --shards", ""},
		{"unsharded", config.Literal{}, "", "", false, 0, "", ""},
		{"carried keyed", config.Literal{Shards: 3, ShardKeyID: id}, "", "", true, 3, "", id},
		{"carried keyed, another key", config.Literal{Shards: 4, ShardKeyID: strings.Repeat("1", 32)}, file, "", true, 3, "keeps its shard key", ""},
		{"carried public, same count", config.Literal{Shards: 3}, file, "", true, 3, "only with a new shard count", ""},
		{"carried public, same count, no key", config.Literal{Shards: 3}, "", "", true, 3, "", ""},
		{"carried public, new count", config.Literal{Shards: 4}, file, "", true, 3, "", id},
		{"carried public, new count, no key", config.Literal{Shards: 4}, "", "", true, 3, "needs the cluster's shard key", ""},
	} {
		lit := c.lit
		err := placementKey(&lit, c.file, c.id, c.carried, c.prevShards)
		switch {
		case c.want == "" && err != nil, c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		case c.want == "" && lit.ShardKeyID != c.wantID:
			t.Errorf("%s: shard_key_id %q, want %q", c.name, lit.ShardKeyID, c.wantID)
		}
	}
}
