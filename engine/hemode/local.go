// Package hemode is the protocol engine of IDFace and (mu,nu)-IDFace
// (paper 4.3 and App. H): local servers that hold the public key and an
// encrypted, packed database of column groups, and a key server that holds
// the secret key and returns row indices only.
//
// Roles. The first local server is the sequencer: it orders every
// enrollment and deletion so that all local servers keep the same slots;
// the others are participants (any local server is an entry for its
// devices and forwards changes to the sequencer). The key server decides:
// it decrypts the inner products, decodes the scores and answers with the
// best rows above the threshold.
//
// The engine holds no socket and opens no file: group files, key files and
// the row log come in through small interfaces.
//
// # Security model
//
// Local servers see ciphertexts (IND-CPA) and ids; the key server sees the
// scores of every row of every query it decrypts (never ids, never
// templates). See docs/SECURITY.md.
package hemode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/rowmap"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// Groups stores the encrypted column groups (internal/store.Groups).
type Groups interface {
	// Load reads group g; a group never written is (nil, nil).
	Load(g int) (*heidface.Group, error)
	// Save replaces group g durably.
	Save(g int, grp *heidface.Group) error
}

// Keys stores a key (internal/store.KeyFile); Load fails with
// fs.ErrNotExist when there is none.
type Keys interface {
	Load(kind heidface.KeyKind) ([]byte, error)
	Save(kind heidface.KeyKind, key []byte) error
}

// Local is a local server (S_local): the public key, the encrypted
// database and the row map (ids and live rows) in its log. It never holds
// the secret key and never sees a score.
type Local struct {
	env    engine.Env
	p      *config.Params
	he     *heidface.Params
	local  *heidface.Local
	pkHash [32]byte
	log    engine.Log
	store  Groups
	self   int
	keySrv string

	mu     sync.RWMutex // guards everything below
	groups []*heidface.Group
	ids    rowmap.IDs // ids of every slot, in this server's (the sequencer's) order
	index  *rowmap.Index
	live   *bitset.BitSet // the rows that take part in identification
	nlive  int
	hash   rowmap.Hash

	enrollMu sync.Mutex // one enrollment at a time: slots are assigned in order
	pending  *reserve   // participant: prepared, undecided (at most one)
	outbox   *engine.Outbox
	tr       *engine.Transformers
	failed   atomic.Bool
	replay   *localReplay
	m        struct{ enrolled, deleted, aborts prometheus.Counter }
}

type localReplay struct {
	pending     map[protocol.TxnID]*reserve
	last        *reserve
	lastDecided bool
	lastCommit  bool
}

// NewLocal makes local server env.Self: it loads the public key, fetching
// it from the key server on the first start (and keeping it in keys).
// Feed it the row log with Replay, then call Start.
func NewLocal(ctx context.Context, env engine.Env, groups Groups, keys Keys) (*Local, error) {
	p := env.Params
	k := p.PartyIndex(env.Self)
	if k < 0 {
		return nil, fmt.Errorf("hemode: %q is not a local server of this cluster", env.Self)
	}
	ks, _ := p.KeyServer()
	l := &Local{env: env, p: p, he: p.HE(), store: groups, self: k, keySrv: ks.Name,
		outbox: engine.NewOutbox(env), tr: engine.NewTransformers(p.Dim(), p.Beta()),
		replay: &localReplay{pending: map[protocol.TxnID]*reserve{}}}
	l.index = rowmap.NewIndex(func(r rowmap.Ref) string { return l.ids.At(r.Seq) })
	l.live = bitset.New(0)
	pkb, err := l.publicKey(ctx, keys)
	if err != nil {
		return nil, err
	}
	pk, err := heidface.UnmarshalPublicKey(l.he, pkb)
	if err != nil {
		return nil, err
	}
	l.local, l.pkHash = heidface.NewLocal(l.he, pk), heidface.Fingerprint(pkb)
	for _, c := range []struct {
		f    *prometheus.Counter
		name string
		help string
	}{
		{&l.m.enrolled, "idface_enrolled_rows_total", "Rows enrolled (at the sequencer)."},
		{&l.m.deleted, "idface_deleted_rows_total", "Rows deleted (at the sequencer)."},
		{&l.m.aborts, "idface_txn_aborts_total", "Enrollments rolled back (at the sequencer)."},
	} {
		*c.f = prometheus.NewCounter(prometheus.CounterOpts{Name: c.name, Help: c.help})
		env.Metrics.MustRegister(*c.f)
	}
	return l, nil
}

