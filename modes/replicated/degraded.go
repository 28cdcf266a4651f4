package replicated

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/rowtxn"
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
// its digest instead of three, and an answer is flagged degraded. One of
// those two unchecked vectors is always the entry's, so the helper and
// the decider serve a degraded query only for an outage they see
// themselves (gate, below), and where scores are hidden the decider
// answers the decision alone, with nothing the entry could read the
// scores of rows it aimed at from (Decider.result); the entry's check of
// the decider (the tags) holds only where scores are shown.
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

// keepsTags reports whether holder keeps the tags of the lacking share's
// vector for the decider's fetch: both its holders, when every holder is
// up. sendsTags: its one live holder sends them with the vector instead,
// in a degraded query of a cluster that shows scores (a degraded query
// that hides them is answered with the decision alone, untagged).
func (pl plan) keepsTags(holder int) bool {
	return pl.down == noneDown && (holder == pl.tagger() || holder == pl.tagDigester())
}

func (pl plan) sendsTags(p *Params, holder int) bool {
	return pl.down != noneDown && p.RevealScores() && holder == pl.tagger()
}

// tagger and tagDigester are the lacking share's holders: the one that
// sends its vector in full, and the other (-1: down), which sends its
// digest.
func (pl plan) tagger() int      { return pl.full(pl.lacking()) }
func (pl plan) tagDigester() int { return pl.digest(pl.lacking()) }

// tagHolders are the two helpers that keep the tags the decider fetches.
func (pl plan) tagHolders() [2]int { return [2]int{pl.tagger(), pl.tagDigester()} }

// bestOnly reports whether the decider answers this query with its best
// row only, with no value, tag or score: a degraded query in a cluster
// that hides scores (Decider.result says why).
func (pl plan) bestOnly(p *Params) bool { return pl.down != noneDown && !p.RevealScores() }

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
// the outage, and checked answers resume. A helper or the decider that
// reaches the holder and refuses a degraded query also ends it, once the
// entry reaches the holder too (Holder.backUp).
type outage struct {
	mu    sync.Mutex
	down  int // noneDown or the holder
	since time.Time
	gen   int             // counts outages begun and ended: a probe runs for its own only
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
		o.gen++
		o.gauge.WithLabelValues(name).Set(1)
		go o.run(o.ctx, o.gen, k, name, ping)
	}
	return true
}

// end ends the outage of holder k, if that is the current one.
func (o *outage) end(k int, name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.endLocked(o.gen, k, name)
}

func (o *outage) endLocked(gen, k int, name string) bool {
	if o.gen != gen || o.down != k {
		return false
	}
	o.down = noneDown
	o.gen++
	o.gauge.WithLabelValues(name).Set(0)
	return true
}

// start makes ctx end the probes (the engine's Run).
func (o *outage) start(ctx context.Context) {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
}

// run probes holder k until it answers, then ends outage gen; it stops
// as soon as that outage ended otherwise.
func (o *outage) run(stop context.Context, gen, k int, name string, ping func(context.Context) error) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		o.mu.Lock()
		over := o.gen != gen
		o.mu.Unlock()
		if over {
			return
		}
		ctx, cancel := context.WithTimeout(stop, probeEvery)
		err := ping(ctx)
		cancel()
		if err == nil {
			o.mu.Lock()
			o.endLocked(gen, k, name)
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

// countsDown reports whether holder name counts as down by err, the
// outcome of a contact with it: it could not be reached, or it answered
// that it stands down until it is rebuilt (stale.go). A holder that stands
// down while it catches up is not down: one of the two others may be what
// keeps it out (withholding what it missed, garbling its fetch), and a
// degraded query would leave that one's vectors unchecked, so queries
// wait for it (awaitCatchUp) or are refused.
func countsDown(err error, name string) bool {
	return unreachable(err) || rowtxn.StandsDownUntilRebuilt(err, name)
}

// ping asks holder name for its health: the probe of an outage.
func ping(d network.Dialer, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := rpc.Call(ctx, d, name, &protocol.Health{})
		return err
	}
}

// Serving a degraded query: what a helper and the decider check before
// they take part in a query that names a holder down. The plan comes from
// the entry, and with a holder down the entry sends one vector that no
// other holder computes (of the share it holds with the down holder), so
// an entry that named a live holder down could add what it likes to the
// scores of rows it chose, unseen. So neither takes the entry's word: each
// serves the query only if it cannot reach that holder itself (its own
// contact failed within downFor), and at most degradedRate of one entry's
// degraded queries a second; and the decider's degraded answer, where
// scores are hidden, gives the entry nothing to compare with what it added
// (Decider.result: the best row only, no value, tag or score).
// docs/REPLICATED-NOTES.md "Degraded service" argues it.

