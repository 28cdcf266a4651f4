package hemode

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// KeyServer is S_key of IDFace: it holds the secret key (never sent
// anywhere), decrypts a local server's inner-product ciphertexts, decodes
// the scores and answers with row indices only.
//
// It keeps its own record of the rows, from the sequencer's numbered
// changes (decisions and deletions, without ids): which slots exist and
// which are live. Only its own live rows count towards the pass limit and
// can be returned, whatever a local server's query claims, so a deleted
// row never passes and a local server cannot raise the limit by
// announcing more rows. The record is kept in memory; after a start the
// key server answers no query until the sequencer has brought it up to
// date.
type KeyServer struct {
	stats *engine.ScoreStats // best scores, shown per window of queries
	env   engine.Env
	p     *config.Params
	he    heidface.Scheme
	key   heidface.Decryptor
	pk    []byte
	fp    [32]byte

	mu      sync.Mutex
	buckets map[string]*bucket // per local server
	// merging counts, per local server, the sharded queries this key
	// server shard holds at its coordinator's merge: each holds a slot of
	// the merger's table until every shard reports, so one local server
	// whose queries never complete could otherwise fill the table for all
	// (mergeShare).
	merging map[string]int

	rowsMu sync.RWMutex // guards seq, rows, live, nlive
	seq    uint64       // the sequencer's last change applied here
	rows   int          // slots reserved and decided
	live   *bitset.BitSet
	nlive  int
	follower
	refusals *prometheus.CounterVec
}

// Refused is all a local server (and so a device) learns when the key
// server refuses a query for what its decryption shows (more rows pass
// than an honest query can): no count, no limit. The key server logs the
// details and counts the refusal in idface_key_server_refusals_total.
const Refused = "the key server refused to answer this query"

// bucket is a token bucket: rate tokens a second, at most 2*rate held.
type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes a token from the local server's bucket.
func (k *KeyServer) allow(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	rate, now := KeyServerRate(k.p), time.Now()
	b := k.buckets[name]
	if b == nil {
		b = &bucket{tokens: 2 * rate, last: now}
		k.buckets[name] = b
	}
	b.tokens = min(2*rate, b.tokens+rate*now.Sub(b.last).Seconds())
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// NewKeyServer makes the key server's engine around its key pair.
func NewKeyServer(env engine.Env, k *heidface.KeyPair) (*KeyServer, error) {
	p := env.Params
	if ks, ok := p.KeyServer(); !ok || ks.Name != env.Self {
		return nil, fmt.Errorf("hemode: %q is not the key server of this cluster", env.Self)
	}
	key, err := Scheme(p).NewDecryptor(k.Secret, k.Public)
	if err != nil {
		return nil, err
	}
	ks := &KeyServer{env: env, p: p, he: Scheme(p), key: key, pk: k.Public,
		fp: heidface.Fingerprint(k.Public), buckets: map[string]*bucket{}, merging: map[string]int{}, live: bitset.New(0),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idface_key_server_refusals_total",
			Help: "Queries the key server refused, by reason (pass_limit: more rows pass than an honest query can; rate; not_caught_up; merging: a local server's share of sharded queries at the merge is taken)."}, []string{"reason"})}
	env.Metrics.MustRegister(ks.refusals)
	ks.stats = engine.NewScoreStats(p, env.Metrics)
	return ks, nil
}

// Routes lists the requests the key server answers: only local servers
// may fetch the key or query.
func (k *KeyServer) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:           {Op: "health", From: engine.Anyone, Handle: k.health, Max: protocol.Small, Query: true},
		protocol.TPublicKeyRequest: {Op: "public_key", From: engine.Parties, Handle: k.localOnly(k.publicKey), Max: protocol.Small},
		protocol.THEQuery:          {Op: "decrypt", From: engine.Parties, Handle: k.localOnly(k.query), Max: protocol.Small, Long: true, Query: true},
		protocol.THEDecide:         {Op: "decide", From: engine.Parties, Handle: k.fromSequencer(k.onChange), Max: protocol.Small},
		protocol.THEDelete:         {Op: "decide", From: engine.Parties, Handle: k.fromSequencer(k.onChange), Max: protocol.Small},
		protocol.THESync:           {Op: "sync", From: engine.Parties, Handle: k.fromSequencer(k.onSync), Max: protocol.Small},
	}
}

// fromSequencer admits only the sequencer's changes.
func (k *KeyServer) fromSequencer(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if r.From.Name != k.p.Party(0).Name {
			return protocol.Errorf(protocol.CodeForbidden, "only the sequencer %s orders changes", k.p.Party(0).Name)
		}
		return h(ctx, r)
	}
}

