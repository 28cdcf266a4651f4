package blindbase

import (
	"context"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/protocol"
)

// Decider is what blind and replicated mode's deciders share: the table
// of queries whose parts are still coming (Queries: parts of type P,
// answers of type R), and what a server that keeps no rows answers to
// the runtime (routes, run loop, stats, health). A mode's decider embeds
// it and names its own share message (Routes).
type Decider[P, R any] struct {
	Queries *merge.Table[P, R]
	self    string // the decider's name, in its health answer
	mode    string // what its health answer says it runs
}

// NewDecider is the shared part of the decider self of mode, over the
// table q.
func NewDecider[P, R any](self, mode string, q *merge.Table[P, R]) Decider[P, R] {
	return Decider[P, R]{Queries: q, self: self, mode: mode}
}

// ShareRoutes are a decider's routes: health from anyone, and the share
// messages of type t from share holders only, to share.
func (d *Decider[P, R]) ShareRoutes(t protocol.Type, share engine.Handler) map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth: {Op: "health", From: engine.Anyone, Handle: d.health, Max: protocol.Small, Query: true},
		t:                {Op: "decide", From: engine.Parties, Handle: share, Max: protocol.Small, Long: true, Query: true},
	}
}

// Run drops the parts of queries whose other parts never came.
func (d *Decider[P, R]) Run(ctx context.Context) { d.Queries.Run(ctx) }

// Stats: the decider keeps no rows.
func (d *Decider[P, R]) Stats() engine.Stats { return engine.Stats{} }

func (d *Decider[P, R]) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: d.self, Mode: d.mode}
}