const (
	// downFor is how long a failed contact of this server's own with a
	// holder confirms that holder down; after recheckAfter a query starts
	// another contact in the background, so a steady load never waits.
	downFor      = 5 * time.Second
	recheckAfter = time.Second
	// degradedFloor is the least rate (and burst) of degraded queries a
	// second one entry is served by this server; config's degraded_rate
	// sets the rate, else it is derived from the checked queries this
	// server served every entry before the outage (rates): degradedScale
	// times their busiest window's rate (every entry's together, since
	// the down holder's clients move to the other entries). A query beyond waits its turn a short while (pace),
	// else is refused.
	degradedFloor = 20
	degradedScale = 1.5
	// rateWindow and rateWindows: an entry's checked queries are counted
	// per rateWindow, and the busiest of the last rateWindows sets its
	// degraded limit.
	rateWindow  = time.Second
	rateWindows = 60
)

// contactWait bounds one contact (a health request) that decides whether
// a holder can be reached: a holder that does not answer within it
// counts as down.
func contactWait(p *Params) time.Duration { return min(2*time.Second, p.Timeouts().Request/4) }

// reach is this server's own knowledge of which holders it can reach,
// from contacts it made itself.
type reach struct {
	ping func(ctx context.Context, name string) error
	wait time.Duration // one contact

	mu     sync.Mutex
	failed map[string]time.Time     // the end of the last failed contact, by holder
	flight map[string]chan struct{} // a contact under way, closed when it ends
}

func newReach(d network.Dialer, wait time.Duration) *reach {
	return &reach{ping: func(ctx context.Context, name string) error { return ping(d, name)(ctx) }, wait: wait,
		failed: map[string]time.Time{}, flight: map[string]chan struct{}{}}
}

// down reports whether holder name cannot be reached: a failed contact
// within downFor, else a new contact, waited for (at most r.wait). A
// contact that succeeded is not kept: a holder back is believed at once.
func (r *reach) down(name string) bool {
	r.mu.Lock()
	if t, ok := r.failed[name]; ok && time.Since(t) < downFor {
		if time.Since(t) >= recheckAfter {
			r.contactLocked(name)
		}
		r.mu.Unlock()
		return true
	}
	done := r.contactLocked(name)
	r.mu.Unlock()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.failed[name]
	return ok && time.Since(t) < downFor
}

// contactLocked starts a contact with holder name, or returns the one
// under way.
func (r *reach) contactLocked(name string) chan struct{} {
	if c, ok := r.flight[name]; ok {
		return c
	}
	c := make(chan struct{})
	r.flight[name] = c
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.wait)
		err := r.ping(ctx, name)
		cancel()
		r.mu.Lock()
		if countsDown(err, name) {
			r.failed[name] = time.Now()
		} else {
			delete(r.failed, name)
		}
		delete(r.flight, name)
		r.mu.Unlock()
		close(c)
	}()
	return c
}

// limiter is a token bucket per entry (holder index), of a fixed rate or
// of one derived per entry (rateOf).
type limiter struct {
	mu     sync.Mutex
	rate   float64 // turns a second (the floor, when rateOf derives it)
	burst  float64
	rateOf func(entry int) float64 // nil: rate for every entry
	b      map[int]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), b: map[int]*bucket{}}
}

// limitsOf are entry's rate and burst now (caller holds l.mu).
func (l *limiter) limitsOf(entry int) (float64, float64) {
	if l.rateOf == nil {
		return l.rate, l.burst
	}
	r := max(l.rate, l.rateOf(entry))
	return r, max(l.burst, r)
}

// reserve takes entry's next turn at now: how long until it is due, or
// false (and nothing taken) where that is beyond wait.
func (l *limiter) reserve(entry int, now time.Time, wait time.Duration) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rate, burst := l.limitsOf(entry)
	b := l.b[entry]
	if b == nil {
		b = &bucket{tokens: burst, at: now}
		l.b[entry] = b
	}
	if now.After(b.at) {
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	if rate <= 0 {
		return 0, false
	}
	due := time.Duration((1 - b.tokens) / rate * float64(time.Second))
	if due > wait {
		return due, false
	}
	b.tokens-- // owed: the turns after it wait longer
	return due, true
}

// limits are entry's rate and burst now.
func (l *limiter) limits(entry int) (float64, float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limitsOf(entry)
}