// publicKey loads the saved public key or fetches it from the key server
// (pinned TLS), retrying while the key server starts.
func (l *Local) publicKey(ctx context.Context, keys Keys) ([]byte, error) {
	b, err := keys.Load(heidface.PublicKeyFile)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	deadline := time.Now().Add(l.p.Timeouts().KeyFetch)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, cerr := network.Call(cctx, l.env.Net, l.keySrv, &protocol.PublicKeyRequest{})
		cancel()
		if cerr == nil {
			m, ok := resp.(*protocol.PublicKey)
			if !ok {
				return nil, fmt.Errorf("hemode: key server answered %v", resp.Type())
			}
			if _, err := heidface.UnmarshalPublicKey(l.he, m.Key); err != nil {
				return nil, fmt.Errorf("hemode: public key from the key server: %w", err)
			}
			return m.Key, keys.Save(heidface.PublicKeyFile, m.Key)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("hemode: fetching the public key from %s: %w", l.keySrv, cerr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *Local) sequencer() bool { return l.self == 0 }
func (l *Local) rows() int       { return l.ids.Len() }

// Replay applies one record of the row log: Reserve takes slots, Decide
// commits them (live) or leaves them burned, Delete tombstones a row.
func (l *Local) Replay(en store.Entry) error {
	r := l.replay
	rec, err := decodeRecord(en)
	if err != nil {
		return err
	}
	switch rec.typ {
	case recReserve:
		if int(rec.res.Base) != l.rows() {
			return fmt.Errorf("reservation at row %d, log has %d", rec.res.Base, l.rows())
		}
		l.reserve(rec.res.IDs)
		r.pending[rec.res.Txn] = rec.res
		r.last, r.lastDecided = rec.res, false
	case recDecide:
		if res := r.pending[rec.txn]; res != nil && rec.commit {
			l.commit(int(res.Base), res.IDs)
		}
		delete(r.pending, rec.txn)
		if r.last != nil && rec.txn == r.last.Txn {
			r.lastDecided, r.lastCommit = true, rec.commit
		}
	case recDelete:
		ref, ok := l.index.Lookup(rec.id)
		if !ok || ref.Seq != rec.row {
			return fmt.Errorf("deletion of %q at row %d, which is not live there", rec.id, rec.row)
		}
		l.remove(rec.id, ref.Seq)
	}
	return nil
}

// Start finishes recovery with the log open for appending and loads the
// group files. The sequencer decides: an enrollment it never decided is
// aborted (presumed abort) and its last decision is sent again to every
// other local server. A participant keeps its undecided reservation until
// the sequencer's decision arrives.
func (l *Local) Start(log engine.Log) error {
	l.log = log
	r := l.replay
	l.replay = nil
	if r.last != nil {
		if l.sequencer() {
			if !r.lastDecided {
				if _, err := log.Append(encodeDecide(r.last.Txn, false)); err != nil {
					return err
				}
				l.env.Log.Info("aborted an enrollment left undecided by a crash; its slots stay unused")
			}
			for _, m := range l.p.Parties()[1:] {
				l.outbox.Add(m.Name, &protocol.HEDecide{Txn: r.last.Txn, Commit: r.lastDecided && r.lastCommit, Base: r.last.Base, N: uint32(len(r.last.IDs))})
			}
		} else if !r.lastDecided {
			l.pending = r.last
			l.env.Log.Info("waiting for the sequencer's decision on an interrupted enrollment")
		}
	}
	gr := l.he.GroupRows()
	ng := (l.rows() + gr - 1) / gr
	for g := range ng {
		grp, err := l.store.Load(g)
		if err != nil {
			return err
		}
		l.groups = append(l.groups, grp) // nil: never written, every slot in it burned so far
	}
	fp := l.pkHash
	l.env.Log.Info("encrypted database loaded", "rows", l.rows(), "live", l.nlive, "groups", ng,
		"group_rows", gr, "ciphertext_bytes", l.he.CiphertextBytes(), "public_key", fmt.Sprintf("%x", fp[:8]))
	return nil
}

// reserve appends slots for ids (not live yet).
func (l *Local) reserve(ids []string) {
	for _, id := range ids {
		l.ids.Append(id)
	}
}

// commit makes reserved rows live.
func (l *Local) commit(base int, ids []string) {
	cluster := l.p.ClusterID()
	for i, id := range ids {
		r := base + i
		l.live.Set(uint(r))
		l.index.Insert(id, rowmap.Ref{Seq: r})
		l.nlive++
		l.hash.Toggle(rowmap.RowHash(cluster, 0, r, id))
	}
}

func (l *Local) remove(id string, r int) {
	l.live.Clear(uint(r))
	l.index.Remove(id)
	l.nlive--
	l.hash.Toggle(rowmap.RowHash(l.p.ClusterID(), 0, r, id))
}

// Routes lists the requests a local server answers.
func (l *Local) Routes() map[protocol.Type]engine.Route {
	return map[protocol.Type]engine.Route{
		protocol.THealth:   {Op: "health", From: engine.Anyone, Handle: l.health},
		protocol.TEnroll:   {Op: "enroll", From: engine.Operators, Handle: l.guard(l.onEnroll)},
		protocol.TIdentify: {Op: "identify", From: engine.Anyone, Handle: l.guard(l.identify)},
		protocol.TDelete:   {Op: "delete", From: engine.Operators, Handle: l.guard(l.onDelete)},
		protocol.TPrepare:  {Op: "prepare", From: engine.Servers, Handle: l.guard(l.fromSequencer(l.prepare))},
		protocol.THEDecide: {Op: "decide", From: engine.Servers, Handle: l.guard(l.fromSequencer(l.onDecide))},
	}
}

func (l *Local) guard(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if l.failed.Load() {
			return protocol.Errorf(protocol.CodeUnavailable, "%s cannot write its log and is stopping", l.env.Self)
		}
		return h(ctx, r)
	}
}

// fromSequencer admits only the sequencer's messages, at a participant.
func (l *Local) fromSequencer(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if r.From.Name != l.p.Party(0).Name || l.sequencer() {
			return protocol.Errorf(protocol.CodeForbidden, "only the sequencer %s prepares and decides enrollments", l.p.Party(0).Name)
		}
		return h(ctx, r)
	}
}

