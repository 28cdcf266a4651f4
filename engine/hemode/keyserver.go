package hemode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// KeyServer is S_key of IDFace: it holds the secret key (never sent
// anywhere), decrypts a local server's inner-product ciphertexts, decodes
// the scores and answers with row indices only.
type KeyServer struct {
	env engine.Env
	p   *config.Params
	he  heidface.Scheme
	key heidface.Decryptor
	pk  []byte
	fp  [32]byte

	mu      sync.Mutex
	buckets map[string]*bucket // per local server
}

// bucket is a token bucket: rate tokens a second, at most 2*rate held.
type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes a token from the local server's bucket.
func (k *KeyServer) allow(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	rate, now := k.p.KeyServerRate(), time.Now()
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
func NewKeyServer(env engine.Env, k *store.HEKey) (*KeyServer, error) {
	p := env.Params
	if ks, ok := p.KeyServer(); !ok || ks.Name != env.Self {
		return nil, fmt.Errorf("hemode: %q is not the key server of this cluster", env.Self)
	}
	key, err := p.HE().NewDecryptor(k.Secret, k.Public)
	if err != nil {
		return nil, err
	}
	return &KeyServer{env: env, p: p, he: p.HE(), key: key, pk: k.Public,
		fp: heidface.Fingerprint(k.Public), buckets: map[string]*bucket{}}, nil
}

// Routes lists the requests the key server answers: only local servers
// may fetch the key or query.
func (k *KeyServer) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:           {Op: "health", From: engine.Anyone, Handle: k.health, Max: engine.Small},
		protocol.TPublicKeyRequest: {Op: "public_key", From: engine.Parties, Handle: k.localOnly(k.publicKey), Max: engine.Small},
		protocol.THEQuery:          {Op: "decrypt", From: engine.Parties, Handle: k.localOnly(k.query), Max: engine.Small, Long: true},
	}
}

func (k *KeyServer) localOnly(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if k.p.PartyIndex(r.From.Name) < 0 {
			return protocol.Errorf(protocol.CodeForbidden, "only local servers may query the key server")
		}
		return h(ctx, r)
	}
}

// Run has nothing to do in the background.
func (k *KeyServer) Run(context.Context) {}

// Stats: the key server keeps no rows.
func (k *KeyServer) Stats() engine.Stats { return engine.Stats{} }

func (k *KeyServer) health(context.Context, engine.Request) protocol.Msg {
	return &protocol.HealthOK{Name: k.env.Self, Mode: "he-key"}
}

func (k *KeyServer) publicKey(context.Context, engine.Request) protocol.Msg {
	return &protocol.PublicKey{Key: k.pk}
}

func (k *KeyServer) query(_ context.Context, r engine.Request) protocol.Msg {
	q := r.Msg.(*protocol.HEQuery)
	if q.Key != k.fp {
		k.env.Log.Warn("refused a query under another public key", "from", r.From.Name, "key", fmt.Sprintf("%x", q.Key[:8]))
		return protocol.Errorf(protocol.CodeInconsistent, "%s encrypts under public key %x, the key server holds %x: the local server's public.key is not this key server's; refusing to decrypt",
			r.From.Name, q.Key[:8], k.fp[:8])
	}
	if !k.allow(r.From.Name) {
		return protocol.Errorf(protocol.CodeUnavailable, "%s exceeds the key server's rate of %.0f queries a second; retry shortly", r.From.Name, k.p.KeyServerRate())
	}
	rows, err := k.decide(r.Stream, q)
	if err != nil {
		var over *passError
		if errors.As(err, &over) {
			k.env.Log.Warn("refused a query in which too many rows pass the threshold", "from", r.From.Name, "passing", over.n, "rows", q.Rows, "limit", over.limit)
		}
		return engine.AsError(err, protocol.CodeBadRequest)
	}
	return &protocol.HEResult{Rows: rows}
}

// passError refuses a query in which more rows pass the threshold than an
// honest query can: ciphertexts crafted to probe the secret key.
type passError struct{ n, limit int }

func (e *passError) Error() string {
	return fmt.Sprintf("%d rows pass the threshold, more than the %d this key server answers: refused (crafted ciphertexts?)", e.n, e.limit)
}

// decide reads the live bitset and every group's (ct+, ct-), decrypts and
// decodes them on two cores, and returns the best live rows whose score
// reaches the threshold, at most TopK, best first (lower row on ties).
func (k *KeyServer) decide(s io.Reader, q *protocol.HEQuery) ([]uint32, error) {
	p := k.he
	gr := p.GroupRows()
	if int(q.CtBytes) != p.CiphertextBytes() {
		return nil, fmt.Errorf("ciphertexts of %d bytes; these parameters use %d", q.CtBytes, p.CiphertextBytes())
	}
	if want := (int(q.Rows) + gr - 1) / gr; int(q.Groups) != want {
		return nil, fmt.Errorf("%d groups for %d rows; want %d", q.Groups, q.Rows, want)
	}
	if int(q.TopK) > k.p.MaxTopK() {
		return nil, fmt.Errorf("top %d, the cluster allows %d", q.TopK, k.p.MaxTopK())
	}
	// The live-row map grows as its bytes arrive: a local server that
	// announces 2^31 rows and sends less gets no 256 MiB.
	lb, err := network.ReadGrowing(s, nil, 8*template.Words(int(q.Rows)))
	if err != nil {
		return nil, fmt.Errorf("reading the live rows: %w", err)
	}
	live := make([]uint64, template.Words(int(q.Rows)))
	copy(network.WordBytes(live), lb)
	threshold := k.p.Threshold()
	limit := k.p.KeyServerMaxPass(int(q.Rows))
	var passing atomic.Int64
	type job struct {
		g    int
		pair []byte // ct+ || ct-
	}
	jobs := make(chan job, 2)
	var mu sync.Mutex
	var best []sharing.Match
	var firstErr error
	var failed atomic.Bool // after the first bad group nothing more is decrypted or read
	var wg sync.WaitGroup
	for range 2 {
		key := k.key.Copy()
		scores := make([]int, gr)
		wg.Go(func() {
			var local []sharing.Match
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
					if sc >= threshold {
						passing.Add(1) // live or not: a deleted row passing is as telling
						if live[row>>6]>>uint(row&63)&1 == 1 {
							local = append(local, sharing.Match{Row: row, Score: sc})
						}
					}
				}
				local = sharing.Merge(int(q.TopK), local)
			}
			mu.Lock()
			best = sharing.Merge(int(q.TopK), best, local)
			mu.Unlock()
		})
	}
	ctb := int(q.CtBytes)
	var readErr error
	for g := 0; g < int(q.Groups) && !failed.Load(); g++ {
		buf := make([]byte, 2*ctb)
		if _, err := io.ReadFull(s, buf); err != nil {
			readErr = fmt.Errorf("reading group %d: %w", g, err)
			break
		}
		jobs <- job{g, buf}
	}
	close(jobs)
	wg.Wait()
	if readErr != nil {
		return nil, readErr
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if n := int(passing.Load()); n > limit {
		return nil, &passError{n, limit}
	}
	out := make([]uint32, 0, len(best))
	for _, m := range best {
		out = append(out, uint32(m.Row))
	}
	return slices.Clip(out), nil
}
