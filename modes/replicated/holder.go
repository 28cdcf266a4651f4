// Package replicated is the protocol engine of replicated blind mode (SPEC
// section 8, docs/REPLICATED-NOTES.md): three share holders keep 2-of-3
// replicated additive shares over Z_(2^k) of every row's gallery vector
// (holder i keeps s_i and s_(i+1)), and a decider that holds no share
// answers from the sum of three permuted, masked share-score vectors.
//
// Identify, checked: every share-score vector c_j = <s_j, y> is computed by
// both holders of s_j; holder j sends pi(c_j) + m_j in full, holder j-1 a
// digest of the same bytes. The decider refuses the query, naming the pair,
// if any full vector differs from its digest, else answers as in blind
// mode. The decider's answer is checked too: with every answered position
// it sends the value there of the vector of the share the entry does not
// hold and that value's tag, a one-time MAC under a key the two helpers
// derive (and tell the entry) but the decider never sees; the entry adds
// its own two vectors' values and accepts the position only if the tag
// holds and the sum reaches the threshold.
//
// Enrollment is sealed (rowtxn's SealedEnroll): the operator's client
// makes the three shares and seals each holder's pair to that holder
// (sealedShares); the entry relays what it cannot read, and no server sees
// a template. Then the two-phase transaction of engine/rowtxn.
//
// # Security model
//
// One of the four servers may deviate (the entry included); none collude.
// One holder's store is uniform. A deviating holder or entry gets every
// query it alters refused, never answered wrongly; a deviating decider
// cannot get a row below the threshold accepted. The decider sees each
// query's scores in random order; the entry learns the answer and the
// scores of the answered rows; a helper sees y and sigma, as in blind mode.
// With one holder down (as the helper and the decider each find by their
// own contact, never on the entry's word) queries run degraded, unchecked
// for that holder's shares; where scores are hidden the entry then learns
// the decision only (degraded.go).
package replicated

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Params are what the engines read from a cluster's parameters, checked
// for this mode: three share holders and a decider.
type Params struct {
	*config.Params
	Bits int // the ring, 8 or 16
}

// NewParams checks that p describes a replicated cluster.
func NewParams(p *config.Params) (*Params, error) {
	if p.Mode() != config.ModeReplicated {
		return nil, fmt.Errorf("replicated: a cluster of mode %s", p.Mode())
	}
	if p.Mu() != replicated.Holders {
		return nil, fmt.Errorf("replicated: %d share holders; this mode has exactly %d", p.Mu(), replicated.Holders)
	}
	if _, ok := p.Decider(); !ok {
		return nil, fmt.Errorf("replicated: the cluster has no decider")
	}
	return &Params{Params: p, Bits: p.Ring().Bits}, nil
}

// pair is a holder's store of its two shares of every row of one origin's
// segment: s_i (own) and s_(i+1) (next), each an additive column store,
// and each row's trailer (the salts of the two and the record of s_(i+2):
// records.go).
type pair[E additive.Elem] struct {
	own, next *additive.Store[E]
	tr        *trailers
	seg       int          // its origin
	erased    *erasures[E] // the shares Erase and Put change (the check sums follow)
}

func (s pair[E]) Rows() int           { return s.own.Rows() }
func (s pair[E]) Live() int           { return s.own.Live() }
func (s pair[E]) IsLive(seq int) bool { return s.own.IsLive(seq) }

// split views a row's unit (s_i, s_(i+1), then the trailer) as the two
// shares and the trailer's bytes.
func (s pair[E]) split(b []byte) ([]E, []E, []byte) {
	d := s.own.Dim()
	if b == nil { // lost to damage: zeros, and the row must be deleted
		return make([]E, d), make([]E, d), nil
	}
	half := d * additive.RingOf[E]().Bits / 8
	e := additive.ViewElems[E](b[:2*half])
	return e[:d], e[d:], b[2*half:]
}

func (s pair[E]) Put(seq int, b []byte, live bool) error {
	if err := s.erased.record(s.seg, seq, s.own, s.next); err != nil { // a reshare's new share
		return err
	}
	a, n, tr := s.split(b)
	if err := s.own.Put(seq, a, live); err != nil {
		return err
	}
	if err := s.next.Put(seq, n, live); err != nil {
		return err
	}
	return s.tr.put(seq, tr, live)
}

func (s pair[E]) Erase(seq int) error {
	if err := s.erased.record(s.seg, seq, s.own, s.next); err != nil {
		return err
	}
	if err := s.own.Delete(seq); err != nil {
		return err
	}
	s.tr.erase(seq)
	return s.next.Delete(seq)
}

// unit is row seq's unit as the log holds it: s_i, s_(i+1), the trailer
// (caller holds the rows' lock).
func (s pair[E]) unit(seq int) ([]byte, error) {
	d := s.own.Dim()
	own, err := s.own.Row(seq, make([]E, d))
	if err != nil {
		return nil, err
	}
	next, err := s.next.Row(seq, make([]E, d))
	if err != nil {
		return nil, err
	}
	tr := s.tr.get(seq)
	return tr.Append(slices.Concat(additive.ElemBytes(own), additive.ElemBytes(next))), nil
}

// PutRows stores a batch of new rows column by column.
func (s pair[E]) PutRows(seq0 int, rows [][]byte) error {
	own, next := make([][]E, len(rows)), make([][]E, len(rows))
	trs := make([][]byte, len(rows))
	for i, b := range rows {
		own[i], next[i], trs[i] = s.split(b)
	}
	if err := s.own.PutRows(seq0, own); err != nil {
		return err
	}
	if err := s.next.PutRows(seq0, next); err != nil {
		return err
	}
	for i, tr := range trs {
		if err := s.tr.put(seq0+i, tr, true); err != nil {
			return err
		}
	}
	return nil
}

// Engine is a share holder whatever its ring.
type Engine = rowtxn.Holder