func (l *Local) fatal(err error) *protocol.Error {
	l.failed.Store(true)
	l.env.Fatal(fmt.Errorf("hemode: cannot write the log: %w", err))
	return protocol.Errorf(protocol.CodeUnavailable, "%s cannot write its log and is stopping", l.env.Self)
}

// Run retries undelivered decisions and deletions until ctx ends.
func (l *Local) Run(ctx context.Context) {
	l.outbox.Run(ctx, &l.enrollMu, l.p.Timeouts().OutboxRetry)
}

// Stats reports the row map.
func (l *Local) Stats() engine.Stats {
	l.mu.RLock()
	s := engine.Stats{Rows: l.rows(), Live: l.nlive}
	if l.pending != nil {
		s.Unsettled = 1
	}
	l.mu.RUnlock()
	s.Unsettled += l.outbox.Len()
	return s
}

func (l *Local) health(context.Context, engine.Request) protocol.Msg {
	s := l.Stats()
	l.mu.RLock()
	defer l.mu.RUnlock()
	g := protocol.Digest{{Rows: uint32(s.Rows), Live: uint32(s.Live), Hash: l.hash}}
	return &protocol.HealthOK{Name: l.env.Self, Mode: string(config.ModeHE), Digest: g, InDoubt: uint32(s.Unsettled)}
}

