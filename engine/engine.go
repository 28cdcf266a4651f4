// Package engine is the mode registry (mode.go: each mode's package
// declares its members, how its servers open their engines and data, and
// what fsck, bench and commcost need) and the contract between the server
// runtime (package server) and the protocol engines (modes/mpcface for
// 2PCFace and (mu,nu)-MPCFace, modes/blind for blind mode,
// modes/replicated for replicated mode and its hidden probes,
// modes/hemode for IDFace): an engine
// declares which message types it answers and who may send them, and does
// its side effects through small interfaces, the network (network.Dialer)
// and its log (Log), so that it holds no socket and opens no file. The
// runtime does the rest: identity, limits, timeouts, metrics, shutdown.
//
// It also holds what every engine needs: the outbox of undelivered
// decisions, parallel broadcast, the batch transform, one answer path for
// identify (answer.go), the size bounds of every message (bounds.go), and
// the batching of concurrent identifies (batch.go).
package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
)

// Request is one decoded request from an authenticated peer.
type Request struct {
	From network.Peer
	Msg  protocol.Msg
	// Stream is the request's stream, for answers that stream bulk data.
	Stream *network.Stream
}

// Handler answers a request: it returns the reply, or nil when it has
// written its answer to r.Stream itself.
type Handler func(ctx context.Context, r Request) protocol.Msg

// Roles is a set of network roles.
type Roles uint8

// Allow makes a set of roles.
func Allow(roles ...network.Role) Roles {
	var s Roles
	for _, r := range roles {
		s |= 1 << r
	}
	return s
}

// Has reports whether r is in the set.
func (s Roles) Has(r network.Role) bool { return s&(1<<r) != 0 }

// Common role sets.
var (
	Parties   = Allow(network.RoleParty)
	Operators = Allow(network.RoleParty, network.RoleOperator) // parties forward
	Clients   = Allow(network.RoleOperator, network.RoleDevice)
	Anyone    = Allow(network.RoleParty, network.RoleHelper, network.RoleOperator, network.RoleDevice)
)

// Route declares one message type an engine answers: who may send it,
// how large it may be, how long it may run, and its handler.
type Route struct {
	Op     string // the operation's name in metrics: "identify", "enroll", ...
	From   Roles
	Handle Handler
	// Max bounds the request frame in bytes (bounds.go computes them from
	// the cluster's parameters); the runtime refuses a longer announced
	// length before it reads anything.
	Max int
	// Long requests may run as long as an identification
	// (config.Timeouts.Identify); the others get Timeouts.Request.
	Long bool
	// Query: the handler only answers (an identification or a part of
	// one), so it stops when its requester gives up (the runtime ends its
	// context). A change (enroll, delete, prepare, decide, reshare) runs
	// to its end whatever its requester does: its transaction decides.
	Query bool
}

// Engine is one mode's protocol logic plugged into the server runtime.
type Engine interface {
	// Routes lists the requests the engine answers.
	Routes() map[protocol.Type]Route
	// Run does background work (delivering undelivered decisions) until
	// ctx ends.
	Run(ctx context.Context)
	// Stats are gauges for /metrics and health.
	Stats() Stats
}

// Stats are an engine's gauges.
type Stats struct {
	Rows      int // row slots, live or not
	Live      int // enrolled rows that take part in identification
	Unsettled int // transactions undecided here or decisions not yet acknowledged
}

// Env is what the runtime gives an engine.
type Env struct {
	Params *config.Params
	Self   string // this server's name in Params
	Net    network.Dialer
	// Storage opens the engine's durable logs; Files when nil.
	Storage Storage
	Log     *slog.Logger
	// Metrics registers the engine's own collectors (never nil).
	Metrics prometheus.Registerer
	// Fatal stops the server: the engine found that it cannot continue
	// without risking a wrong answer (its log cannot be written). The
	// engine refuses every request afterwards.
	Fatal func(error)
	// Rand is the source of transaction ids and shares' seeds; crypto/rand
	// when nil.
	Rand io.Reader
	// PairKeys holds the key this server shares with each other server, by
	// name (host/pairkey); row-map digests sent to a server are sealed
	// with it (SealDigest). A server without them answers no query that
	// needs a digest and reports its peers as unreachable.
	PairKeys map[string][32]byte
	// SealKey opens the parts of sealed enrollments sealed to this server
	// (internal/codec/seal); a share holder without it refuses them.
	SealKey *seal.PrivateKey
	// Workers is how many goroutines the engine's kernels use at once;
	// every core (GOMAXPROCS) when zero. A process that hosts several
	// shards of a party gives each its share.
	Workers int
	// Shard is where the server runs in a sharded cluster (config.Shards
	// > 1): shard Shard of member Self, or its coordinator
	// (config.Coordinator). An unsharded cluster's servers ignore it.
	Shard int
	// Clock is the time that paces the engine's limits (the degraded
	// gate's rates and turns); time.Now when nil. An in-process cluster
	// may hold it still, so that what a test counts lands in one window
	// whatever the machine's speed.
	Clock func() time.Time
}

// Now is the engine's time: Clock's, else the wall clock's.
func (e Env) Now() time.Time {
	if e.Clock != nil {
		return e.Clock()
	}
	return time.Now()
}

// Sharded reports whether the server is one shard of its member, holding
// the rows of that shard only.
func (e Env) Sharded() bool { return e.Params.Shards() > 1 && e.Shard >= 0 }

// Coordinating reports whether the server is a sharded member's
// coordinator, which holds no rows.
func (e Env) Coordinating() bool { return e.Params.Shards() > 1 && e.Shard < 0 }

// Member names the server in messages: Self, or "Self#shard" for a
// shard.
func (e Env) Member() string {
	if e.Sharded() {
		return config.ShardName(e.Self, e.Shard)
	}
	return e.Self
}

// Peer names another member's server that this one talks to, in
// messages: in a shard, the peer's same shard (its dialer resolves the
// bare name there).
func (e Env) Peer(name string) string {
	if e.Sharded() {
		return config.ShardName(name, e.Shard)
	}
	return name
}

// Bound is the name the server's data are bound to: Self, or
// "Self#shard/shards" for a shard, so that one shard's data never open as
// another's, nor under another shard count (whose rows are placed
// otherwise: 'idface shard rebalance' moves them).
func (e Env) Bound() string {
	if !e.Sharded() {
		return e.Self
	}
	b := fmt.Sprintf("%s/%d", config.ShardName(e.Self, e.Shard), e.Params.Shards())
	if id := e.Params.Literal().ShardKeyID; id != "" {
		b += "/" + id[:8] // rows placed under this key: a configuration with another (or none) is refused
	}
	return b
}

// Owns reports whether id's row is this server's to hold: always outside
// shards.
func (e Env) Owns(id string) bool { return !e.Sharded() || e.Params.ShardOf(id) == e.Shard }

// NotOwned is the refusal of an id of another shard.
func (e Env) NotOwned(id string) *protocol.Error {
	return protocol.Errorf(protocol.CodeBadRequest, "id %q is shard %d's, not %s's: enroll and delete through the member's coordinator, with a client that splits batches by shard",
		id, e.Params.ShardOf(id), e.Member())
}

// Cores is the number of goroutines the engine's kernels use at once.
func (e Env) Cores() int {
	if e.Workers > 0 {
		return e.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Log is an engine's durable log (internal/codec/store.Log in a server; tests
// may wrap it to fail on purpose).
type Log interface {
	// Append writes records and makes them durable before returning.
	Append(recs ...store.Record) ([]store.Pos, error)
	// Overwrite replaces tail bytes of an appended record durably.
	Overwrite(off int64, b []byte) error
}