// onChange applies the sequencer's change number Seq: each exactly once,
// in order. A decision adds its slots (live if committed), a deletion
// clears its row.
func (k *KeyServer) onChange(_ context.Context, r engine.Request) protocol.Msg {
	k.rowsMu.Lock()
	defer k.rowsMu.Unlock()
	if resp := inOrder(r.Msg, k.seq, "the key server"); resp != nil {
		return resp
	}
	seq := k.seq + 1
	switch m := r.Msg.(type) {
	case *protocol.HEDecide:
		if int(m.Base) != k.rows {
			k.env.Log.Error("the sequencer's decision does not follow on the key server's rows", "rows", k.rows, "base", m.Base)
			return protocol.Errorf(protocol.CodeInconsistent, "the key server has %d rows; cannot apply a decision on rows %d..%d", k.rows, m.Base, int(m.Base)+int(m.N)-1)
		}
		k.rows += int(m.N)
		if m.Commit {
			for i := range int(m.N) {
				k.live.Set(uint(int(m.Base) + i))
			}
			k.nlive += int(m.N)
		}
	case *protocol.HEDelete:
		if int(m.Row) < k.rows && k.live.Test(uint(m.Row)) {
			k.live.Clear(uint(m.Row))
			k.nlive--
		}
	}
	k.seq = seq
	k.applied(k.seq)
	return &protocol.DecideOK{}
}

// onSync learns the sequencer's last change and answers with this key
// server's.
func (k *KeyServer) onSync(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.HESync)
	seq := k.seqNow()
	k.caughtUpTo(m.Seq, seq)
	return &protocol.HESyncOK{Seq: seq}
}

// seqNow is the last change applied here.
func (k *KeyServer) seqNow() uint64 {
	k.rowsMu.RLock()
	defer k.rowsMu.RUnlock()
	return k.seq
}

func (k *KeyServer) localOnly(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if k.p.PartyIndex(r.From.Name) < 0 {
			return protocol.Errorf(protocol.CodeForbidden, "only local servers may query the key server")
		}
		return h(ctx, r)
	}
}

// Run asks the sequencer to bring this key server up to date until it has
// caught up since it started.
func (k *KeyServer) Run(ctx context.Context) {
	if k.env.Net == nil {
		return
	}
	k.askSync(ctx, k.env, k.seqNow) // at once: the first tick is OutboxRetry away
	engine.Every(ctx, k.p.Timeouts().OutboxRetry, func() {
		if !k.caughtUp.Load() {
			k.askSync(ctx, k.env, k.seqNow)
		}
	})
}

// Stats reports the key server's record of the rows (no ids, no
// ciphertexts); it is unsettled until it has caught up with the
// sequencer.
func (k *KeyServer) Stats() engine.Stats {
	k.rowsMu.RLock()
	s := engine.Stats{Rows: k.rows, Live: k.nlive}
	k.rowsMu.RUnlock()
	if !k.caughtUp.Load() {
		s.Unsettled = 1
	}
	return s
}

func (k *KeyServer) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: k.env.Self, Mode: "he-key", InDoubt: uint32(k.Stats().Unsettled)}
}

func (k *KeyServer) publicKey(context.Context, engine.Request) protocol.Msg {
	return &protocol.PublicKey{Key: k.pk}
}