// Holder is one share holder of a replicated cluster.
type Holder[E additive.Elem] struct {
	*rowtxn.Core[pair[E]]
	env     engine.Env
	p       *Params
	gallery *engine.LevelTransformers
	query   *engine.LevelTransformers
	perms   sync.Pool      // *additive.Permuter
	acks    blindbase.Acks // of the shares sent as a helper: a stopping holder waits for them
	outage  *outage
	gate    *gate       // the degraded queries of other entries this holder serves as a helper
	probes  probeNonces // hidden probes seen in the window
	cur     currency    // whether its rows are as current as the other holders' (stale.go)
	hidden  *engine.Batcher[*hiddenJob[E], hiddenDone]
	scans   *engine.Batcher[*scan[E], scanned[E]] // one pass over the shares for concurrent hidden probes
	// scanning is held by the pass running (scanAll): the check sums are
	// touched by one pass at a time, also by a caller outside h.scans.
	scanning sync.Mutex
	passes   *engine.Batcher[*pass, passed[E]] // the same for concurrent checked queries
	// chk is what this holder keeps to check its neighbours' products of
	// hidden probes (checked.go): the weights of its two checks and the
	// sums over the rows of the last view (touched by scans alone).
	chk struct {
		low, high *replicated.Challenges[E]
		sums      *checkSums[E]
		erased    *erasures[E] // written by the stores' Erase
	}
	vectorsIn mailbox    // the predecessor's vectors of hidden probes, until checked
	tagsKept  tagKeep    // the tags of queries in flight, until the decider fetches its answer's (tagfetch.go)
	attesting sync.Mutex // one attestation of records at a time (records.go)
	m         struct {
		score, permute   prometheus.Counter
		passes, passed   prometheus.Counter // passes over the shares for checked queries, and their queries
		batches, batched prometheus.Counter // hidden-probe batches at the entry, and their probes
		scans, scanned   prometheus.Counter // passes over the shares for hidden probes, and their probes
		summed           prometheus.Counter // rows summed into the check sums of hidden probes' products
		refused          *prometheus.CounterVec
		fetchRefused     *prometheus.CounterVec // rows fetched from a peer (rebuild, catch-up, records) refused by the other's records
		catchUpFailed    *prometheus.CounterVec // catch-ups that failed at a peer (no answer, a refusal, a malformed one)
	}
}

// New makes share holder env.Self: feed it the log with Replay, then call
// Start.
func New(env engine.Env) (Engine, error) {
	p, err := NewParams(env.Params)
	if err != nil {
		return nil, err
	}
	switch p.Bits {
	case 8:
		return newHolder[uint8](env, p)
	case 16:
		return newHolder[uint16](env, p)
	}
	return nil, fmt.Errorf("replicated: a ring of %d bits", p.Bits)
}

func newHolder[E additive.Elem](env engine.Env, p *Params) (*Holder[E], error) {
	d := p.Dim()
	seg := 0
	var erased *erasures[E] // the check sums of hidden probes' products need them
	if p.HideProbes() {
		erased = &erasures[E]{}
	}
	core, err := rowtxn.New(env, rowtxn.Options[pair[E]]{
		ShareSize: unitSize(p.Params),
		Check:     func(prep *protocol.Prepare, self int) []byte { return shareCheck(p.Params, prep, self) },
		Compare: func(prep *protocol.Prepare, checks [][]byte, down int) []string {
			return compareChecks(p, checks, down, prep.Reshare != nil)
		},
		Reshare: func(prep *protocol.Prepare, self int, sh pair[E]) error { return reshareRows(p, sh, prep, self) },
		NewShares: func() (pair[E], error) { // one per origin, in order
			own, err := additive.NewStore[E](d, 0)
			if err != nil {
				return pair[E]{}, err
			}
			next, err := additive.NewStore[E](d, 0)
			seg++
			return pair[E]{own: own, next: next, tr: &trailers{}, seg: seg - 1, erased: erased}, err
		},
	})
	if err != nil {
		return nil, err
	}
	g, err := engine.NewLevelTransformers(d, p.GalleryLevels())
	if err != nil {
		return nil, err
	}
	q, err := engine.NewLevelTransformers(d, p.QueryLevels())
	if err != nil {
		return nil, err
	}
	h := &Holder[E]{Core: core, env: env, p: p, gallery: g, query: q, outage: newOutage(), gate: newGate(env, p)}
	h.chk.erased = erased
	h.vectorsIn.keep = p.Timeouts().Identify
	h.tagsKept.keep, h.tagsKept.since = p.Timeouts().Identify, time.Now()
	if bmax, _ := p.Batch(); bmax > 0 {
		h.tagsKept.batch = min(bmax, protocol.MaxHiddenBatch)
	}
	h.probes.start = time.Now().Unix()
	// Two batches in flight: one scoring while the other's vectors travel.
	bmax, bwait := p.Batch()
	h.hidden = engine.NewBatcher(min(bmax, protocol.MaxHiddenBatch), bwait, 2, p.Timeouts().Identify, h.runHidden)
	// One scan at a time, taking what arrived while the last ran (two at
	// once would share the memory bandwidth each is bound by); at most
	// bmax probes per pass bound the pass's vectors in memory.
	h.scans = engine.NewBatcher(bmax, 0, 1, p.Timeouts().Identify, h.scanAll).Weighed(func(sc *scan[E]) int { return len(sc.prs) })
	h.passes = engine.NewBatcher(bmax, 0, 1, p.Timeouts().Identify, h.scorePass)
	h.m.score = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_score_seconds_total", Help: "Time in passes over the shares computing the two share-score vectors (column sums over every row; concurrent queries share a pass)."})
	h.m.permute = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_permute_seconds_total", Help: "Time permuting and masking the two share-score vectors, and tagging."})
	h.m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_entry_refusals_total",
		Help: "Entry: queries refused because the decider's answer failed its check (decider) or the helpers' tag keys differ (the helper pair)."}, []string{"pair"})
	h.m.fetchRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_fetch_refused_total",
		Help: "Rows taken from the other two holders (a catch-up, a reshare's records) refused because a share does not match the other holder's record of it, or the two attest different records, by the pair of holders one of which is faulty (this holder cannot tell which)."}, []string{"pair"})
	h.m.catchUpFailed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_repl_catchup_failed_total",
		Help: "Catch-ups of this stale holder that failed at a peer (it did not answer the fetch, refused it, or answered it malformed), by that peer: a peer that keeps it out is named."}, []string{"peer"})
	unattested := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idface_repl_records_unattested",
		Help: "Live rows whose record (of the share this holder does not hold) is not attested yet: after a reshare, until both holders of that share attest the new one. While above 0, a holder that loses its data cannot be rebuilt."}, h.unattested)
	h.m.scans = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_scans_total", Help: "Passes over this holder's shares for hidden probes (its own as the entry and the other entries' together)."})
	h.m.scanned = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_scanned_total", Help: "Hidden probes scored in those passes (over scans: the mean pass)."})
	h.m.summed = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_check_rows_summed_total", Help: "Rows summed into the checks of hidden probes' products (new rows, and changed ones taken out and summed again), at a probe or between probes."})
	h.m.passes = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_passes_total", Help: "Passes over this holder's shares for checked queries (its own as the entry and the other entries' together)."})
	h.m.passed = prometheus.NewCounter(prometheus.CounterOpts{Name: "idface_repl_passed_total", Help: "Checked queries scored in those passes (over passes: the mean pass)."})
	h.m.batches, h.m.batched = engine.NewBatchCounters(env.Params, env.Metrics) // one meaning in every mode
	for _, c := range append(h.gate.collectors(), h.m.score, h.m.permute, h.m.scans, h.m.scanned, h.m.summed, h.m.passes, h.m.passed, h.m.refused, h.m.fetchRefused, h.m.catchUpFailed, unattested, h.outage.gauge, h.outage.degraded) {
		env.Metrics.MustRegister(c)
	}
	return h, nil
}

