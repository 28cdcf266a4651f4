package party

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/heidface"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
	"github.com/idface/idface/transport"
)

// KeyServer is S_key of IDFace: it holds the secret key (generated on its
// first start, kept in its own data directory with mode 0600, never sent
// anywhere), decrypts the local server's inner-product ciphertexts, decodes
// the scores and answers with row indices only.
type KeyServer struct {
	cfg *Config
	log *slog.Logger
	p   *heidface.Params
	key *heidface.Key
	pk  []byte
}

// OpenKeyServer loads or creates the key pair.
func OpenKeyServer(cfg *Config, log *slog.Logger) (*KeyServer, error) {
	p, err := heidface.NewParams(cfg.Dim, cfg.Alpha, cfg.Beta)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.Dir(), "data", cfg.KeyServer.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	skPath, pkPath := filepath.Join(dir, "secret.key"), filepath.Join(dir, "public.key")
	sk := rlwe.NewSecretKey(p.BGV)
	pk := rlwe.NewPublicKey(p.BGV)
	if b, err := os.ReadFile(skPath); err == nil {
		if err := sk.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("%s: %w", skPath, err)
		}
		pb, err := os.ReadFile(pkPath)
		if err != nil {
			return nil, err
		}
		if err := pk.UnmarshalBinary(pb); err != nil {
			return nil, fmt.Errorf("%s: %w", pkPath, err)
		}
		log.Info("key pair loaded")
	} else {
		sk, pk = heidface.GenKeys(p)
		skb, _ := sk.MarshalBinary()
		pkb, _ := pk.MarshalBinary()
		if err := writeFileSync(skPath, skb, 0o600); err != nil {
			return nil, err
		}
		if err := writeFileSync(pkPath, pkb, 0o644); err != nil {
			return nil, err
		}
		log.Info("new key pair generated", "logN", heidface.LogN, "logQ", p.LogQ(), "t_bits", p.SlotBits+1)
	}
	pkb, _ := pk.MarshalBinary()
	return &KeyServer{cfg: cfg, log: log, p: p, key: heidface.NewKey(p, sk), pk: pkb}, nil
}

// Serve answers requests until ctx ends.
func (k *KeyServer) Serve(ctx context.Context) error {
	me := *k.cfg.KeyServer
	cert, _, err := transport.LoadCertificate(k.cfg.Path(me.Cert), k.cfg.Path(me.Key))
	if err != nil {
		return err
	}
	ln, err := transport.Listen(me.Addr, cert, k.cfg.Pins(), k.log)
	if err != nil {
		return err
	}
	k.log.Info("serving", "addr", ln.Addr().String(), "role", "key server")
	go func() { <-ctx.Done(); ln.Close() }()
	return ln.Serve(ctx, k.handle)
}

func (k *KeyServer) handle(ctx context.Context, s *transport.Stream) {
	s.SetDeadline(time.Now().Add(time.Duration(k.cfg.Timeout)))
	reply := func(m protocol.Msg) { s.WriteFrame(protocol.Marshal(m)) }
	m := readRequest(s)
	if m == nil {
		return
	}
	switch m := m.(type) {
	case *protocol.Health:
		reply(&protocol.HealthOK{Name: k.cfg.KeyServer.Name, Mode: "he-key"})
	case *protocol.PublicKeyRequest:
		if s.Peer.Role != transport.RoleParty {
			reply(protocol.Errorf(protocol.CodeForbidden, "only local servers fetch the key"))
			return
		}
		reply(&protocol.PublicKey{Key: k.pk})
	case *protocol.HEQuery:
		if s.Peer.Role != transport.RoleParty {
			reply(protocol.Errorf(protocol.CodeForbidden, "only local servers query the key server"))
			return
		}
		rows, err := k.query(s, m)
		if err != nil {
			reply(asError(err, protocol.CodeBadRequest))
			return
		}
		reply(&protocol.HEResult{Rows: rows})
	default:
		reply(protocol.Errorf(protocol.CodeBadRequest, "unexpected %T at the key server", m))
	}
}

// query reads the live bitset and every group's (ct+, ct-), decrypts and
// decodes them on all cores, and returns the best live rows whose score
// reaches the threshold, at most TopK, best first (lower row on ties).
func (k *KeyServer) query(s *transport.Stream, q *protocol.HEQuery) ([]uint32, error) {
	p := k.p
	gr := p.GroupRows()
	if int(q.CtBytes) != p.CiphertextBytes() {
		return nil, fmt.Errorf("ciphertexts of %d bytes; these parameters use %d", q.CtBytes, p.CiphertextBytes())
	}
	if want := (int(q.Rows) + gr - 1) / gr; int(q.Groups) != want {
		return nil, fmt.Errorf("%d groups for %d rows; want %d", q.Groups, q.Rows, want)
	}
	live := make([]uint64, template.Words(int(q.Rows)))
	if err := s.ReadWords(live); err != nil {
		return nil, fmt.Errorf("reading the live rows: %w", err)
	}
	threshold := k.cfg.Threshold()
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
