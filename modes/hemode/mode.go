package hemode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"sync"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/engine/shard"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// Mode is mode he's engine (modes.List).
var Mode = engine.Mode{
	ModeSpec: config.MustSpec(config.ModeHE),
	Server:   server,
	// Shard s's rows are encrypted under key server shard s's own key
	// pair, with column groups packed by row: no server can move
	// them without the templates.
	NoRebalance: "each shard's rows are encrypted under its own key server shard's key, and no server holds the templates to encrypt them again; " +
		"make a cluster with the new shard count and enroll the gallery into it from the operator's templates",
	Describe: func(p *config.Params) string {
		he := Scheme(p)
		return fmt.Sprintf("encryption %s: %d templates per column group, %d-byte ciphertexts", he.Name(), he.GroupRows(), he.CiphertextBytes())
	},
	IdentifyFormula: func(p *config.Params, rows int) (string, float64) {
		hp := Scheme(p)
		return "2*groups*S_ct", float64(2 * groupsOf(p, rows) * hp.CiphertextBytes())
	},
	// The encrypted database: 2d ciphertexts a group.
	Storage: func(p *config.Params, rows int) float64 {
		return float64(groupsOf(p, rows) * 2 * p.Dim() * Scheme(p).CiphertextBytes())
	},
	// One delta per group: encryption dominates, so one request per
	// batch the server allows.
	EnrollBatch: func(p *config.Params, total int) int { return min(total, Scheme(p).GroupRows(), p.MaxEnrollBatch()) },
	// The paper's IDFace beside 2PCFace and MPCFace; this project's
	// schemes after the other modes.
	CommCost: []engine.CommTable{{Place: 30, Rows: paperRows}, {Place: 60, Rows: schemeRows}},
}

// Paper parameters of IDFace (paper Sec. 4.2 and 5.1, Table comp_res):
// CKKS with N_s = 4096 slots, 50 usable bits and S_ct = 132 KB; Paillier
// with one 2048-bit plaintext per ciphertext and S_ct = 0.5 KB (1 KB =
// 1000 bytes, as the paper).
const (
	ckksSlots    = 4096
	ckksBits     = 50
	ckksCtBytes  = 132_000
	paillierBits = 2048
	paillierCt   = 500
)

// paperRows are the paper's identification costs of IDFace.
func paperRows(s engine.CommSetting) ([]engine.CommRow, error) {
	return []engine.CommRow{
		{Protocol: "idface-ckks-paper", Phase: "identify", Mu: 1, Bits: idfaceBits(s.IDs, ckksSlots, template.PackingFactor(s.Alpha, s.Beta, ckksBits), ckksCtBytes)},
		{Protocol: "idface-paillier-paper", Phase: "identify", Mu: 1, Bits: idfaceBits(s.IDs, 1, template.PackingFactor(s.Alpha, s.Beta, paillierBits), paillierCt)},
	}, nil
}

// schemeRows are the costs with this project's schemes, BGV and Paillier;
// enrolling at one local server sends nothing to another server.
func schemeRows(s engine.CommSetting) ([]engine.CommRow, error) {
	hp, err := heidface.NewParams(s.Dim, s.Alpha, s.Beta)
	if err != nil {
		return nil, err
	}
	pp, err := heidface.NewPaillier(s.Dim, s.Alpha, s.Beta)
	if err != nil {
		return nil, err
	}
	return []engine.CommRow{
		{Protocol: "idface-he", Phase: "enroll", Mu: 1, Bits: 0},
		{Protocol: "idface-he", Phase: "identify", Mu: 1, Bits: idfaceBits(s.IDs, hp.N(), hp.Enc.M, hp.CiphertextBytes()), Run: &engine.CommRun{}},
		{Protocol: "idface-paillier", Phase: "identify", Mu: 1, Bits: idfaceBits(s.IDs, 1, pp.Enc.M, pp.CiphertextBytes()), Run: &engine.CommRun{Scheme: "paillier"}},
	}, nil
}

// idfaceBits is the paper's identification cost: 2*ceil(D/(N_s*m))*S_ct
// plus log2 D bits for the returned index.
func idfaceBits(ids, slots, m, ctBytes int) float64 {
	groups := (ids + slots*m - 1) / (slots * m)
	return float64(2*groups*ctBytes*8) + math.Ceil(math.Log2(float64(ids)))
}

// groupsOf is the column groups of a local server of rows rows: every
// shard packs its own, about rows/S rows each.
func groupsOf(p *config.Params, rows int) int {
	gr, S := Scheme(p).GroupRows(), p.Shards()
	return S * (((rows+S-1)/S + gr - 1) / gr)
}