// others lists the other local servers.
func (l *Local) others() []string {
	var out []string
	for k, m := range l.p.Parties() {
		if k != l.self {
			out = append(out, m.Name)
		}
	}
	return out
}

// forward sends a device's request to the sequencer and relays its answer.
func (l *Local) forward(ctx context.Context, m protocol.Msg) protocol.Msg {
	resp, err := network.Call(ctx, l.env.Net, l.p.Party(0).Name, m)
	if err != nil {
		return engine.AsError(err, protocol.CodeUnavailable)
	}
	return resp
}

func (l *Local) onEnroll(ctx context.Context, r engine.Request) protocol.Msg {
	if !l.sequencer() { // the sequencer orders every enrollment
		return l.forward(ctx, r.Msg)
	}
	return l.enroll(ctx, r.Msg.(*protocol.Enroll))
}

// enroll runs at the sequencer: it transforms a batch with T_alpha, adds
// it to its own encrypted database, has every other local server do the
// same with its own randomness (Prepare), and commits only if all did
// ((mu,nu)-IDFace: every local server holds its own encryption of the same
// rows). For each group the batch touches, a server encrypts one delta of
// 2d ciphertexts. Slots are reserved in the log first and group files are
// replaced atomically; an abort or a crash burns the slots at every server
// but never reuses one.
func (l *Local) enroll(ctx context.Context, m *protocol.Enroll) protocol.Msg {
	if err := engine.CheckItems(m.Items); err != nil {
		return err
	}
	zs, err := engine.TransformBatch(m.Items, l.p.Dim(), l.p.Alpha())
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	ids := make([]string, len(m.Items))
	for i, it := range m.Items {
		ids[i] = it.ID
	}
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	if err := l.outbox.Flush(ctx); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	l.mu.RLock()
	for i, id := range ids {
		if _, dup := l.index.Lookup(id); dup {
			l.mu.RUnlock()
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled (item %d)", id, i)
		}
	}
	base := l.rows()
	l.mu.RUnlock()
	txn, err := l.env.NewTxnID()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	var failed []string
	if err := l.addRows(txn, base, ids, zs); err != nil {
		if l.failed.Load() {
			return engine.AsError(err, protocol.CodeUnavailable)
		}
		failed = append(failed, fmt.Sprintf("%s: %v", l.env.Self, err))
	}
	var code protocol.Code
	if len(failed) == 0 && l.p.Mu() > 1 {
		prep := &protocol.Prepare{Txn: txn, Dim: uint16(l.p.Dim()), Base: uint32(base)}
		for i, z := range zs {
			prep.Ops = append(prep.Ops, protocol.Op{Kind: protocol.OpPut, Seq: uint32(base + i), ID: ids[i], Plus: z.Plus, Minus: z.Minus})
		}
		others := l.others()
		for k, err := range engine.Broadcast(ctx, l.env.Net, others, func(int) protocol.Msg { return prep }, func(r protocol.Msg) error {
			if v, ok := r.(*protocol.Vote); !ok || v.Txn != txn {
				return fmt.Errorf("unexpected answer %v", r.Type())
			}
			return nil
		}) {
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", others[k], err))
				if e, ok := err.(*protocol.Error); ok && code == 0 {
					code = e.Code
				}
			}
		}
	}
	commit := len(failed) == 0
	l.mu.Lock()
	if l.rows() == base { // the local reservation never happened: burn to stay aligned
		empty := make([]string, len(ids))
		if _, err := l.log.Append(encodeReserve(&reserve{Txn: txn, Base: uint32(base), IDs: empty})); err != nil {
			l.mu.Unlock()
			return l.fatal(err)
		}
		l.reserve(empty)
	}
	if _, err := l.log.Append(encodeDecide(txn, commit)); err != nil {
		l.mu.Unlock()
		return l.fatal(err)
	}
	if commit {
		l.commit(base, ids)
	}
	l.mu.Unlock()
	d := &protocol.HEDecide{Txn: txn, Commit: commit, Base: uint32(base), N: uint32(len(ids))}
	others := l.others()
	for k, err := range engine.Broadcast(ctx, l.env.Net, others, func(int) protocol.Msg { return d }, engine.Expect(protocol.TDecideOK)) {
		if err != nil {
			l.outbox.Add(others[k], d)
		}
	}
	if !commit {
		l.m.aborts.Inc()
		if code != protocol.CodeDuplicate && code != protocol.CodeBadRequest {
			code = protocol.CodeAborted
		}
		return protocol.Errorf(code, "enrollment rolled back at every local server: %s", strings.Join(failed, "; "))
	}
	l.m.enrolled.Add(float64(len(ids)))
	return &protocol.EnrollOK{Count: uint32(len(ids))}
}

