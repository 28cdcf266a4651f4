package engine

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
)

// The metrics that several modes serve are made here, so that a name has
// one meaning, one help text, wherever it is served; where what it counts
// depends on the mode, the mode is a label. docs/DEPLOY.md "What to
// monitor" is the catalog (inproc.TestMetricsCatalog checks it).

// NewChangeCounters registers the counters of the changes a server runs:
// the rows they enrolled and deleted, and the changes rolled back.
func NewChangeCounters(reg prometheus.Registerer) (enrolled, deleted, aborts prometheus.Counter) {
	const who = " (the entry that took the request; in mode he the sequencer, which runs every change)."
	enrolled = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_enrolled_rows_total", Help: "Rows enrolled by the changes this server ran" + who})
	deleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_deleted_rows_total", Help: "Rows deleted by the changes this server ran" + who})
	aborts = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_txn_aborts_total", Help: "Changes this server ran that were rolled back everywhere" + who})
	reg.MustRegister(enrolled, deleted, aborts)
	return enrolled, deleted, aborts
}

// NewBatchCounters registers an entry's counters of its batches of
// concurrent identifies, each sent to every helper as one request, and of
// the identifies in them. Which identifies an entry batches is the
// mode's (the mode label): every one in 2PC/MPC, hidden probes in
// replicated mode, whose checked queries merge at the holders' passes
// instead.
func NewBatchCounters(p *config.Params, reg prometheus.Registerer) (batches, batched prometheus.Counter) {
	mode := prometheus.Labels{"mode": string(p.Mode())}
	batches = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_identify_batches_total", ConstLabels: mode,
		Help: "Entry: batches of concurrent identifies, each sent to every helper as one request (an identify alone on an idle entry is a batch of one); 2pc and mpc batch every identify, replicated hidden probes only."})
	batched = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_identify_batched_total", ConstLabels: mode,
		Help: "Entry: identifies in those batches (over batches: the mean batch)."})
	reg.MustRegister(batches, batched)
	return batches, batched
}