// schemes are the encryption schemes made so far, by their parameters:
// a scheme's parameters cost milliseconds to make (BGV's ring) and every
// cluster of one process uses the same few.
var schemes = struct {
	sync.Mutex
	m map[schemeKey]heidface.Scheme
}{m: map[schemeKey]heidface.Scheme{}}

type schemeKey struct {
	name             string
	dim, alpha, beta int
}

// Scheme is the cluster's homomorphic encryption with its parameters; nil
// outside mode he (config checks the scheme's name and weights, so
// making it cannot fail in a checked configuration but for a bug, which
// the first caller in the server reports: SchemeOf).
func Scheme(p *config.Params) heidface.Scheme {
	s, _ := SchemeOf(p)
	return s
}

// SchemeOf is Scheme with the error of making it.
func SchemeOf(p *config.Params) (heidface.Scheme, error) {
	cs, ok := p.Scheme()
	if !ok {
		return nil, fmt.Errorf("mode %s has no encryption scheme", p.Mode())
	}
	k := schemeKey{cs.Name, p.Dim(), p.Alpha(), p.Beta()}
	schemes.Lock()
	defer schemes.Unlock()
	if s, ok := schemes.m[k]; ok {
		return s, nil
	}
	s, err := heidface.New(k.name, k.dim, k.alpha, k.beta)
	if err != nil {
		return nil, err
	}
	schemes.m[k] = s
	return s, nil
}

// KeyServerRate is the key server's queries per second per local server:
// key_server_rate, 200 when not set.
func KeyServerRate(p *config.Params) float64 {
	if r := p.Literal().KeyServerRate; r > 0 {
		return r
	}
	return 200
}

// KeyServerMaxPass is the number of rows that may pass the threshold in
// one query when live rows are live (in the key server's own record); the
// key server refuses a query over it. At least 16 rows always pass.
func KeyServerMaxPass(p *config.Params, live int) int {
	return max(16, int(maxPassShare(p)*float64(live)))
}

// maxPassShare is key_server_max_pass or, when not set, 1% of the live
// rows, or 20 times the share of random templates that pass the threshold
// when that is larger (small d or low tau).
func maxPassShare(p *config.Params) float64 {
	if f := p.Literal().KeyServerMaxPass; f > 0 {
		return f
	}
	// Scores of unrelated templates are about N(0, alpha*beta/d).
	sigma := math.Sqrt(float64(p.Alpha()) * float64(p.Beta()) / float64(p.Dim()))
	z := template.ScoreThreshold(p.Tau(), p.Alpha(), p.Beta()) / sigma
	return min(1, max(0.01, 20*0.5*math.Erfc(z/math.Sqrt2)))
}

func server(p *config.Params, name string) engine.Server {
	if k, _ := p.KeyServer(); k.Name == name {
		return engine.Server{Role: "key server",
			Open: func(_ context.Context, env engine.Env, dir string) (engine.Engine, []func() error, error) {
				if env.Coordinating() { // merges its shards' best rows; holds no key
					return merge.NewMerger(env), nil, nil
				}
				he, err := SchemeOf(env.Params)
				if err != nil {
					return nil, nil, err
				}
				key, err := heidface.LoadKeyPair(dir, he, KeyBinding(env.Params), env.Log)
				if err != nil {
					return nil, nil, err
				}
				eng, err := NewKeyServer(env, key)
				return eng, nil, err
			},
			Fsck: func(env engine.Env, dir string, _ engine.FsckOptions, out io.Writer) ([]string, error) {
				return fsckKey(env, dir, out), nil
			},
		}
	}
	return shard.Server(engine.Server{Role: "local server", Log: "rows.log", Kind: store.KindHERows, Open: openLocal, Fsck: fsckLocal},
		func(p *config.Params) shard.Options {
			// The key server's shards keep the merged top K (at most K
			// ids in all; more is refused), and a refusal for passing rows
			// is told as unsharded, without the shard.
			return shard.Options{Mode: "he-coord", Ranked: true, Merged: true, Enroll: protocol.TEnroll, EnrollMax: engine.EnrollBound(p),
				Bare: []string{Refused}}
		})
}

