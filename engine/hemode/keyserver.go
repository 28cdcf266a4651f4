package hemode

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

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
	he  *heidface.Params
	key *heidface.Key
	pk  []byte
}

// NewKeyServer makes the key server's engine around its key pair.
func NewKeyServer(env engine.Env, k *store.HEKey) (*KeyServer, error) {
	p := env.Params
	if ks, ok := p.KeyServer(); !ok || ks.Name != env.Self {
		return nil, fmt.Errorf("hemode: %q is not the key server of this cluster", env.Self)
	}
	return &KeyServer{env: env, p: p, he: p.HE(), key: heidface.NewKey(p.HE(), k.Secret), pk: k.Public}, nil
}

// Routes lists the requests the key server answers: only local servers
// may fetch the key or query.
func (k *KeyServer) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:           {Op: "health", From: engine.Anyone, Handle: k.health},
		protocol.TPublicKeyRequest: {Op: "public_key", From: engine.Servers, Handle: k.localOnly(k.publicKey)},
		protocol.THEQuery:          {Op: "decrypt", From: engine.Servers, Handle: k.localOnly(k.query)},
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
	rows, err := k.decide(r.Stream, r.Msg.(*protocol.HEQuery))
	if err != nil {
		return engine.AsError(err, protocol.CodeBadRequest)
	}
	return &protocol.HEResult{Rows: rows}
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
	live := make([]uint64, template.Words(int(q.Rows)))
	if _, err := io.ReadFull(s, network.WordBytes(live)); err != nil {
		return nil, fmt.Errorf("reading the live rows: %w", err)
	}
	threshold := k.p.Threshold()
	type job struct {
		g      int
		cp, cm []byte
	}
	jobs := make(chan job, 2)
	var mu sync.Mutex
	var best []sharing.Match
	var firstErr error
	var wg sync.WaitGroup
	for range 2 {
		key := k.key.ShallowCopy()
		scores := make([]int, gr)
		wg.Go(func() {
			var local []sharing.Match
			for j := range jobs {
				err := func() error {
					cp, err := p.UnmarshalCiphertext(j.cp)
					if err != nil {
						return err
					}
					cm, err := p.UnmarshalCiphertext(j.cm)
					if err != nil {
						return err
					}
					return key.Scores(cp, cm, scores)
				}()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("group %d: %w", j.g, err)
					}
					mu.Unlock()
					continue
				}
				for r, sc := range scores {
					row := j.g*gr + r
					if row >= int(q.Rows) {
						break
					}
					if sc >= threshold && live[row>>6]>>uint(row&63)&1 == 1 {
						local = append(local, sharing.Match{Row: row, Score: sc})
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
	for g := 0; g < int(q.Groups); g++ {
		buf := make([]byte, 2*ctb)
		if _, err := io.ReadFull(s, buf); err != nil {
			readErr = fmt.Errorf("reading group %d: %w", g, err)
			break
		}
		jobs <- job{g, buf[:ctb], buf[ctb:]}
	}
	close(jobs)
	wg.Wait()
	if readErr != nil {
		return nil, readErr
	}
	if firstErr != nil {
		return nil, firstErr
	}
	out := make([]uint32, 0, len(best))
	for _, m := range best {
		out = append(out, uint32(m.Row))
	}
	return slices.Clip(out), nil
}