// rates counts the checked queries this server took part in and saw
// answered (the decider once it answers, a helper once the decider
// fetches the answer's tags, the entry once it answers), every entry's
// together, per rateWindow: the busiest of the last rateWindows windows
// that counted one, within rateHorizon, scaled, is every entry's degraded
// limit (together, since in an outage the down holder's clients move to
// the other entries).
//
// Degraded queries are not counted, nor checked queries that did not
// complete (an entry's first try in an outage, a query abandoned): the
// limit cannot rise during an outage, and a deviating entry raises it
// only by running checked queries the cluster answers, at the pace the
// limit then allows. Nor does it fall during one: only seconds that
// counted an answered checked query are windows, so the pace before an
// outage holds however long it lasts, up to rateHorizon. (Windows that
// moved on with the clock fell to the floor a minute into an outage, 20
// a second an entry, 50 ms a query, found at 2 x 10^4 rows; counting a
// query as its header arrived let stray tries move them or pump them.)
type rates struct {
	mu    sync.Mutex
	now   func() time.Time
	count []int       // the queries of the last windows, the current one last
	at    []time.Time // each window's start
}

// rateHorizon is the oldest a window may be and still set the limit: a
// night's quiet or a load test of last week does not set today's.
const rateHorizon = time.Hour

func newRates(now func() time.Time) *rates { return &rates{now: now} }

// roll moves the windows on to now and reports whether it did (caller
// holds r.mu). Only windows that counted a query are kept.
func (r *rates) roll() bool {
	now := r.now()
	if len(r.count) == 0 {
		r.count, r.at = []int{0}, []time.Time{now}
		return false
	}
	last := len(r.count) - 1
	if now.Sub(r.at[last]) < rateWindow {
		return false
	}
	if r.count[last] > 0 {
		r.count, r.at = append(r.count, 0), append(r.at, now)
		if len(r.count) > rateWindows {
			r.count, r.at = r.count[len(r.count)-rateWindows:], r.at[len(r.at)-rateWindows:]
		}
	} else {
		r.at[last] = now
	}
	return true
}

// observe counts one answered checked query; it reports whether a new
// window began (the limit may have changed).
func (r *rates) observe() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rolled := r.roll()
	r.count[len(r.count)-1]++
	return rolled
}

// derived is every entry's degraded limit (the limiter's floor applies):
// degradedScale times the busiest window's checked queries a second, of
// the windows within rateHorizon.
func (r *rates) derived(int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	now, most := r.now(), 0
	for i, n := range r.count {
		if now.Sub(r.at[i]) <= rateHorizon {
			most = max(most, n)
		}
	}
	return degradedScale * float64(most) / rateWindow.Seconds()
}

var errLimit = errors.New("over the limit")

// take waits for entry's next turn at now, at most wait; errLimit if it
// is further off.
func (l *limiter) take(ctx context.Context, entry int, now time.Time, wait time.Duration) error {
	due, ok := l.reserve(entry, now, wait)
	if !ok {
		return errLimit
	}
	if due <= 0 {
		return nil
	}
	t := time.NewTimer(due)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gate admits degraded queries at a helper or the decider (admit).
type gate struct {
	env   engine.Env
	p     *Params
	reach *reach
	limit *limiter
	pace  time.Duration // the longest a query waits for its turn

	served  *prometheus.CounterVec // idface_repl_degraded_served_total{entry}
	refused *prometheus.CounterVec // idface_repl_degraded_refused_total{entry,reason}
	limitG  *prometheus.GaugeVec   // idface_repl_degraded_limit{entry}
	rates   *rates                 // each entry's checked queries, for its derived limit
	logs    engine.LogEvery        // a log line about an entry's degraded queries, at most every 10 s
}

func newGate(env engine.Env, p *Params) *gate {
	g := &gate{env: env, p: p, reach: newReach(env.Net, contactWait(p)), rates: newRates(env.Now),
		pace: min(time.Second, p.Timeouts().DeciderWait/4),
		limitG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "idface_repl_degraded_limit",
			Help: "Degraded queries a second this server serves each entry while a holder is down (degraded_rate in cluster.json, else derived: 1.5 times the busiest second of checked queries it took part in, all entries together, over the last 60 seconds that had any, at least 20)."}, []string{"entry"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_degraded_served_total",
			Help: "Degraded queries (one holder named down) this server took part in, by the entry that sent them: it could not reach that holder itself."}, []string{"entry"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_degraded_refused_total",
			Help: "Degraded queries this server refused, by entry and reason: reachable (this server reaches the holder the entry named down) or limit (the entry's degraded queries came faster than the limit)."}, []string{"entry", "reason"})}
	if r := p.DegradedRate(); r > 0 {
		g.limit = newLimiter(r, int(math.Ceil(r)))
	} else {
		g.limit = newLimiter(degradedFloor, degradedFloor)
		g.limit.rateOf = g.rates.derived
	}
	g.showLimits()
	return g
}