// openLocal opens a local server's group files and row log.
func openLocal(ctx context.Context, env engine.Env, dir string) (engine.Engine, []func() error, error) {
	he, err := SchemeOf(env.Params)
	if err != nil {
		return nil, nil, err
	}
	groups, err := heidface.OpenGroups(filepath.Join(dir, "groups"), he)
	if err != nil {
		return nil, nil, err
	}
	logPath := filepath.Join(dir, "rows.log")
	existing, err := groups.Files() // a local server with data never fetches the key again
	if err != nil {
		return nil, nil, err
	}
	if ok, err := store.Exists(logPath); err != nil {
		return nil, nil, err
	} else if ok {
		existing = append([]string{logPath}, existing...)
	}
	eng, err := NewLocal(ctx, env, groups, PublicKeyFile(env.Params, dir), existing)
	if err != nil {
		return nil, nil, err
	}
	// The row log's key binding is its first record (checked against
	// public.key with a message about the key), not the header.
	return engine.OpenReplayed(env, eng, logPath, engine.Binding(env.Params, env.Bound(), store.KindHERows, [32]byte{}))
}

// fsckKey reports the key server's key pair: intact, a pair, and bound
// to this cluster and key server.
func fsckKey(env engine.Env, dir string, out io.Writer) []string {
	p := env.Params
	bind := KeyBinding(p)
	key, err := heidface.VerifyKeyPair(dir, Scheme(p), bind, env.Log)
	if err != nil {
		return []string{err.Error()}
	}
	fp := heidface.Fingerprint(key.Public)
	fmt.Fprintf(out, "key pair: intact, secret and public key match; both files bound to %s: matches this cluster\n", bind)
	fmt.Fprintf(out, "  public key fingerprint %x (every local server's public.key and row log must name it)\n", fp[:8])
	return nil
}

// fsckLocal reports an HE local server: its public key, row log and group
// files, and what each is bound to.
func fsckLocal(env engine.Env, dir string, _ engine.FsckOptions, out io.Writer) ([]string, error) {
	groups, err := heidface.OpenGroups(filepath.Join(dir, "groups"), Scheme(env.Params))
	if err != nil {
		return nil, err
	}
	var problems []string
	keys := PublicKeyFile(env.Params, dir)
	path := filepath.Join(dir, "rows.log")
	hasLog, err := store.Exists(path)
	if err != nil {
		return nil, err
	}
	l, err := NewLocal(context.Background(), env, groups, keys, nil)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !hasLog {
			return []string{"no public key yet: this local server never started"}, nil
		}
		return []string{fmt.Sprintf("public key: %v (a local server with data never fetches the key again: restore %s from this server's backup, or copy another local server's whose fingerprint matches the one its row log records)", err, keys)}, nil
	}
	fp := l.KeyFingerprint()
	fmt.Fprintf(out, "public key %s: fingerprint %x, bound to %s: matches this cluster\n", keys, fp[:8], keys.Bind)
	if !hasLog {
		return []string{fmt.Sprintf("no log: %s does not exist (a server that never started has none)", path)}, nil
	}
	rep, err := store.ScanAll(path, engine.Binding(env.Params, env.Bound(), store.KindHERows, [32]byte{}), l.Replay)
	if err != nil {
		return engine.BindingProblem(err)
	}
	problems = append(problems, engine.LogReport(path, rep, out)...)
	in := l.Inspect()
	fmt.Fprintf(out, "  slots %d (settled %d), live %d, changes applied %d, undecided enrollment %v, groups %d\n", in.Rows, in.Settled, in.Live, in.Changes, in.Pending, in.Groups)
	switch {
	case in.LogKey == nil:
		fmt.Fprintln(out, "  the row log records no public key yet (the server writes it first when it starts)")
	case *in.LogKey != in.Key:
		problems = append(problems, fmt.Sprintf("%s records public key %x (generation %d), but %s holds %x: the public key file was replaced (perhaps fetched again after the key server made a new key pair). "+
			"Restore %s from this server's backup, or copy another local server's whose fingerprint is %x", path, in.LogKey[:8], in.LogGeneration, keys, in.Key[:8], keys, in.LogKey[:8]))
	default:
		fmt.Fprintf(out, "  the row log is bound to public key %x, generation %d: matches %s\n", in.LogKey[:8], in.LogGeneration, keys)
	}
	fmt.Fprintf(out, "  group files must be bound to %s and their own group number\n", in.Binding)
	if len(in.GroupErrors) == 0 {
		fmt.Fprintf(out, "  group files: %d, every one intact, bound as above and consistent with the row log\n", in.Groups)
	}
	problems = append(problems, in.GroupErrors...)
	for g, live := range in.DamagedGroups {
		fmt.Fprintf(out, "  group %d cannot be used (see below): %d live rows there cannot be identified at this server\n", g, live)
	}
	return problems, nil
}