// Routes lists the requests a share holder answers.
func (h *Holder[E]) Routes() map[protocol.Type]engine.Route {
	r := h.Core.Routes()
	share := unitSize(h.p.Params) // the holder's pair of a row and its trailer
	r[protocol.TSealedEnroll] = engine.Route{Op: "enroll", From: engine.Operators, Handle: h.Guard(h.SealedEnroll), Max: engine.SealedEnrollBound(h.p.Params, share)}
	r[protocol.TSealedPrepare] = engine.Route{Op: "prepare", From: engine.Parties, Handle: h.Guard(h.SealedPrepare), Max: engine.SealedPrepareBound(h.p.Params, share)}
	r[protocol.TIdentify] = engine.Route{Op: "identify", From: engine.Clients, Handle: h.Guard(h.identifyPlain), Max: engine.IdentifyBound(h.p.Params), Long: true, Query: true}
	r[protocol.THiddenIdentify] = engine.Route{Op: "identify", From: engine.Clients, Handle: h.Guard(h.identifyHidden), Max: engine.HiddenIdentifyBound(h.p.Params), Long: true, Query: true}
	r[protocol.TBlindQuery] = engine.Route{Op: "query", From: engine.Parties, Handle: h.Guard(h.serveQuery), Max: engine.BlindQueryBound(h.p.Params), Long: true, Query: true}
	if h.env.Sharded() {
		r[protocol.TShardIdentify] = engine.Route{Op: "identify", From: engine.Parties, Handle: h.Guard(h.shardIdentify), Max: engine.ShardIdentifyBound(h.p.Params), Long: true, Query: true}
		r[protocol.TShardHidden] = engine.Route{Op: "identify", From: engine.Parties, Handle: h.Guard(h.shardHidden), Max: engine.ShardHiddenBound(h.p.Params), Long: true, Query: true}
	}
	r[protocol.THiddenQuery] = engine.Route{Op: "query", From: engine.Parties, Handle: h.Guard(h.serveHidden), Max: engine.HiddenQueryBound(h.p.Params), Long: true, Query: true}
	r[protocol.TTagAsk] = h.tagAskRoute()
	r[protocol.THiddenVector] = engine.Route{Op: "query", From: engine.Parties, Handle: h.Guard(h.takeVector), Max: protocol.Small, Long: true, Query: true}
	r[protocol.TReplFetch] = engine.Route{Op: "rebuild", From: engine.Parties, Handle: h.Guard(h.fetchRows), Max: protocol.Small}
	r[protocol.TReplAttest] = engine.Route{Op: "reshare", From: engine.Parties, Handle: h.Guard(h.attestNow), Max: protocol.Small, Long: true}
	r[protocol.TReshareRequest] = engine.Route{Op: "reshare", From: engine.Operators, Handle: h.Guard(h.reshare), Max: protocol.Small, Long: true}
	h.gate.showInHealth(r)
	h.standDownRoutes(r)
	return r
}

// vectors are one holder's two permuted, masked share-score vectors of a
// query: own = pi(c_i) + m_i, next = pi(c_(i+1)) + m_(i+1).
type vectors[E additive.Elem] struct {
	blindbase.View
	own, next []E
	sums      *checkSums[E]  // a hidden probe's: the check sums of the view
	masks     *probeMasks[E] // a hidden probe's: what its checks need of its permute step
}

// score computes this holder's two vectors over its committed rows. A
// helper passes the entry's sealed row map (want, from) and is refused if
// its rows differ; the entry passes started, which sees the snapshot
// before the scoring (to send the helpers the row map).
//
// Concurrent queries (this holder's own as the entry, and those the other
// entries ask it for as a helper) share one pass over the shares
// (h.passes, scorePass), as in blind mode; each caller then permutes and
// masks its own.
func (h *Holder[E]) score(ctx context.Context, q *additive.Query, sigma *additive.Seed, from string, want protocol.Digest, started func(blindbase.View)) (*vectors[E], error) {
	// Waited for to the end, also when ctx ends first (local work, bounded
	// by the shares).
	res, err := h.passes.Do(context.Background(), &pass{ctx: ctx, q: q, from: from, want: want, started: started})
	if err == nil {
		err = res.err
	}
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	n := res.v.Rows()
	out := &vectors[E]{View: res.v, own: make([]E, n), next: make([]E, n)}
	perm := h.permuter()
	defer h.perms.Put(perm)
	if err := permuteBoth(perm, out, res.own, res.next, sigma, h.Self()); err != nil {
		return nil, err
	}
	h.m.permute.Add(time.Since(t1).Seconds())
	return out, nil
}

// pass is one query's part in a pass over the shares (score).
type pass struct {
	ctx     context.Context // the request's: a query whose caller is gone is not scored
	q       *additive.Query
	from    string
	want    protocol.Digest
	started func(blindbase.View)
}