func (k *KeyServer) query(ctx context.Context, r engine.Request) protocol.Msg {
	q := r.Msg.(*protocol.HEQuery)
	if sharded := q.Query != ([16]byte{}); sharded != k.env.Sharded() {
		return protocol.Errorf(protocol.CodeBadRequest, "a query with query id %v at key server %s (sharded %v): a local server's shard asks its key server's same shard", sharded, k.env.Member(), k.env.Sharded())
	}
	if q.Key != k.fp {
		k.env.Log.Warn("refused a query under another public key", "from", r.From.Name, "key", fmt.Sprintf("%x", q.Key[:8]))
		return protocol.Errorf(protocol.CodeInconsistent, "%s encrypts under public key %x, the key server holds %x: the local server's public.key is not this key server's; refusing to decrypt",
			r.From.Name, q.Key[:8], k.fp[:8])
	}
	if !k.caughtUp.Load() {
		k.refusals.WithLabelValues("not_caught_up").Inc()
		return protocol.Errorf(protocol.CodeUnavailable, "the key server has not caught up with the sequencer's changes since it started; it answers once %s has brought it up to date", k.p.Party(0).Name)
	}
	if !k.allow(r.From.Name) {
		k.refusals.WithLabelValues("rate").Inc()
		return protocol.Errorf(protocol.CodeUnavailable, "%s exceeds the key server's rate of %.3g queries a second; retry shortly", r.From.Name, KeyServerRate(k.p))
	}
	if k.env.Sharded() {
		if !k.enterMerge(r.From.Name) {
			k.refusals.WithLabelValues("merging").Inc()
			return protocol.Errorf(protocol.CodeUnavailable, "%s has %d queries waiting for the other shards at %s, its share; retry shortly", r.From.Name, mergeShare(k.p), k.env.Member())
		}
		defer k.leaveMerge(r.From.Name)
	}
	best, top, err := k.decide(r.Stream, q)
	if err == nil && top != math.MinInt {
		k.stats.Observe(top)
	}
	if err != nil {
		var over *passError
		if errors.As(err, &over) {
			// The count stays here: told to the local server (and so to
			// devices) it would measure how many rows a probe matches, and
			// for crafted ciphertexts how many coefficients decrypt high.
			k.refusals.WithLabelValues("pass_limit").Inc()
			k.env.Log.Warn("refused a query in which more live rows pass the threshold than an honest query can (crafted ciphertexts, or more enrollments of one person than the limit)",
				"from", r.From.Name, "passing", over.n, "live_rows", over.live, "limit", over.limit)
			return protocol.Errorf(protocol.CodeBadRequest, "%s", Refused)
		}
		return engine.AsError(err, protocol.CodeBadRequest)
	}
	res := &protocol.HEResult{Rows: make([]uint32, len(best))}
	for i, m := range best {
		res.Rows[i] = uint32(m.Row)
	}
	if k.env.Sharded() {
		// The shard's best rows take their places among every shard's:
		// the key server's coordinator ranks them, as one key server
		// ranks its rows.
		scores := make([]int32, len(best))
		for i, m := range best {
			scores[i] = int32(m.Score)
		}
		ranks, err := merge.MergeRanks(ctx, k.env, mergeID(r.From.Name, q.Query), int(q.TopK), scores)
		if err != nil {
			return engine.AsError(err, protocol.CodeUnavailable)
		}
		// Only the rows that made the merged answer go back: the local
		// server learns the ids it is answered, not the other rows of its
		// shard that passed.
		kept := res.Rows[:0]
		for i, r := range ranks {
			if r != protocol.NoRank {
				kept, res.Ranks = append(kept, res.Rows[i]), append(res.Ranks, r)
			}
		}
		res.Rows = kept
	}
	return res
}

// mergeID names a local server's sharded query at the key server's merge:
// its coordinator's query id under the local server's name, so that the
// shards of one local server never join a merge of another's (which would
// answer both with ranks among the other's scores), whatever ids they send.
func mergeID(from string, qid [16]byte) [16]byte {
	h := sha256.New()
	h.Write([]byte("idface he merge\x00"))
	h.Write([]byte(config.MemberOf(from)))
	h.Write([]byte{0})
	h.Write(qid[:])
	var id [16]byte
	copy(id[:], h.Sum(nil))
	return id
}

// mergeShare is how many sharded queries of one local server a key
// server shard holds at its coordinator's merge at once: the merger's
// table (merge.MaxQueries) shared among the local servers, and each one's
// share among the S key server shards, since a local server may leave
// queries incomplete at every shard (different ids to each). So one
// local server holds at most MaxQueries/mu slots of the merger's table
// and of its stream budget for the key server's shards.
func mergeShare(p *config.Params) int {
	return max(4, merge.MaxQueries/(p.Mu()*max(1, p.Shards())))
}

func (k *KeyServer) enterMerge(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.merging[name] >= mergeShare(k.p) {
		return false
	}
	k.merging[name]++
	return true
}

func (k *KeyServer) leaveMerge(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.merging[name]--; k.merging[name] <= 0 {
		delete(k.merging, name)
	}
}

// passError refuses a query in which more live rows pass the threshold
// than an honest query can: ciphertexts crafted to probe the secret key.
type passError struct{ n, live, limit int }

func (e *passError) Error() string { return Refused }

