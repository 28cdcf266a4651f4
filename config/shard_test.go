package config_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/rowmap"
)

func TestSplitServer(t *testing.T) {
	for _, c := range []struct {
		name, member string
		shard        int
	}{
		{"p1", "p1", config.Coordinator}, {"p1#c", "p1", config.Coordinator}, {"p1#0", "p1", 0}, {"p1#12", "p1", 12},
		{"p1#-1", "p1", config.Coordinator}, {"p1#01", "p1", config.Coordinator}, {"p1#x", "p1", config.Coordinator},
	} {
		if m, s := config.SplitServer(c.name); m != c.member || s != c.shard {
			t.Errorf("SplitServer(%q) = %q, %d; want %q, %d", c.name, m, s, c.member, c.shard)
		}
	}
}

// TestShardKeyPlacement: a configuration with shard_key_id is version 3
// (an earlier build refuses it rather than place rows by the public
// hash); only a Params holding the key it names places ids, and it places
// them otherwise than the public placement; an upper-case id is refused.
func TestShardKeyPlacement(t *testing.T) {
	key, other := [32]byte{1}, [32]byte{2}
	lit := twoParty(t)
	lit.Shards = 4
	for i := range lit.Parties {
		for s := range 4 {
			lit.Parties[i].Shards = append(lit.Parties[i].Shards, fmt.Sprintf("127.0.0.1:%d", 100*(i+1)+s))
		}
	}
	public, err := config.New(lit, "")
	if err != nil {
		t.Fatal(err)
	}
	lit.ShardKeyID = config.ShardKeyID(&key)
	lit.Version = 2
	if _, err := config.New(lit, ""); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("shard_key_id in version 2: %v", err)
	}
	lit.Version = 0
	path := filepath.Join(t.TempDir(), config.File)
	if err := config.SaveFile(path, lit); err != nil {
		t.Fatal(err)
	}
	p, err := config.LoadFile(path)
	if err != nil || p.Literal().Version != 3 || !p.ShardKeyed() {
		t.Fatalf("saved and loaded: %v, %+v", err, p)
	}
	if err := p.CanPlace(); err == nil {
		t.Fatal("a Params without the key can place ids")
	}
	if _, err := p.WithShardKey(&other); err == nil {
		t.Fatal("another key was taken")
	}
	keyed, err := p.WithShardKey(&key)
	if err != nil || keyed.CanPlace() != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range 100 {
		id := fmt.Sprint("id-", i)
		if keyed.ShardOf(id) != rowmap.ShardOfKeyed(&key, id, 4) {
			t.Fatal("the keyed placement is not rowmap.ShardOfKeyed")
		}
		if keyed.ShardOf(id) != public.ShardOf(id) {
			differ++
		}
	}
	if differ < 50 {
		t.Fatalf("only %d of 100 ids placed otherwise than by the public hash", differ)
	}
	lit.ShardKeyID = strings.ToUpper(lit.ShardKeyID)
	if _, err := config.New(lit, ""); err == nil {
		t.Fatal("an upper-case shard_key_id was taken")
	}
}
