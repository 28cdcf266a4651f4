package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/idface/idface/internal/codec/rowmap"
)

// A sharded cluster (Literal.Shards = S > 1) runs every server of its
// members as a coordinator, at the member's address, and S shard servers,
// at Member.Shards. Shard s of every member holds the rows whose ids
// rowmap.ShardOf puts in shard s, and talks only to shard s of the
// others: the S shards are S clusters of one configuration, each a
// sub-cluster of its own rows. A coordinator holds no rows: it forwards
// an enrollment to the shard of its ids and fans an identify out to its
// shards, merging their answers (docs/DESIGN-NOTES.md "Shards").

// MaxShards bounds Literal.Shards.
const MaxShards = 64

// Coordinator is the shard index of a sharded member's coordinator (and,
// in an unsharded cluster, of every server but shard 0, which it is).
const Coordinator = -1

// Shards is the number of shard servers per member: 1 in an unsharded
// cluster.
func (p *Params) Shards() int { return max(p.lit.Shards, 1) }

// ShardOf is the shard that holds id's row: under the shard key where the
// cluster has one (ShardKeyed; only a Params that holds it, WithShardKey,
// can place ids then: CanPlace), else by the public cluster id.
func (p *Params) ShardOf(id string) int {
	if p.shardKey != nil {
		return rowmap.ShardOfKeyed(p.shardKey, id, p.Shards())
	}
	return rowmap.ShardOf(p.cluster, id, p.Shards())
}

// ShardKeyed reports whether the cluster places rows under a secret
// shard key (Literal.ShardKeyID).
func (p *Params) ShardKeyed() bool { return p.lit.ShardKeyID != "" }

// ShardKeyFile is the file, in a home, of the shard key of a cluster
// whose placement is keyed.
const ShardKeyFile = "shard.key"