// addRows reserves slots base.. for ids in the log, then encrypts and adds
// one delta per group the rows fall in, saving each group file.
func (l *Local) addRows(txn protocol.TxnID, base int, ids []string, zs []template.Ternary) error {
	if _, err := l.log.Append(encodeReserve(&reserve{Txn: txn, Base: uint32(base), IDs: ids})); err != nil {
		return l.fatal(err)
	}
	l.mu.Lock()
	l.reserve(ids)
	l.mu.Unlock()
	gr := l.he.GroupRows()
	for lo := 0; lo < len(zs); {
		row := base + lo
		g := row / gr
		hi := min(len(zs), lo+(g+1)*gr-row)
		slots := make([]int, hi-lo)
		for i := range slots {
			slots[i] = (row + i) % gr
		}
		delta, err := l.local.Delta(slots, zs[lo:hi])
		if err != nil {
			return err
		}
		l.mu.Lock()
		for len(l.groups) <= g {
			l.groups = append(l.groups, nil)
		}
		if l.groups[g] == nil {
			l.groups[g] = delta
		} else {
			l.groups[g].Add(l.he, delta)
		}
		grp := l.groups[g]
		l.mu.Unlock()
		l.mu.RLock() // readers may sum the group meanwhile; writers hold enrollMu
		err = l.store.Save(g, grp)
		l.mu.RUnlock()
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// prepare runs at a participant: check the sequencer's batch against this
// server's rows, encrypt it with fresh randomness, make it durable, vote.
func (l *Local) prepare(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Prepare)
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	if l.pending != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%s still waits for the decision on an earlier enrollment", l.env.Self)
	}
	if int(m.Dim) != l.p.Dim() {
		return protocol.Errorf(protocol.CodeBadRequest, "dimension %d, cluster uses %d", m.Dim, l.p.Dim())
	}
	l.mu.RLock()
	base := l.rows()
	l.mu.RUnlock()
	if int(m.Base) != base {
		return protocol.Errorf(protocol.CodeInconsistent, "%s has %d rows, the sequencer built on %d", l.env.Self, base, m.Base)
	}
	ids := make([]string, len(m.Ops))
	zs := make([]template.Ternary, len(m.Ops))
	seen := map[string]bool{}
	for i, op := range m.Ops {
		if op.Kind != protocol.OpPut || int(op.Seq) != base+i {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d is not the put of row %d", i, base+i)
		}
		if err := protocol.CheckID(op.ID); err != nil || seen[op.ID] {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d: bad or repeated id", i)
		}
		seen[op.ID] = true
		l.mu.RLock()
		_, dup := l.index.Lookup(op.ID)
		l.mu.RUnlock()
		if dup {
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled at %s", op.ID, l.env.Self)
		}
		zs[i] = template.Ternary{Dim: l.p.Dim(), Plus: op.Plus, Minus: op.Minus}
		if err := zs[i].Validate(l.p.Alpha()); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d: %v", i, err)
		}
		ids[i] = op.ID
	}
	if len(ids) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty enrollment")
	}
	l.pending = &reserve{Txn: m.Txn, Base: m.Base, IDs: ids}
	if err := l.addRows(m.Txn, base, ids, zs); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%s: %v", l.env.Self, err)
	}
	return &protocol.Vote{Txn: m.Txn}
}