// passed is a query's two share-score vectors from a pass, on the pass's
// view of the rows, or why it was refused.
type passed[E additive.Elem] struct {
	v         blindbase.View
	own, next []E
	err       error
}

// scorePass is one pass over the committed rows for every query of ps:
// one view, each query admitted on it or refused, then both shares'
// scores of all admitted queries by additive.ScoreSharesBatch. A helper's
// query whose rows a commit moved on while it waited is refused with
// CodeCountedDown: the entry runs it once more (as in blind mode).
func (h *Holder[E]) scorePass(_ context.Context, ps []*pass) []passed[E] {
	out := make([]passed[E], len(ps))
	t0 := time.Now()
	h.RLock()
	v := h.view()
	var qs []*additive.Query
	var own, next [][]E
	for i, p := range ps {
		out[i].v = v
		if err := p.ctx.Err(); err != nil {
			out[i].err = protocol.Errorf(protocol.CodeUnavailable, "%s: %v", h.env.Self, err)
			continue
		}
		if perr := h.admit(v, p.from, p.want, p.started); perr != nil {
			if p.want != nil {
				perr = blindbase.RowsMoved(h.env.Self)
			}
			out[i].err = perr
			continue
		}
		out[i].own, out[i].next = make([]E, v.Rows()), make([]E, v.Rows())
		qs, own, next = append(qs, p.q), append(own, out[i].own), append(next, out[i].next)
	}
	var err error
	subOwn, subNext := make([][]E, len(qs)), make([][]E, len(qs))
	for s := range v.Digest {
		rows := int(v.Digest[s].Rows)
		if rows == 0 || len(qs) == 0 {
			continue
		}
		for j := range qs {
			subOwn[j], subNext[j] = own[j][v.Off[s]:v.Off[s+1]], next[j][v.Off[s]:v.Off[s+1]]
		}
		if err = h.Shares(s).score(subOwn, subNext, qs, rows); err != nil {
			break
		}
	}
	h.RUnlock()
	for i := range out {
		if err != nil && out[i].err == nil {
			out[i] = passed[E]{v: v, err: err}
		}
	}
	h.m.score.Add(time.Since(t0).Seconds())
	h.m.passes.Inc()
	h.m.passed.Add(float64(len(qs)))
	return out
}

// score computes the share-scores of the segment's first rows rows, of
// both shares, for every query in one pass each (own[i], next[i] for
// qs[i]).
func (s pair[E]) score(own, next [][]E, qs []*additive.Query, rows int) error {
	if err := s.own.ScoreSharesBatch(own, qs, 0, rows, 0); err != nil {
		return err
	}
	return s.next.ScoreSharesBatch(next, qs, 0, rows, 0)
}

// permuteBoth permutes and masks holder self's two share-score vectors
// into out. The share index, not the holder, picks the mask: both holders
// of s_j add the same m_j, and the masks of the three shares sum to zero.
func permuteBoth[E additive.Elem](perm *additive.Permuter, out *vectors[E], own, next []E, sigma *additive.Seed, self int) error {
	held := replicated.Held(self)
	return additive.PermuteMaskPair(perm, out.own, out.next, own, next, out.Live, sigma, held[0], held[1], replicated.Holders)
}

func (h *Holder[E]) permuter() *additive.Permuter {
	if p, ok := h.perms.Get().(*additive.Permuter); ok {
		return p
	}
	return &additive.Permuter{}
}

// sendShares sends this holder's contribution to the decider, by the
// query's plan: its own vector in full; its next one in full when that
// share's other holder is down, else that vector's digest; and, by role,
// the tags of the vector of the share the entry lacks or their digest.
// The entry's stream then carries the decider's answer.
func (h *Holder[E]) sendShares(ctx context.Context, qid [16]byte, vec *vectors[E], pl plan, topK int, tagKey *[32]byte) (*network.Stream, error) {
	self := h.Self()
	held := replicated.Held(self)
	m := &protocol.ReplShare{Query: qid, Rows: uint32(vec.Rows()), Bits: uint8(h.p.Bits), TopK: uint16(topK), Entry: uint8(pl.entry), Down: pl.wireDown()}
	tail := protocol.ReplTail{Own: additive.ElemBytes(vec.own)}
	switch self {
	case pl.full(held[1]):
		m.Next = true
		tail.Next = additive.ElemBytes(vec.next)
	case pl.digest(held[1]):
		m.Digest = replicated.VectorDigest(qid, held[1], h.p.Bits, additive.ElemBytes(vec.next))
	}
	lacking := vec.own // the vector of the share the entry lacks, if this holder has it
	if held[1] == pl.lacking() {
		lacking = vec.next
	}
	switch {
	case pl.sendsTags(h.p, self):
		tags := make([]byte, 4*len(lacking))
		if err := replicated.Tags(tags, lacking, tagKey); err != nil {
			return nil, err
		}
		m.Tags = true
		tail.Tags = tags
	case pl.keepsTags(self):
		if err := h.keepTags(pl.entry, qid, lacking, tagKey); err != nil {
			return nil, err
		}
	}
	bulk, err := m.TailParts(tail, 0)
	if err != nil {
		return nil, err
	}
	return blindbase.SendShares(ctx, h.env.Net, h.p.DeciderName(), m, bulk...)
}

// tagKey is this query's MAC key, from the key this helper shares with
// the other helper.
func (h *Holder[E]) tagKey(entry int, qid [16]byte) ([32]byte, error) {
	other := h.p.Party(3 - entry - h.Self()).Name
	pk, ok := h.env.PairKeys[other]
	if !ok {
		return [32]byte{}, fmt.Errorf("%s shares no key with %s, so it cannot key the query's tags; start it with its identity key", h.env.Self, other)
	}
	return replicated.ShardTagKey(&pk, qid, h.tagShard()), nil
}

// tagShard is the shard whose tag keys this holder derives: its own in a
// sharded cluster (each shard's key is its own: ShardTagKey), else -1.
func (h *Holder[E]) tagShard() int {
	if h.env.Sharded() {
		return h.env.Shard
	}
	return -1
}

