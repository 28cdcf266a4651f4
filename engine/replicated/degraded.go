package replicated

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/replicated"
)

// Degraded service. Any two holders hold all three shares between them,
// so with one holder down the other two still give the decider every
// share's vector: share j's vector comes in full from holder j, or from
// holder j-1 (which keeps s_j as its next share) when j is down. What is
// lost is the check of the shares the down holder holds: only one live
// holder computes them, so the decider compares one share's vector with
// its digest instead of three, and an answer is flagged degraded. The
// decider's own check (the tags) still holds: the tags come from the
// holder that sends the vector of the share the entry lacks, and the
// decider still never sees their key.
//
// The model is one failure: one holder down, or one server deviating.
// With a holder down and another deviating, a degraded answer may be
// wrong; docs/REPLICATED-NOTES.md says so.

// noneDown is a plan's down holder when every holder is up.
const noneDown = -1

// plan says, for a query of entry holder entry with holder down down
// (noneDown: none), which holder sends each share's vector in full and
// which sends its digest, who tags the vector of the share the entry
// lacks and who sends the tags' digest.
type plan struct{ entry, down int }

// full is the holder that sends share j's vector in full.
func (pl plan) full(j int) int {
	h := replicated.HoldersOf(j)
	if h[0] == pl.down {
		return h[1]
	}
	return h[0]
}

// digest is the holder that sends the digest of share j's vector (its
// next share), or -1 when one of j's holders is down.
func (pl plan) digest(j int) int {
	h := replicated.HoldersOf(j)
	if h[0] == pl.down || h[1] == pl.down {
		return -1
	}
	return h[1]
}

// lacking is the share the entry does not hold.
func (pl plan) lacking() int { return (pl.entry + 2) % replicated.Holders }

// tagger sends the tags of the lacking share's vector, tagDigester (-1:
// none) their digest.
func (pl plan) tagger() int      { return pl.full(pl.lacking()) }
func (pl plan) tagDigester() int { return pl.digest(pl.lacking()) }

// parts is the number of holders that send parts.
func (pl plan) parts() int {
	if pl.down == noneDown {
		return replicated.Holders
	}
	return replicated.Holders - 1
}

// wireDown encodes the down holder for protocol.BlindQuery.Down and
// protocol.ReplShare.Down (0: none).
func (pl plan) wireDown() uint8 { return uint8(pl.down + 1) }

// planOf is the plan a query's message names.
func planOf(entry int, down uint8) plan { return plan{entry: entry, down: int(down) - 1} }

// outage is the entry's view of a helper it cannot reach. While a helper
// is marked down, queries run degraded without waiting for it, and a
// probe asks it for its health every probeEvery; the first answer ends
// the outage, and checked answers resume.
type outage struct {
	mu    sync.Mutex
	down  int // noneDown or the holder
	since time.Time
	probe bool            // a probe is running
	ctx   context.Context // ends the probes: the engine's Run

	gauge    *prometheus.GaugeVec // idface_repl_down{holder}
	degraded prometheus.Counter   // idface_repl_degraded_total
}

const probeEvery = time.Second

func newOutage() *outage {
	return &outage{down: noneDown, ctx: context.Background(),
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idface_repl_down",
			Help: "Entry: 1 while this holder cannot reach the labelled holder and answers degraded (unchecked for that holder's shares)."}, []string{"holder"}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_degraded_total",
			Help: "Entry: queries answered degraded, with one holder down."}),
	}
}

// current is the holder marked down, or noneDown.
func (o *outage) current() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// mark records that holder k (named name) cannot be reached and starts
// its probe, which ends the outage once k answers. A second holder
// failing while one is down is not an outage this mode serves: mark
// keeps the first.
func (o *outage) mark(k int, name string, ping func(context.Context) error) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down != noneDown && o.down != k {
		return false
	}
	if o.down == noneDown {
		o.down, o.since = k, time.Now()
		o.gauge.WithLabelValues(name).Set(1)
	}
	if !o.probe {
		o.probe = true
		go o.run(o.ctx, k, name, ping)
	}
	return true
}

// start makes ctx end the probes (the engine's Run).
func (o *outage) start(ctx context.Context) {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
}

// run probes holder k until it answers, then ends the outage.
func (o *outage) run(stop context.Context, k int, name string, ping func(context.Context) error) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(stop, probeEvery)
		err := ping(ctx)
		cancel()
		if err == nil {
			o.mu.Lock()
			if o.down == k {
				o.down = noneDown
			}
			o.probe = false
			o.gauge.WithLabelValues(name).Set(0)
			o.mu.Unlock()
			return
		}
	}
}

// unreachable reports whether err is a failure to reach a server (no
// connection, or a connection that died) rather than its refusal.
func unreachable(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return false
	}
	return err != nil
}

// ping asks holder name for its health: the probe of an outage.
func ping(d network.Dialer, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rpc.Call(ctx, d, name, &protocol.Health{})
		return err
	}
}
