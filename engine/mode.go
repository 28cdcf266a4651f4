package engine

import (
	"context"
	"fmt"
	"io"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/store"
)

// Mode is one mode's engine as its package declares it
// (docs/DESIGN-NOTES.md "Modes"): its declaration (config.ModeSpec, the
// data configuration checks against) and what the programs need: how each
// server of the mode opens its engine and its data, how fsck checks them,
// its traffic and storage, its rows of the communication tables. Package
// modes lists them; server, cluster, fsck, bench, demo, commcost and the
// in-process harness look a mode up there and ask for what it can do;
// none of them names a mode.
type Mode struct {
	config.ModeSpec
	// Server says what the named server of a cluster of this mode is.
	Server func(p *config.Params, name string) Server
	// IdentifyFormula is the bytes one identification over rows rows moves
	// between the servers by the mode's formula, and the formula's name
	// (commcost).
	IdentifyFormula func(p *config.Params, rows int) (formula string, bytes float64)
	// Describe says in one line what the mode derived from p (cluster
	// init); optional.
	Describe func(p *config.Params) string
	// Storage is the bytes one party keeps for rows rows (bench reports).
	Storage func(p *config.Params, rows int) float64
	// EnrollBatch is the templates a bulk enrollment sends per request
	// (demo, bench); optional.
	EnrollBatch func(p *config.Params, total int) int
	// Rebalance moves a stopped party's rows from the shards of old (data
	// in from, one directory per shard, of party server srv) to those of
	// next (empty directories to) without re-enrolment ('idface shard
	// rebalance'); nil in a mode that does not shard.
	Rebalance func(ctx context.Context, srv Server, old, next *config.Params, self string, from, to []string, out io.Writer) error
	// NoRebalance says why a mode that shards cannot rebalance (Rebalance
	// nil), and what the operator does instead.
	NoRebalance string
	// CommCost is the mode's rows of the communication tables ('idface
	// commcost', the paper's Tables comm_cost and comm_cost_multi);
	// optional.
	CommCost []CommTable
	// KernelPath: bench also times one identify's kernels alone
	// (experiments.BlindKernelPath: additive score shares, permute and
	// mask, one decider).
	KernelPath bool
}

// CommTable is a group of a mode's rows of the communication tables.
type CommTable struct {
	// Place orders the groups of every mode, smaller first: the paper's
	// protocols, then this project's.
	Place int
	// Rows are the group's rows for one setting.
	Rows func(s CommSetting) ([]CommRow, error)
}

// CommSetting is one setting of the communication tables: a gallery of
// IDs rows of Dim dimensions, weights Alpha and Beta, and the numbers of
// servers asked for (each >= 2; a mode of a fixed number ignores them).
type CommSetting struct {
	IDs, Dim, Alpha, Beta int
	Mus                   []int
}

// CommRow is one row of the tables: the bits the servers exchange in one
// phase by the mode's formula.
type CommRow struct {
	Protocol string // as the tables name it: "2pcface", "idface-paillier-paper", ...
	Phase    string // "enroll" or "identify"
	Mu       int
	Bits     float64
	// Run, when set, is how 'commcost --measure' measures the row: on a
	// local cluster of the mode with Mu parties and these options; nil
	// for a row it does not measure (the paper's parameters, enrollment,
	// more parties than one machine runs well).
	Run *CommRun
}

// CommRun is what a measured row's cluster takes beside its mode and
// parties.
type CommRun struct {
	Scheme     string // config.Literal.Scheme
	HideProbes bool
}

// CannotRebalance is the refusal of 'idface shard rebalance' in a mode
// without Rebalance.
func (m Mode) CannotRebalance() error {
	if m.NoRebalance != "" {
		return fmt.Errorf("mode %s cannot move its rows to another shard count: %s", m.Name, m.NoRebalance)
	}
	return fmt.Errorf("mode %s cannot move its rows to another shard count in this build", m.Name)
}

// Server is one server of a mode: its role, its data and its engine.
type Server struct {
	// Role names it in messages and status: "party", "decider", ...
	Role string
	// Log is its durable log's file name in the data directory and the
	// kind of records it holds; "" for a server that keeps no data.
	Log  string
	Kind store.Kind
	// Open makes its engine with its storage in dir (its logs opened in
	// env.Storage); the closers release the storage.
	Open func(ctx context.Context, env Env, dir string) (Engine, []func() error, error)
	// Fsck reports a stopped server's data in dir: what it found to out,
	// and the problems; nil for a server that keeps no data.
	Fsck func(env Env, dir string, opt FsckOptions, out io.Writer) ([]string, error)
	// Rebuild restores a stopped server whose data is gone into dir from
	// the other servers, reached through env.Net (report to out); nil in
	// a mode whose shares exist nowhere else.
	Rebuild func(ctx context.Context, env Env, dir string, out io.Writer) error
}

// FsckOptions are fsck's requests beyond the report.
type FsckOptions struct {
	// Rows is ORIGIN:LO-HI: list the ids of those rows of an origin.
	Rows string
	// Report, when set, receives what fsck found in structured form
	// ('fsck --json').
	Report *FsckReport
}

// FsckReport is what fsck found at a share holder, for 'fsck --json'.
type FsckReport struct {
	Segments []FsckSegment `json:"segments,omitempty"`
	Rows     []FsckRow     `json:"rows,omitempty"`
}

// FsckSegment is the rows enrolled through one origin.
type FsckSegment struct {
	Origin string `json:"origin"`
	Rows   int    `json:"rows"`
	Live   int    `json:"live"`
}

// FsckRow is one row of a --rows listing.
type FsckRow struct {
	Origin string `json:"origin"`
	Row    int    `json:"row"`
	ID     string `json:"id"`
	Live   bool   `json:"live"`
}

// Batch is the templates a bulk enrollment of total templates sends per
// request in mode m: the mode's choice, or def.
func (m *Mode) Batch(p *config.Params, total, def int) int {
	if m.EnrollBatch != nil {
		return m.EnrollBatch(p, total)
	}
	return def
}