// ShardKeyID is the public name of a shard key (Literal.ShardKeyID): it
// tells which key a cluster uses, and nothing of the key.
func ShardKeyID(key *[32]byte) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("idface shard key id"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// WithShardKey is p holding the cluster's shard key, so that it places
// ids (a row-holding server, an operator's client); a key that is not the
// one the configuration names is refused. A nil key gives p without one
// (a helper's view: it must not place ids).
func (p *Params) WithShardKey(key *[32]byte) (*Params, error) {
	q := *p
	q.shardKey = nil
	if key == nil {
		return &q, nil
	}
	switch id := ShardKeyID(key); {
	case !p.ShardKeyed():
		return nil, fmt.Errorf("a shard key was given, but this configuration places rows by its public cluster id (no shard_key_id): remove %s from the home, or assemble the configuration with the key (cluster assemble --shard-key)", ShardKeyFile)
	case id != p.lit.ShardKeyID:
		return nil, fmt.Errorf("the home's %s is key %s, but the configuration names shard key %s: copy the key the row-holding organisations agreed on (the one the configuration was assembled with)", ShardKeyFile, id, p.lit.ShardKeyID)
	}
	k := *key
	q.shardKey = &k
	return &q, nil
}

// CanPlace says whether p can place ids on shards: always in an unsharded
// cluster or one placed by its public cluster id; in a keyed one only
// with the key.
func (p *Params) CanPlace() error {
	if p.Shards() > 1 && p.ShardKeyed() && p.shardKey == nil {
		return fmt.Errorf("this cluster places rows under a secret shard key (shard_key_id %s), which this home does not hold: copy the cluster's %s into the home of this operator (row-holding servers and operators hold it; the decider and key server never do)", p.lit.ShardKeyID, ShardKeyFile)
	}
	return nil
}

// ShardName is how a server dials shard s of member name: "name#s"
// (member names never hold '#').
func ShardName(name string, s int) string { return name + "#" + strconv.Itoa(s) }

// MemberOf is the member a server name belongs to: "name" of "name#s",
// "name#c" and "name".
func MemberOf(server string) string {
	m, _, _ := strings.Cut(server, "#")
	return m
}

// SplitServer parses a server's name: its member, and its shard
// (Coordinator for "name" and "name#c").
func SplitServer(name string) (member string, shard int) {
	member, suffix, cut := strings.Cut(name, "#")
	if s, err := strconv.Atoi(suffix); cut && err == nil && s >= 0 && suffix == strconv.Itoa(s) {
		return member, s
	}
	return member, Coordinator
}

// CoordinatorName is how a shard dials its member's coordinator.
func CoordinatorName(name string) string { return name + "#c" }

// Resolve says which server a dial name means to a server at shard self
// (Coordinator for a coordinator, or any server of an unsharded cluster):
// "name#s" is member name's shard s and "name#c" its coordinator; a bare
// name is the member's server in the caller's own shard (the coordinator,
// for a coordinator, and the member itself when it has no shards), so
// that a shard runs its sub-cluster's protocols as an unsharded server
// does.
func (p *Params) Resolve(self int, name string) (m Member, shard int, ok bool) {
	shard = self
	if base, suffix, cut := strings.Cut(name, "#"); cut {
		name = base
		if suffix == "c" {
			shard = Coordinator
		} else {
			n, err := strconv.Atoi(suffix)
			if err != nil || n < 0 || n >= p.Shards() || suffix != strconv.Itoa(n) {
				return Member{}, 0, false
			}
			shard = n
		}
	}
	if m, ok = p.Server(name); !ok {
		return Member{}, 0, false
	}
	if len(m.Shards) == 0 {
		shard = Coordinator
	}
	return m, shard, true
}

// Directory is the address book of a server at shard self, for its
// dialer: the address and pins of each name as Resolve reads it.
func (p *Params) Directory(self int) func(name string) (addr string, pins []string, ok bool) {
	return func(name string) (string, []string, bool) {
		m, shard, ok := p.Resolve(self, name)
		if !ok {
			return "", nil, false
		}
		return m.ShardAddr(shard), m.Pins(), true
	}
}

// ShardAddr is the address of a server's shard s (Coordinator: its own).
func (m Member) ShardAddr(s int) string {
	if s == Coordinator || len(m.Shards) == 0 {
		return m.Addr
	}
	return m.Shards[s]
}

// checkShards checks a sharded cluster: a mode that shards, and every
// server with one address per shard, all distinct.
func (p *Params) checkShards() error {
	s := p.lit.Shards
	if s < 0 || s > MaxShards {
		return fmt.Errorf("shards = %d: want 1..%d (0 or 1: no shards)", s, MaxShards)
	}
	if id := p.lit.ShardKeyID; id != "" {
		if b, err := hex.DecodeString(id); err != nil || len(b) != 16 || id != strings.ToLower(id) {
			return fmt.Errorf("shard_key_id %q: want 32 lower-case hex digits (config.ShardKeyID of the shard key, as 'idface shard key' prints it)", id)
		}
	}
	for _, c := range p.lit.Clients {
		if len(c.Shards) != 0 {
			return fmt.Errorf("client %q lists shard addresses: only servers have shards", c.Name)
		}
	}
	if s <= 1 {
		for _, m := range p.Servers() {
			if len(m.Shards) != 0 {
				return fmt.Errorf("server %q lists shard addresses in a cluster without shards: drop them or set \"shards\"", m.Name)
			}
		}
		return nil
	}
	if !p.spec.Shards {
		return fmt.Errorf("mode %s does not run sharded parties (shards = %d)", p.lit.Mode, s)
	}
	seen := map[string]string{}
	for _, m := range p.Servers() {
		if len(m.Shards) != s {
			return fmt.Errorf("server %q has %d shard addresses for %d shards", m.Name, len(m.Shards), s)
		}
		for i, a := range append([]string{m.Addr}, m.Shards...) {
			if a == "" {
				return fmt.Errorf("server %q: shard %d has no address", m.Name, i-1)
			}
			if other, dup := seen[a]; dup {
				return fmt.Errorf("address %s is both %s's and %s's", a, other, m.Name)
			}
			seen[a] = m.Name
		}
	}
	return nil
}