// showLimits sets idface_repl_degraded_limit to each entry's limit now.
func (g *gate) showLimits() {
	for k := range replicated.Holders {
		rate, _ := g.limit.limits(k)
		g.limitG.WithLabelValues(g.p.Party(k).Name).Set(rate)
	}
}

// limitNow is the degraded queries a second this server serves an entry
// now, the most of any entry's, rounded up (an operator's health answer).
func (g *gate) limitNow() uint32 {
	most := 0.0
	for k := range replicated.Holders {
		rate, _ := g.limit.limits(k)
		most = max(most, rate)
	}
	return uint32(min(math.Ceil(most), math.MaxUint32))
}

// showInHealth makes the health answer of routes r tell an operator this
// server's degraded limit now ('cluster status' shows it).
func (g *gate) showInHealth(r map[protocol.Type]engine.Route) {
	health := r[protocol.THealth]
	core := health.Handle
	health.Handle = func(ctx context.Context, req engine.Request) protocol.Msg {
		resp := core(ctx, req)
		if ok, _ := resp.(*protocol.HealthOK); ok != nil && req.From.Role == network.RoleOperator {
			ok.DegradedLimit = g.limitNow()
		}
		return resp
	}
	r[protocol.THealth] = health
}

func (g *gate) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.served, g.refused, g.limitG}
}

// checked counts a checked (not degraded) query that this server takes
// part in: the derived degraded limit follows them. On the query path:
// one counter under a lock, the gauges set once a window.
func (g *gate) checked() {
	if g.rates.observe() {
		g.showLimits()
	}
}

// admit decides whether this server takes part in a query of entry holder
// entry that names holder down down: only if it cannot reach that holder
// itself (down == own(), the holder's own outage, or reach), and within
// the entry's limit.
func (g *gate) admit(ctx context.Context, entry, down int, own func() int) *protocol.Error {
	en, dn := g.p.Party(entry).Name, g.p.Party(down).Name
	self := g.env.Self
	if (own == nil || own() != down) && !g.reach.down(dn) {
		g.refused.WithLabelValues(en, "reachable").Inc()
		if n, ok := g.logs.Due(en + " reachable"); ok {
			g.env.Log.Warn("an entry named a share holder down that this server reaches; its degraded queries are refused", "entry", g.env.Peer(en), "named_down", g.env.Peer(dn), "refused", n)
		}
		return protocol.Errorf(protocol.CodeInconsistent, "entry %s named %s down, but %s reaches %s: a query runs degraded only while the servers that serve it cannot reach that holder either, so this one is refused. If %s is down for %s only, check %s's network; else %s may be faulty or compromised",
			en, dn, self, dn, dn, en, en, en)
	}
	if err := g.limit.take(ctx, entry, g.env.Now(), g.pace); err != nil {
		if !errors.Is(err, errLimit) {
			return protocol.Errorf(protocol.CodeUnavailable, "%s: %v", self, err)
		}
		g.refused.WithLabelValues(en, "limit").Inc()
		if n, ok := g.logs.Due(en + " limit"); ok {
			g.env.Log.Warn("an entry's degraded queries came faster than the limit; refused", "entry", g.env.Peer(en), "down", g.env.Peer(dn), "refused", n)
		}
		rate, burst := g.limit.limits(entry)
		g.limitG.WithLabelValues(en).Set(rate)
		return protocol.Errorf(protocol.CodeUnavailable, "%s serves at most %.4g degraded queries a second from entry %s (bursts of %.4g) while %s is down; this one is refused: retry shortly (degraded_rate in cluster.json sets the limit; by default it is 1.5 times the busiest second of checked queries, all entries together, in the last 60 seconds that had any)",
			self, rate, en, burst, dn)
	}
	g.served.WithLabelValues(en).Inc()
	if n, ok := g.logs.Due(en + " served"); ok {
		rate, _ := g.limit.limits(entry) // the gauge moves with checked queries; an outage has none
		g.limitG.WithLabelValues(en).Set(rate)
		g.env.Log.Warn("serving degraded queries: a share holder named down that this server cannot reach either", "entry", g.env.Peer(en), "down", g.env.Peer(dn), "queries", n)
	}
	return nil
}