// onDecide applies the sequencer's decision; idempotent.
func (l *Local) onDecide(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.HEDecide)
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	rows, base, end := l.rows(), int(m.Base), int(m.Base)+int(m.N)
	if p := l.pending; p != nil && p.Txn == m.Txn {
		if _, err := l.log.Append(encodeDecide(m.Txn, m.Commit)); err != nil {
			return l.fatal(err)
		}
		if m.Commit {
			l.commit(int(p.Base), p.IDs)
		}
		l.pending = nil
		return &protocol.DecideOK{}
	}
	switch {
	case rows >= end:
		return &protocol.DecideOK{} // already applied
	case rows == base && !m.Commit:
		empty := make([]string, m.N)
		if _, err := l.log.Append(encodeReserve(&reserve{Txn: m.Txn, Base: m.Base, IDs: empty}), encodeDecide(m.Txn, false)); err != nil {
			return l.fatal(err)
		}
		l.reserve(empty)
		return &protocol.DecideOK{}
	}
	return protocol.Errorf(protocol.CodeInconsistent, "%s has %d rows; cannot apply a decision on rows %d..%d", l.env.Self, rows, base, end-1)
}

// onDelete runs a deletion at the sequencer, which tombstones the row and
// then tells every other local server; a participant applies the
// sequencer's deletion or forwards a device's to the sequencer.
func (l *Local) onDelete(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Delete)
	switch {
	case l.sequencer():
		return l.delete(ctx, m)
	case r.From.Name == l.p.Party(0).Name:
		return l.applyDelete(m) // the sequencer's broadcast
	default:
		return l.forward(ctx, m)
	}
}

// delete runs at the sequencer: tombstone the row here, then at every
// other local server; a server that is down gets it when it returns.
func (l *Local) delete(ctx context.Context, m *protocol.Delete) protocol.Msg {
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	if resp := l.applyDelete(m); resp.Type() != protocol.TDeleteOK {
		return resp
	}
	l.m.deleted.Inc()
	var missing []string
	others := l.others()
	for k, err := range engine.Broadcast(ctx, l.env.Net, others, func(int) protocol.Msg { return m }, engine.Expect(protocol.TDeleteOK)) {
		if err != nil {
			l.outbox.Add(others[k], m)
			missing = append(missing, others[k])
		}
	}
	if len(missing) > 0 {
		return protocol.Errorf(protocol.CodeUnavailable, "deleted, but not yet at %s: the deletion is retried until they acknowledge it", strings.Join(missing, ", "))
	}
	return &protocol.DeleteOK{}
}

// applyDelete tombstones an id here. At a participant an unknown id is
// already deleted (the sequencer checked it), so it succeeds.
func (l *Local) applyDelete(m *protocol.Delete) protocol.Msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref, ok := l.index.Lookup(m.ID)
	if !ok {
		if !l.sequencer() {
			return &protocol.DeleteOK{}
		}
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	if _, err := l.log.Append(encodeDelete(m.ID, ref.Seq)); err != nil {
		return l.fatal(err)
	}
	l.remove(m.ID, ref.Seq)
	return &protocol.DeleteOK{}
}