// identify runs a query as the entry: checked with every holder, or
// degraded without a helper this entry cannot reach. Each run has a
// fresh permutation and query id (reusing them would show the decider
// two masked vectors under one mask), and a failed run is run again, at
// most maxRuns in all:
//   - without a helper that turned out unreachable during a checked run
//     (counted down: the run again is degraded);
//   - checked, when a degraded run was refused and the holder counted
//     down answers again (the others reach it already);
//   - as it was, on CodeCountedDown: the decider restarted since this
//     holder's connection to it was made, a helper's commit moved its
//     rows while it waited for a pass, or a helper stopped between its
//     part and the decider's fetch of the answer's tags (runQuery counts
//     it down first if it is gone).
func (h *Holder[E]) identify(ctx context.Context, r engine.Request) protocol.Msg {
	if h.env.Sharded() {
		return protocol.Errorf(protocol.CodeBadRequest, "%s is one shard of %s: identify through %s's address (its coordinator)", h.env.Member(), h.env.Self, h.env.Self)
	}
	m := r.Msg.(*protocol.Identify)
	down := h.outage.current()
	var resp protocol.Msg
	again := 0 // the runs again on CodeCountedDown
runs:
	for run := 1; ; run++ {
		var lost int
		resp, lost = h.runQuery(ctx, m, down, nil)
		if _, failed := resp.(*protocol.Error); !failed || run == maxRuns || ctx.Err() != nil {
			break
		}
		refused := refusal(resp)
		if !refused { // ask again: counted whatever runs next
			if again == blindbase.MaxRunsAgain {
				break runs
			}
			again++
		}
		switch {
		case lost != noneDown && down == noneDown && h.markDown(lost):
			down = lost
		case down != noneDown && refused && h.backUp(ctx, down):
			down = noneDown
		case !refused:
			down = h.outage.current()
		case down == noneDown && h.awaitCatchUp(ctx):
			// a helper stood down while it caught up, and is back
		default:
			break runs
		}
	}
	if e, failed := resp.(*protocol.Error); failed && e.Code == protocol.CodeCountedDown {
		e.Code = protocol.CodeUnavailable
	}
	if ok, isOK := resp.(*protocol.IdentifyOK); isOK && ok.Degraded {
		h.outage.degraded.Inc()
	} else if isOK {
		// Its own answered checked queries count toward the degraded
		// limit it serves the other entries, as those it helps with do:
		// in an outage the clients of this entry may move to another,
		// whose queries this holder then serves (counted only as a
		// helper, a holder that had been every client's entry served the
		// others 20 a second: 50 ms a query).
		h.gate.checked()
	}
	return resp
}

// catchUpWait bounds how long a query waits for a helper that stands down
// while it catches up (stale.go): the changes it missed come from either
// other holder within a second or two.
const catchUpWait = 5 * time.Second