// checkQuery checks a query's header against the cluster's parameters.
func (k *KeyServer) checkQuery(q *protocol.HEQuery) error {
	gr := k.he.GroupRows()
	if int(q.CtBytes) != k.he.CiphertextBytes() {
		return fmt.Errorf("ciphertexts of %d bytes; these parameters use %d", q.CtBytes, k.he.CiphertextBytes())
	}
	if want := (int(q.Rows) + gr - 1) / gr; int(q.Groups) != want {
		return fmt.Errorf("%d groups for %d rows; want %d", q.Groups, q.Rows, want)
	}
	if int(q.TopK) > k.p.MaxTopK() {
		return fmt.Errorf("top %d, the cluster allows %d", q.TopK, k.p.MaxTopK())
	}
	return nil
}

// liveRows reads the query's live-row map and returns it masked by the
// key server's own record (live), that record (own) and its live count.
// Only rows live in the key server's own record count and may be
// returned: deleted and burned slots (whose ciphertexts keep whatever
// contribution they had) never pass, and the limit follows the live rows
// the key server knows of, not the rows the query announces.
func (k *KeyServer) liveRows(s io.Reader, q *protocol.HEQuery) (live, own []uint64, nlive int, err error) {
	// The map grows as its bytes arrive: a local server that announces
	// 2^31 rows and sends less gets no 256 MiB.
	lb, err := network.ReadGrowing(s, nil, q.LiveBytes())
	if err != nil {
		return nil, nil, 0, fmt.Errorf("reading the live rows: %w", err)
	}
	live, err = q.LiveWords(lb)
	if err != nil {
		return nil, nil, 0, err
	}
	k.rowsMu.RLock()
	own = make([]uint64, template.Words(int(q.Rows)))
	copy(own, k.live.Words())
	nlive = k.nlive
	k.rowsMu.RUnlock()
	for i := range live {
		live[i] &= own[i] // a local server behind the key server still masks its deletions
	}
	return live, own, nlive, nil
}

// decide reads the live bitset and every group's (ct+, ct-), decrypts and
// decodes them on two cores, and returns the best live rows whose score
// reaches the threshold, at most TopK, best first (lower row on ties).
func (k *KeyServer) decide(s io.Reader, q *protocol.HEQuery) ([]sharing.Match, int, error) {
	gr := k.he.GroupRows()
	if err := k.checkQuery(q); err != nil {
		return nil, 0, err
	}
	live, own, nlive, err := k.liveRows(s, q)
	if err != nil {
		return nil, 0, err
	}
	threshold := k.p.Threshold()
	limit := KeyServerMaxPass(k.p, nlive)
	var passing atomic.Int64
	type job struct {
		g    int
		pair []byte // ct+ || ct-
	}
	jobs := make(chan job, 2)
	var mu sync.Mutex
	var best []sharing.Match
	top := math.MinInt // the best live score, for the statistics (ScoreStats)
	var firstErr error
	var failed atomic.Bool // after the first bad group nothing more is decrypted or read
	var wg sync.WaitGroup
	for range 2 {
		key := k.key.Copy()
		scores := make([]int, gr)
		wg.Go(func() {
			var local []sharing.Match
			localTop := math.MinInt
			for j := range jobs {
				if failed.Load() {
					continue
				}
				if err := key.Scores(j.pair, scores); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("group %d: %w", j.g, err)
					}
					mu.Unlock()
					failed.Store(true)
					continue
				}
				for r, sc := range scores {
					row := j.g*gr + r
					if row >= int(q.Rows) {
						break
					}
					if sc > localTop && live[row>>6]>>uint(row&63)&1 == 1 { // live here and at the local server
						localTop = sc
					}
					if sc >= threshold && own[row>>6]>>uint(row&63)&1 == 1 {
						passing.Add(1) // live here, whatever the query's live map says
						if live[row>>6]>>uint(row&63)&1 == 1 {
							local = append(local, sharing.Match{Row: row, Score: sc})
						}
					}
				}
				local = sharing.Merge(int(q.TopK), local)
			}
			mu.Lock()
			best = sharing.Merge(int(q.TopK), best, local)
			top = max(top, localTop)
			mu.Unlock()
		})
	}
	var readErr error
	for g := 0; g < int(q.Groups) && !failed.Load(); g++ {
		buf := make([]byte, q.PairBytes())
		if _, err := io.ReadFull(s, buf); err != nil {
			readErr = fmt.Errorf("reading group %d: %w", g, err)
			break
		}
		jobs <- job{g, buf}
	}
	close(jobs)
	wg.Wait()
	if readErr != nil {
		return nil, 0, readErr
	}
	if firstErr != nil {
		return nil, 0, firstErr
	}
	if n := int(passing.Load()); n > limit {
		return nil, 0, &passError{n, nlive, limit}
	}
	return best, top, nil
}