// identify computes IP_DB for every group on all cores and streams the
// (ct+, ct-) pairs to the key server while later groups are still being
// summed; the key server answers with row indices only.
func (l *Local) identify(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Identify)
	y, err := l.tr.Apply(m.Template)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	l.mu.RLock()
	rows, nlive := l.rows(), l.nlive
	groups := append([]*heidface.Group(nil), l.groups...)
	live := make([]uint64, template.Words(rows)) // the key server's copy
	copy(live, l.live.Words())
	l.mu.RUnlock()
	resp := &protocol.IdentifyOK{ScoresHidden: true, Alpha: uint16(l.p.Alpha()), Beta: uint16(l.p.Beta())}
	if nlive == 0 {
		return resp
	}
	s, err := l.env.Net.Open(ctx, l.keySrv)
	if err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	defer s.Finish()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	ctb := l.he.CiphertextBytes()
	q := &protocol.HEQuery{Groups: uint32(len(groups)), Rows: uint32(rows), TopK: m.TopK, CtBytes: uint32(ctb)}
	if err := s.WriteFrame(protocol.Marshal(q)); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "key server: %v", err)
	}
	if err := s.WriteWords(live); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "key server: %v", err)
	}
	// Workers sum groups; the writer sends them in order.
	type out struct {
		b   []byte
		err error
	}
	results := make([]chan out, len(groups))
	for i := range results {
		results[i] = make(chan out, 1)
	}
	next := make(chan int, len(groups))
	for g := range groups {
		next <- g
	}
	close(next)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range runtime.GOMAXPROCS(0) {
		go func() {
			cp := rlwe.NewCiphertext(l.he.BGV, 1, l.he.BGV.MaxLevel())
			cm := rlwe.NewCiphertext(l.he.BGV, 1, l.he.BGV.MaxLevel())
			for g := range next {
				if wctx.Err() != nil {
					results[g] <- out{err: wctx.Err()}
					continue
				}
				var err error
				if groups[g] == nil { // every slot burned: nothing is live there
					if err = l.local.EncryptZero(cp); err == nil {
						err = l.local.EncryptZero(cm)
					}
				} else {
					l.mu.RLock()
					err = l.local.IPDB(groups[g], y, cp, cm)
					l.mu.RUnlock()
				}
				var b []byte
				if err == nil {
					b = make([]byte, 0, 2*ctb)
					var bp, bm []byte
					if bp, err = cp.MarshalBinary(); err == nil {
						if bm, err = cm.MarshalBinary(); err == nil {
							b = append(append(b, bp...), bm...)
						}
					}
				}
				results[g] <- out{b, err}
			}
		}()
	}
	for g := range groups {
		o := <-results[g]
		if o.err != nil {
			return protocol.Errorf(protocol.CodeInternal, "group %d: %v", g, o.err)
		}
		if _, err := s.Write(o.b); err != nil {
			return protocol.Errorf(protocol.CodeUnavailable, "key server: %v", err)
		}
	}
	s.CloseWrite()
	rm, err := network.ReadReply(ctx, s, l.keySrv)
	if err != nil {
		return engine.AsError(err, protocol.CodeUnavailable)
	}
	res, ok := rm.(*protocol.HEResult)
	if !ok {
		return protocol.Errorf(protocol.CodeInternal, "key server answered %v", rm.Type())
	}
	l.mu.RLock()
	for _, row := range res.Rows {
		if int(row) >= rows || live[row>>6]>>(row&63)&1 == 0 {
			l.mu.RUnlock()
			return protocol.Errorf(protocol.CodeInternal, "key server returned row %d, which is not live", row)
		}
		resp.Candidates = append(resp.Candidates, protocol.Candidate{ID: l.ids.At(int(row))})
	}
	l.mu.RUnlock()
	resp.Accepted = len(resp.Candidates) > 0
	resp.BytesSent, resp.BytesRecv = uint64(s.Sent()), uint64(s.Received())
	return resp
}