// awaitCatchUp reports whether a helper of this entry that stands down
// while it catches up serves again within catchUpWait (and the query's
// time): it then runs again, checked. Such a helper is not counted down
// (countsDown), so a query is never answered degraded without it.
func (h *Holder[E]) awaitCatchUp(ctx context.Context) bool {
	var out []string
	for _, name := range h.Peers() {
		pctx, cancel := context.WithTimeout(ctx, contactWait(h.p))
		err := ping(h.env.Net, name)(pctx)
		cancel()
		if rowtxn.StandsDown(err, name) && !rowtxn.StandsDownUntilRebuilt(err, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	for _, name := range out {
		for {
			pctx, pcancel := context.WithTimeout(ctx, contactWait(h.p))
			err := ping(h.env.Net, name)(pctx)
			pcancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return true
}

// maxRuns bounds the runs of one identify: a checked run, a degraded one
// without a helper lost during it, a checked one when that helper is
// back, and blindbase.MaxRunsAgain runs again on CodeCountedDown (no more of
// them, whatever the others).
const maxRuns = 3 + blindbase.MaxRunsAgain

// refusal reports whether resp is a refusal that a run again under a
// fresh query id does not answer (CodeCountedDown does).
func refusal(resp protocol.Msg) bool {
	e, failed := resp.(*protocol.Error)
	return failed && e.Code != protocol.CodeCountedDown
}

// backUp reports whether holder k, which this entry counts down, answers
// it now, and then ends the outage: a degraded query was refused, and
// the helper or the decider that refused it may have reached k (they
// serve a degraded query only while they cannot), before this entry's
// probe did.
func (h *Holder[E]) backUp(ctx context.Context, k int) bool {
	name := h.p.Party(k).Name
	ctx, cancel := context.WithTimeout(ctx, contactWait(h.p))
	defer cancel()
	if countsDown(ping(h.env.Net, name)(ctx), name) {
		return false
	}
	if h.outage.end(k, name) {
		h.env.Log.Info("a share holder counted down answers again; answering checked", "holder", h.env.Peer(name))
	}
	return true
}

// markDown counts holder lost down if it cannot be reached (a ping
// fails), so that queries run degraded without it until it is back.
func (h *Holder[E]) markDown(lost int) bool {
	name := h.p.Party(lost).Name
	if !h.outage.mark(lost, name, ping(h.env.Net, name)) {
		return false
	}
	h.env.Log.Warn("a share holder cannot be reached; answering degraded until it is back", "holder", h.env.Peer(name))
	return true
}

// shardIdentify runs a query over this shard's rows for the holder's
// coordinator (engine/shard), under the coordinator's query id: the
// shard's checked candidates with their scores, which the entry learns
// unsharded too. A helper found unreachable is counted down and the
// query fails: the coordinator asks every shard again under a fresh
// query id (one id must not carry two masked vectors), and this shard
// then answers degraded.
func (h *Holder[E]) shardIdentify(ctx context.Context, r engine.Request) protocol.Msg {
	if !h.env.Sharded() || r.From.Name != h.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only a shard's own coordinator asks it to identify")
	}
	m := r.Msg.(*protocol.ShardIdentify)
	down := h.outage.current()
	resp, lost := h.runQuery(ctx, &protocol.Identify{TopK: m.TopK, Template: m.Template}, down, &m.Query)
	e, failed := resp.(*protocol.Error)
	switch {
	case failed && lost != noneDown && down == noneDown && h.markDown(lost):
		return protocol.Errorf(protocol.CodeCountedDown, "%s (counted down: ask again)", e.Msg)
	case failed && down != noneDown && lost == noneDown && refusal(resp) && h.backUp(ctx, down):
		return protocol.Errorf(protocol.CodeCountedDown, "%s (%s is back: ask again)", e.Msg, h.env.Peer(h.p.Party(down).Name))
	}
	return resp
}

// runQuery runs one query by the plan of this entry with holder down down
// (noneDown: none), under query id qid when given (a shard's
// coordinator's). When it fails because a helper could not be reached,
// lost names that helper.
func (h *Holder[E]) runQuery(ctx context.Context, m *protocol.Identify, down int, qid0 *[16]byte) (resp protocol.Msg, lost int) {
	topK := int(m.TopK)
	pl := plan{entry: h.Self(), down: down}
	nq, perr := blindbase.NewQuery(h.env, h.p.Params, h.query, m)
	if perr != nil {
		return perr, noneDown
	}
	if qid0 != nil {
		nq.ID = *qid0
	}
	sigma, qid := nq.Sigma, nq.ID
	// The live helpers: (y, sigma) out, their traffic and the tag key back.
	var peers []string
	for _, name := range h.Peers() {
		if h.p.PartyIndex(name) != down {
			peers = append(peers, name)
		}
	}
	f := h.newFanout(ctx, peers)
	defer f.cancel()
	ask := func(v blindbase.View) {
		f.askAll(v, func(_ int, sealed protocol.Digest) *protocol.BlindQuery {
			return &protocol.BlindQuery{Query: qid, Sigma: sigma, Digest: sealed, Pos: nq.Pos, Coef: nq.Coef, Down: pl.wireDown()}
		})
	}
	vec, err := h.score(ctx, nq.Q, &sigma, "", nil, ask)
	res, total, perr := f.finish(err, func(ctx context.Context) (*network.Stream, error) {
		return h.sendShares(ctx, qid, vec, pl, topK, nil)
	})
	if perr != nil {
		lost := f.lost
		if lost == noneDown && (perr.Code == protocol.CodeUnavailable || perr.Code == protocol.CodeCountedDown) && ctx.Err() == nil {
			// A helper may have stopped after its part, before the
			// decider's fetch of tags (the decider then says ask again):
			// counted down if it is gone, else the query runs again.
			lost = h.lostHelper(ctx, peers)
		}
		return perr, lost
	}
	if perr := h.sameTagKey(f); perr != nil {
		return perr, noneDown
	}
	var scores []int
	if pl.bestOnly(h.p) {
		scores, perr = h.checkBest(res, vec.Rows(), topK)
	} else {
		base := func(p int) E { return vec.own[p] + vec.next[p] }
		scores, perr = h.check(res, vec.Rows(), base, &tagged{res.Values, res.Tags, &f.oks[0].TagKey}, topK)
	}
	if perr != nil {
		return perr, noneDown
	}
	return h.answer(res, scores, vec.View, &sigma, topK, total, down != noneDown), noneDown
}

// lostHelper is the index of the first of the helpers names that this
// entry cannot reach now (noneDown: it reaches both): a query the decider
// could not finish because a helper went away after sending its part runs
// again degraded, as one whose helper went away before.
func (h *Holder[E]) lostHelper(ctx context.Context, names []string) int {
	for _, name := range names {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), contactWait(h.p))
		down := countsDown(ping(h.env.Net, name)(pctx), name)
		cancel()
		if down {
			return h.p.PartyIndex(name)
		}
	}
	return noneDown
}

// sameTagKey refuses a query whose two helpers told the entry different
// tag keys (they derive one from the key they share).
func (h *Holder[E]) sameTagKey(f *fanout) *protocol.Error {
	if len(f.oks) == 2 && f.oks[0].TagKey != f.oks[1].TagKey {
		h.m.refused.WithLabelValues(f.names[0] + "/" + f.names[1]).Inc()
		return protocol.Errorf(protocol.CodeInconsistent, "%s and %s disagree on the query's tag key; the query is refused", f.names[0], f.names[1])
	}
	return nil
}

// fanout is one query at the entry: its requests to the helpers (names),
// each answered with a ReplQueryOK, and the first failure (a helper's,
// the decider's or the entry's own), which cancels the rest.
type fanout struct {
	ctx    context.Context
	parent context.Context // the request's: once cancelled, a helper's failure is not the helper's
	cancel context.CancelFunc
	env    engine.Env
	p      *Params
	names  []string
	seal   func(name string, g protocol.Digest) (protocol.Digest, error)
	ask    func(ctx context.Context, name string, bq *protocol.BlindQuery) (*protocol.ReplQueryOK, error)

	wg    sync.WaitGroup
	once  sync.Once
	cause *protocol.Error
	lost  int // the helper that could not be reached, or noneDown
	oks   []*protocol.ReplQueryOK
}

func (h *Holder[E]) newFanout(parent context.Context, names []string) *fanout {
	ctx, cancel := context.WithCancel(parent)
	seal := func(name string, g protocol.Digest) (protocol.Digest, error) {
		d, perr := h.SealFor(name, g)
		if perr != nil {
			return nil, perr
		}
		return d, nil
	}
	return &fanout{ctx: ctx, parent: parent, cancel: cancel, env: h.env, p: h.p, names: names, seal: seal, ask: h.ask,
		lost: noneDown, oks: make([]*protocol.ReplQueryOK, len(names))}
}

// fail records the query's first failure, by who.
func (f *fanout) fail(who string, err error) {
	f.once.Do(func() {
		// A helper that failed because this request was cancelled (its
		// requester gave up: a client, or a coordinator that stopped
		// waiting for this shard) is not counted down for it; one silent
		// until the deadline is.
		if k := f.p.PartyIndex(who); k >= 0 && who != f.env.Self && countsDown(err, who) && !errors.Is(f.parent.Err(), context.Canceled) {
			f.lost = k
		}
		e := engine.AsError(err, protocol.CodeUnavailable)
		if blindbase.RunAgain(who, f.p.DeciderName(), err) {
			e.Code = protocol.CodeCountedDown
		}
		f.cause = protocol.Errorf(e.Code, "%s: %s", f.env.Peer(who), e.Msg)
		f.cancel()
	})
}

// askAll sends every helper its query, made by query with the snapshot's
// row map sealed for it.
func (f *fanout) askAll(v blindbase.View, query func(i int, sealed protocol.Digest) *protocol.BlindQuery) {
	for i, name := range f.names {
		sealed, err := f.seal(name, v.Digest)
		if err != nil {
			f.fail(f.env.Self, err)
			return
		}
		bq := query(i, sealed)
		f.wg.Go(func() {
			ok, err := f.ask(f.ctx, name, bq)
			if err != nil {
				f.fail(name, err)
			}
			f.oks[i] = ok
		})
	}
}

// finish takes the entry's scoring error, sends its part to the decider
// (send), reads the decider's answer and waits for the helpers: the
// answer and the query's bytes between servers, or the first failure.
func (f *fanout) finish(scored error, send func(context.Context) (*network.Stream, error)) (*protocol.ReplResult, uint64, *protocol.Error) {
	dec := f.p.DeciderName()
	if scored != nil {
		f.fail(f.env.Self, scored)
		f.wg.Wait()
		return nil, 0, f.cause
	}
	s, err := send(f.ctx)
	if err != nil {
		f.fail(dec, err)
		f.wg.Wait()
		return nil, 0, f.cause
	}
	defer s.Finish()
	stop := context.AfterFunc(f.ctx, func() { s.SetDeadline(time.Now()) }) // a helper failed
	reply, err := rpc.ReadReply(f.ctx, s, dec)
	stop()
	if err != nil {
		f.fail(dec, err)
	}
	f.wg.Wait()
	if f.cause != nil {
		return nil, 0, f.cause
	}
	res, ok := reply.(*protocol.ReplResult)
	if !ok {
		return nil, 0, protocol.Errorf(protocol.CodeInternal, "the decider answered %v", reply.Type())
	}
	total := uint64(s.Sent()+s.Received()) + res.Fetched // with the decider's fetch of the answer's tags
	for _, ok := range f.oks {
		total += ok.Bytes
	}
	return res, total, nil
}

// tagged is one vector the entry lacks, as the decider answers it: the
// values at the answered positions, their tags, and the tags' key.
type tagged struct {
	values []uint16
	tags   []uint32
	key    *[32]byte
}

// check verifies the decider's answer: every position is a row of this
// query (of rows), answered once, with values whose tags hold; the score
// there (this entry's part, base, plus the tagged values) reaches the
// threshold, or in a research cluster equals the decider's score, best
// first. It returns the scores.
func (h *Holder[E]) check(res *protocol.ReplResult, rows int, base func(p int) E, l *tagged, topK int) ([]int, *protocol.Error) {
	dec := h.p.DeciderName()
	bad := func(format string, a ...any) *protocol.Error {
		h.m.refused.WithLabelValues(dec).Inc()
		h.env.Log.Warn("the decider's answer failed its check; query refused", "decider", dec)
		return protocol.Errorf(protocol.CodeInconsistent, "the decider's answer fails its check (%s); the query is refused: %s may be faulty or compromised", fmt.Sprintf(format, a...), dec)
	}
	reveal := h.p.RevealScores()
	n := len(res.Positions)
	switch {
	case n > topK:
		return nil, bad("%d positions for top %d", n, topK)
	case reveal && len(res.Scores) != n:
		return nil, bad("%d scores for %d positions", len(res.Scores), n)
	case !reveal && len(res.Scores) != 0:
		return nil, bad("scores sent to a cluster that hides them")
	case len(l.values) != n || len(l.tags) != n:
		return nil, bad("%d values and %d tags for %d positions", len(l.values), len(l.tags), n)
	case float64(res.Fetched) > 4*TagFetchBits(rows, topK)/8+64<<10:
		return nil, bad("%d bytes to fetch %d tags of %d rows", res.Fetched, topK, rows) // a count only, but not one to believe
	}
	seen := map[uint32]bool{}
	scores := make([]int, n)
	maxVal := uint64(1)<<h.p.Bits - 1
	for i, p := range res.Positions {
		if int(p) >= rows || seen[p] {
			return nil, bad("position %d of %d rows, or twice", p, rows)
		}
		seen[p] = true
		v := uint64(l.values[i])
		if v > maxVal {
			return nil, bad("a value of %d bits", h.p.Bits)
		}
		tag, err := replicated.Tag(l.key, int(p), v)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
		if tag != l.tags[i] {
			return nil, bad("a value whose tag does not hold")
		}
		sum := base(int(p)) + E(v)
		s := additive.Signed(sum)
		switch {
		case s == additive.DeadScore[E]():
			return nil, bad("a deleted row")
		case reveal && s != int(res.Scores[i]):
			return nil, bad("a score that is not the row's")
		case !reveal && s < h.p.Threshold():
			return nil, bad("a row below the threshold")
		case i > 0 && s > scores[i-1]:
			return nil, bad("rows out of order")
		}
		scores[i] = s
	}
	return scores, nil
}

// checkBest checks a degraded answer of a cluster that hides scores: at
// most one position, the decider's best row (Decider.result), a row of
// this query, with no value, tag or score. Nothing more can be checked:
// the check of checked answers needs the row's score, and an entry that
// could read that here could read the scores of rows it raised in the
// vector no other holder computes. It returns, for each position, a
// placeholder above every score: a shard's coordinator merges the
// shards' answers by score, and a degraded shard answers only a row that
// is best over every shard.
func (h *Holder[E]) checkBest(res *protocol.ReplResult, rows, topK int) ([]int, *protocol.Error) {
	dec := h.p.DeciderName()
	bad := func(what string) *protocol.Error {
		h.m.refused.WithLabelValues(dec).Inc()
		h.env.Log.Warn("the decider's degraded answer failed its check; query refused", "decider", dec)
		return protocol.Errorf(protocol.CodeInconsistent, "the decider's degraded answer fails its check (%s); the query is refused: %s may be faulty or compromised", what, dec)
	}
	n := len(res.Positions)
	switch {
	case n > min(1, topK):
		return nil, bad(fmt.Sprintf("%d positions, where it answers the best row only", n))
	case len(res.Scores) != 0 || len(res.Values) != n || len(res.Tags) != n || res.Fetched != 0:
		return nil, bad("scores, or fetched tags")
	}
	scores := make([]int, n)
	for i, p := range res.Positions {
		if int(p) >= rows {
			return nil, bad(fmt.Sprintf("position %d of %d rows", p, rows))
		}
		if res.Values[i] != 0 || res.Tags[i] != 0 {
			return nil, bad("a value or a tag")
		}
		scores[i] = math.MaxInt32
	}
	return scores, nil
}

// ask sends a helper the query and waits for its acknowledgement (its
// shares are on their way to the decider). A cancelled query stops
// waiting at once.
func (h *Holder[E]) ask(ctx context.Context, name string, bq *protocol.BlindQuery) (*protocol.ReplQueryOK, error) {
	resp, n, err := rpc.Ask(ctx, h.env.Net, name, bq)
	if err != nil {
		return nil, err
	}
	ok, isOK := resp.(*protocol.ReplQueryOK)
	if !isOK {
		return nil, fmt.Errorf("%s answered the query with %v", name, resp.Type())
	}
	ok.Bytes += n
	return ok, nil
}

// answer maps the checked positions back to ids: the answer, or in a
// shard the shard's part of it (ShardAnswer: ids and checked scores, best
// first).
func (h *Holder[E]) answer(res *protocol.ReplResult, scores []int, v blindbase.View, sigma *additive.Seed, topK int, total uint64, degraded bool) protocol.Msg {
	perm := h.permuter()
	rows, perr := blindbase.Unpermute(perm, res.Positions, sigma, v.Rows())
	h.perms.Put(perm)
	if perr != nil {
		return perr
	}
	h.RLock()
	defer h.RUnlock()
	if h.env.Sharded() {
		part := &protocol.ShardAnswer{Bytes: total, Degraded: degraded}
		for i, row := range rows {
			if s, seq, live := v.Locate(row); live {
				part.IDs = append(part.IDs, h.ID(s, seq))
				part.Ranks = append(part.Ranks, uint16(len(part.Ranks)))
				part.Scores = append(part.Scores, int32(scores[i]))
			}
		}
		return part
	}
	ans := engine.NewAnswer(h.p.Params, topK)
	ans.Bytes(0, 0, total)
	if degraded {
		ans.Degraded()
	}
	best := degraded && !h.p.RevealScores() // the decider's best row, no score (checkBest)
	for i, row := range rows {
		s, seq, live := v.Locate(row)
		switch {
		case !live: // deleted rows never win (and the check refused them)
		case best:
			ans.Passed(h.ID(s, seq))
		default:
			ans.Scored(h.ID(s, seq), scores[i]) // checked: at the threshold, or revealed
		}
	}
	return ans.Done()
}

// serveQuery answers an entry's query as a helper: check the query's form
// and the row maps, then send this holder's vectors to the decider and the
// query's tag key to the entry.
func (h *Holder[E]) serveQuery(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.BlindQuery)
	entry := h.p.PartyIndex(r.From.Name)
	if entry < 0 || entry == h.Self() {
		return protocol.Errorf(protocol.CodeForbidden, "only another share holder sends a query")
	}
	if h.p.HideProbes() {
		return protocol.Errorf(protocol.CodeBadRequest, "a query with a visible probe in a cluster that hides probes; refused")
	}
	q, perr := blindbase.CheckQuery(h.p.Params, m)
	if perr != nil {
		return perr
	}
	pl := planOf(entry, m.Down)
	if pl.down == entry || pl.down == h.Self() || pl.down >= replicated.Holders {
		return protocol.Errorf(protocol.CodeBadRequest, "a query with holder %d down, from holder %d to holder %d", pl.down, entry, h.Self())
	}
	if pl.down != noneDown { // never on the entry's word alone
		if perr := h.gate.admit(ctx, entry, pl.down, h.outage.current); perr != nil {
			return perr
		}
	}
	if err := h.AwaitDigest(ctx, r.From.Name, m.Digest); err != nil {
		return err
	}
	key, err := h.tagKey(entry, m.Query)
	if err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	sigma := additive.Seed(m.Sigma)
	vec, err := h.score(ctx, q, &sigma, r.From.Name, m.Digest, nil)
	if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
		return pe // this holder's own refusal (CodeCountedDown: run again), not a relayed one
	} else if err != nil {
		return engine.AsError(err, protocol.CodeInternal)
	}
	s, err := h.sendShares(ctx, m.Query, vec, pl, 1, &key)
	if err != nil {
		return engine.AsError(fmt.Errorf("decider: %w", err), protocol.CodeUnavailable)
	}
	resend := func() (*network.Stream, error) { // the same vectors and tags: nothing new to a decider
		ctx, cancel := context.WithTimeout(context.Background(), h.p.Timeouts().Request)
		defer cancel()
		return h.sendShares(ctx, m.Query, vec, pl, 1, &key)
	}
	return &protocol.ReplQueryOK{Bytes: h.acks.Await(s, h.p.DeciderName(), h.env.Log, resend, func() {}), TagKey: key}
}

// pairLabel names a pair of holders in refusals and metrics ("p1/p3").
func pairLabel(p *Params, a, b int) string {
	a, b = min(a, b), max(a, b)
	return strings.Join([]string{p.Party(a).Name, p.Party(b).Name}, "/")
}

// Run does the core's background work, ends the probes of an outage with
// ctx, and compares this holder's rows with the other holders' until it
// knows they are as current (stale.go); once ctx ends, it waits, at most
// blindbase.AckGrace, for the decider to acknowledge the shares it sent as a
// helper.
func (h *Holder[E]) Run(ctx context.Context) {
	h.outage.start(ctx)
	go h.watchCurrency(ctx)
	go h.attestRecords(ctx)
	if h.p.HideProbes() {
		go h.warmChecks(ctx)
	}
	h.Core.Run(ctx)
	h.acks.Wait(min(blindbase.AckGrace, h.p.Timeouts().Shutdown), h.env.Log)
}

// RowShare is this holder's pair of shares of row seq of origin k's
// segment (s_i then s_(i+1)) and its trailer, as its log writes it
// (shard.Rebalance: the records are bound to the row's id, not its place).
func (h *Holder[E]) RowShare(k, seq int) ([]byte, error) {
	h.RLock()
	defer h.RUnlock()
	return h.Shares(k).unit(seq)
}
