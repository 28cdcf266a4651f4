package party

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/heidface"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
	"github.com/idface/idface/transport"
)

// HELocal is S_local of IDFace: the public key and an encrypted, packed
// database of column groups (one file per group), and a row map (ids and
// live rows) in its write-ahead log. It never holds the secret key and
// never sees a score.
type HELocal struct {
	cfg    *Config
	name   string
	log    *slog.Logger
	p      *heidface.Params
	local  *heidface.Local
	wal    *wal
	dialer *transport.Dialer

	mu     sync.RWMutex // guards everything below
	groups []*heidface.Group
	seg    segment // ids of every slot (one segment: this server's order)
	ids    *idIndex
	live   []uint64
	nlive  int

	self     int
	enrollMu sync.Mutex        // one enrollment at a time: slots are assigned in order
	pending  *protocol.Reserve // participant: prepared, undecided (at most one)
	hash     [16]byte          // XOR of rowHash over live rows (digest)
	outbox   *outbox           // decisions and deletions not yet acknowledged
	trPool   sync.Pool
	m        metrics
	started  time.Time
}

// OpenHELocal loads the public key (fetching it from the key server on the
// first start), replays the row log and loads the group files.
func OpenHELocal(ctx context.Context, cfg *Config, name string, log *slog.Logger) (*HELocal, error) {
	k := cfg.PartyIndex(name)
	if k < 0 {
		return nil, fmt.Errorf("party %q is not in the cluster config", name)
	}
	me := cfg.Parties[k]
	cert, pin, err := transport.LoadCertificate(cfg.Path(me.Cert), cfg.Path(me.Key))
	if err != nil {
		return nil, err
	}
	if pin != me.Pin {
		return nil, fmt.Errorf("party %s: certificate does not match its pin", name)
	}
	p, err := heidface.NewParams(cfg.Dim, cfg.Alpha, cfg.Beta)
	if err != nil {
		return nil, err
	}
	l := &HELocal{cfg: cfg, name: name, self: k, log: log, p: p, dialer: transport.NewDialer(cert), started: time.Now()}
	l.outbox = newOutbox(cfg.Parties, l.dialer, log)
	l.ids = newIDIndex(func(r rowRef) string { return l.seg.id(r.seq) })
	l.trPool.New = func() any {
		tr, _ := template.NewTransformer(cfg.Dim, cfg.Beta)
		return tr
	}
	dir := l.dataDir()
	if err := os.MkdirAll(filepath.Join(dir, "groups"), 0o700); err != nil {
		return nil, err
	}
	pk, err := l.publicKey(ctx)
	if err != nil {
		return nil, err
	}
	l.local = heidface.NewLocal(p, pk)

	// Replay the row map: Reserve takes slots, Decide commits them (live)
	// or leaves them burned, Delete tombstones a row.
	pending := map[protocol.TxnID]*protocol.Reserve{}
	var last *protocol.Reserve
	var lastCommit, lastDecided bool
	w, cut, err := openWAL(filepath.Join(dir, "rows.wal"), func(b []byte) error {
		m, err := protocol.Decode(b)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *protocol.Reserve:
			if int(m.Base) != len(l.seg.idEnd) {
				return fmt.Errorf("reservation at row %d, log has %d", m.Base, len(l.seg.idEnd))
			}
			l.reserve(m.IDs)
			pending[m.Txn] = m
			last, lastDecided = m, false
		case *protocol.Decide:
			if r := pending[m.Txn]; r != nil && m.Commit {
				l.commit(int(r.Base), r.IDs)
			}
			delete(pending, m.Txn)
			if last != nil && m.Txn == last.Txn {
				lastDecided, lastCommit = true, m.Commit
			}
		case *protocol.Delete:
			ref, ok := l.ids.lookup(m.ID)
			if !ok {
				return fmt.Errorf("deletion of unknown id %q", m.ID)
			}
			l.remove(m.ID, ref.seq)
		default:
			return fmt.Errorf("unexpected %T in the row log", m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.wal = w
	if cut > 0 {
		log.Warn("cut a torn record off the end of the log", "bytes", cut)
	}
	// The sequencer (the first local server) decides: an enrollment it
	// never decided is aborted (presumed abort) and its last decision is
	// sent again to every other local server. A participant keeps its
	// undecided reservation until the sequencer's decision arrives.
	if last != nil {
		if l.self == 0 {
			if !lastDecided {
				if err := l.wal.append(protocol.Marshal(&protocol.Decide{Txn: last.Txn})); err != nil {
					return nil, err
				}
				log.Info("aborted an enrollment left undecided by a crash; its slots stay unused")
			}
			for k := 1; k < cfg.Mu(); k++ {
				l.outbox.q[k] = append(l.outbox.q[k], &protocol.HEDecide{Txn: last.Txn, Commit: lastDecided && lastCommit, Base: last.Base, N: uint32(len(last.IDs))})
			}
		} else if !lastDecided {
			l.pending = last
			log.Info("waiting for the sequencer's decision on an interrupted enrollment")
		}
	}
	ng := (l.rows() + p.GroupRows() - 1) / p.GroupRows()
	for g := 0; g < ng; g++ {
		f, err := os.Open(l.groupPath(g))
		if os.IsNotExist(err) {
			l.groups = append(l.groups, nil) // never written: all its slots burned so far
			continue
		}
		if err != nil {
			return nil, err
		}
		grp, err := heidface.ReadGroup(f, p)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.groupPath(g), err)
		}
		l.groups = append(l.groups, grp)
	}
	log.Info("encrypted database loaded", "rows", l.rows(), "live", l.nlive, "groups", ng,
		"group_rows", p.GroupRows(), "ciphertext_bytes", p.CiphertextBytes(), "took", time.Since(l.started).Round(time.Millisecond))
	return l, nil
}

func (l *HELocal) dataDir() string { return filepath.Join(l.cfg.Dir(), "data", l.name) }
func (l *HELocal) groupPath(g int) string {
	return filepath.Join(l.dataDir(), "groups", fmt.Sprintf("g%06d.ct", g))
}
func (l *HELocal) rows() int { return len(l.seg.idEnd) }

// publicKey loads the saved public key or fetches it from the key server
// (pinned TLS), retrying while the key server starts.
func (l *HELocal) publicKey(ctx context.Context) (*rlwe.PublicKey, error) {
	path := filepath.Join(l.dataDir(), "public.key")
	pk := rlwe.NewPublicKey(l.p.BGV)
	b, err := os.ReadFile(path)
	if err != nil {
		deadline := time.Now().Add(30 * time.Second)
		for {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, _, cerr := call(cctx, l.dialer, *l.cfg.KeyServer, &protocol.PublicKeyRequest{})
			cancel()
			if cerr == nil {
				m, ok := resp.(*protocol.PublicKey)
				if !ok {
					return nil, fmt.Errorf("key server answered %T", resp)
				}
				b = m.Key
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("fetching the public key from %s: %w", l.cfg.KeyServer.Name, cerr)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := pk.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("public key from the key server: %w", err)
		}
		if err := writeFileSync(path, b, 0o644); err != nil {
			return nil, err
		}
		return pk, nil
	}
	if err := pk.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pk, nil
}

// reserve appends slots for ids (not live yet).
func (l *HELocal) reserve(ids []string) {
	for _, id := range ids {
		l.seg.idData = append(l.seg.idData, id...)
		l.seg.idEnd = append(l.seg.idEnd, uint64(len(l.seg.idData)))
	}
	for len(l.live)*64 < len(l.seg.idEnd) {
		l.live = append(l.live, 0)
	}
}

// commit makes reserved rows live.
func (l *HELocal) commit(base int, ids []string) {
	for i, id := range ids {
		r := base + i
		l.live[r>>6] |= 1 << uint(r&63)
		l.ids.insert(id, rowRef{seq: r})
		l.nlive++
		xor16(&l.hash, rowHash(0, r, id))
	}
}

func (l *HELocal) remove(id string, r int) {
	l.live[r>>6] &^= 1 << uint(r&63)
	l.ids.remove(id)
	l.nlive--
	xor16(&l.hash, rowHash(0, r, id))
}

// Serve answers devices until ctx ends.
func (l *HELocal) Serve(ctx context.Context) error {
	me := l.cfg.Parties[l.cfg.PartyIndex(l.name)]
	cert, _, err := transport.LoadCertificate(l.cfg.Path(me.Cert), l.cfg.Path(me.Key))
	if err != nil {
		return err
	}
	ln, err := transport.Listen(me.Addr, cert, l.cfg.Pins(), l.log)
	if err != nil {
		return err
	}
	l.log.Info("serving", "addr", ln.Addr().String(), "role", "local server", "sequencer", l.self == 0)
	go l.outbox.loop(ctx, &l.enrollMu)
	go func() { <-ctx.Done(); ln.Close() }()
	return ln.Serve(ctx, l.handle)
}

// Close releases the log and connections.
func (l *HELocal) Close() error {
	l.dialer.Close()
	return l.wal.close()
}

func (l *HELocal) handle(ctx context.Context, s *transport.Stream) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(l.cfg.Timeout)*4)
	defer cancel()
	s.SetDeadline(time.Now().Add(time.Duration(l.cfg.Timeout) * 4))
	reply := func(m protocol.Msg) { s.WriteFrame(protocol.Marshal(m)) }
	m := readRequest(s)
	if m == nil {
		return
	}
	switch m := m.(type) {
	case *protocol.Health:
		l.mu.RLock()
		g := protocol.Digest{{Rows: uint32(l.rows()), Live: uint32(l.nlive), Hash: l.hash}}
		inDoubt := 0
		if l.pending != nil {
			inDoubt = 1
		}
		l.mu.RUnlock()
		inDoubt += l.outbox.len()
		reply(&protocol.HealthOK{Name: l.name, Mode: "he", Digest: g, InDoubt: uint32(inDoubt)})
	case *protocol.Enroll:
		if l.self != 0 { // the sequencer orders every enrollment
			reply(l.forward(ctx, m))
			return
		}
		reply(l.enroll(ctx, m))
	case *protocol.Prepare:
		if s.Peer.Role != transport.RoleParty || s.Peer.Name != l.cfg.Parties[0].Name || l.self == 0 {
			reply(protocol.Errorf(protocol.CodeForbidden, "only the sequencer %s prepares enrollments", l.cfg.Parties[0].Name))
			return
		}
		reply(l.prepare(m))
	case *protocol.HEDecide:
		if s.Peer.Role != transport.RoleParty || s.Peer.Name != l.cfg.Parties[0].Name || l.self == 0 {
			reply(protocol.Errorf(protocol.CodeForbidden, "only the sequencer decides enrollments"))
			return
		}
		reply(l.onDecide(m))
	case *protocol.Identify:
		start := time.Now()
		resp := l.identify(ctx, m)
		l.m.identifies.Add(1)
		l.m.identifyNanos.Add(int64(time.Since(start)))
		reply(resp)
	case *protocol.Delete:
		switch {
		case s.Peer.Role == transport.RoleParty && s.Peer.Name == l.cfg.Parties[0].Name && l.self != 0:
			reply(l.applyDelete(m)) // the sequencer's broadcast
		case l.self != 0:
			reply(l.forward(ctx, m))
		default:
			reply(l.delete(ctx, m))
		}
	default:
		reply(protocol.Errorf(protocol.CodeBadRequest, "unexpected %T at a local server", m))
	}
}

// forward sends a device's request to the sequencer and relays its answer.
func (l *HELocal) forward(ctx context.Context, m protocol.Msg) protocol.Msg {
	resp, _, err := call(ctx, l.dialer, l.cfg.Parties[0], m)
	if err != nil {
		return asError(err, protocol.CodeUnavailable)
	}
	return resp
}

// enroll runs at the sequencer: it transforms a batch with T_alpha, adds it
// to its own encrypted database, has every other local server do the same
// with its own randomness (Prepare), and commits only if all did ((mu,nu)-
// IDFace: every local server holds its own encryption of the same rows).
// For each group the batch touches, a server encrypts one delta of 2d
// ciphertexts. Slots are reserved in the log first and group files are
// replaced atomically; an abort or a crash burns the slots at every server
// but never reuses one.
func (l *HELocal) enroll(ctx context.Context, m *protocol.Enroll) protocol.Msg {
	if len(m.Items) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty enrollment")
	}
	zs, ids, perr := l.transformBatch(m.Items)
	if perr != nil {
		return perr
	}
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	if err := l.outbox.flush(ctx); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	l.mu.RLock()
	for i, id := range ids {
		if _, dup := l.ids.lookup(id); dup {
			l.mu.RUnlock()
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled (item %d)", id, i)
		}
	}
	base := l.rows()
	l.mu.RUnlock()
	var txn protocol.TxnID
	rand.Read(txn[:])
	var failed []string
	if err := l.addRows(txn, base, ids, zs); err != nil {
		failed = append(failed, fmt.Sprintf("%s: %v", l.name, err))
	}
	var code protocol.Code
	if len(failed) == 0 && l.cfg.Mu() > 1 {
		prep := &protocol.Prepare{Txn: txn, Dim: uint16(l.cfg.Dim), Base: uint32(base)}
		for i, z := range zs {
			prep.Ops = append(prep.Ops, protocol.Op{Kind: protocol.OpPut, Seq: uint32(base + i), ID: ids[i], Plus: z.Plus, Minus: z.Minus})
		}
		for k, err := range l.broadcast(ctx, prep, func(r protocol.Msg) bool { v, ok := r.(*protocol.Vote); return ok && v.Txn == txn }) {
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", l.cfg.Parties[k].Name, err))
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
		if err := l.wal.append(protocol.Marshal(&protocol.Reserve{Txn: txn, Base: uint32(base), IDs: empty})); err != nil {
			l.fatal(err)
		}
		l.reserve(empty)
	}
	if err := l.wal.append(protocol.Marshal(&protocol.Decide{Txn: txn, Commit: commit})); err != nil {
		l.fatal(err)
	}
	if commit {
		l.commit(base, ids)
	}
	l.mu.Unlock()
	d := &protocol.HEDecide{Txn: txn, Commit: commit, Base: uint32(base), N: uint32(len(ids))}
	for k, err := range l.broadcast(ctx, d, func(r protocol.Msg) bool { _, ok := r.(*protocol.DecideOK); return ok }) {
		if err != nil {
			l.outbox.add(k, d)
		}
	}
	if !commit {
		l.m.txnAborts.Add(1)
		if code != protocol.CodeDuplicate && code != protocol.CodeBadRequest {
			code = protocol.CodeAborted
		}
		return protocol.Errorf(code, "enrollment rolled back at every local server: %s", strings.Join(failed, "; "))
	}
	l.m.enrolled.Add(int64(len(ids)))
	return &protocol.EnrollOK{Count: uint32(len(ids))}
}

// addRows reserves slots base.. for ids in the log, then encrypts and adds
// one delta per group the rows fall in, saving each group file.
func (l *HELocal) addRows(txn protocol.TxnID, base int, ids []string, zs []template.Ternary) error {
	if err := l.wal.append(protocol.Marshal(&protocol.Reserve{Txn: txn, Base: uint32(base), IDs: ids})); err != nil {
		l.fatal(err)
	}
	l.mu.Lock()
	l.reserve(ids)
	l.mu.Unlock()
	gr := l.p.GroupRows()
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
			l.groups[g].Add(l.p, delta)
		}
		l.mu.Unlock()
		if err := l.saveGroup(g); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// prepare runs at a participant: check the sequencer's batch against this
// server's rows, encrypt it with fresh randomness, make it durable, vote.
func (l *HELocal) prepare(m *protocol.Prepare) protocol.Msg {
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	if l.pending != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%s still waits for the decision on an earlier enrollment", l.name)
	}
	if int(m.Dim) != l.cfg.Dim {
		return protocol.Errorf(protocol.CodeBadRequest, "dimension %d, cluster uses %d", m.Dim, l.cfg.Dim)
	}
	l.mu.RLock()
	base := l.rows()
	l.mu.RUnlock()
	if int(m.Base) != base {
		return protocol.Errorf(protocol.CodeInconsistent, "%s has %d rows, the sequencer built on %d", l.name, base, m.Base)
	}
	ids := make([]string, len(m.Ops))
	zs := make([]template.Ternary, len(m.Ops))
	seen := map[string]bool{}
	for i, op := range m.Ops {
		if op.Kind != protocol.OpPut || int(op.Seq) != base+i {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d is not the put of row %d", i, base+i)
		}
		if err := CheckID(op.ID); err != nil || seen[op.ID] {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d: bad or repeated id", i)
		}
		seen[op.ID] = true
		l.mu.RLock()
		_, dup := l.ids.lookup(op.ID)
		l.mu.RUnlock()
		if dup {
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled at %s", op.ID, l.name)
		}
		zs[i] = template.Ternary{Dim: l.cfg.Dim, Plus: op.Plus, Minus: op.Minus}
		if err := zs[i].Validate(l.cfg.Alpha); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d: %v", i, err)
		}
		ids[i] = op.ID
	}
	r := &protocol.Reserve{Txn: m.Txn, Base: m.Base, IDs: ids}
	l.pending = r
	if err := l.addRows(m.Txn, base, ids, zs); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%s: %v", l.name, err)
	}
	return &protocol.Vote{Txn: m.Txn}
}

// onDecide applies the sequencer's decision; idempotent.
func (l *HELocal) onDecide(m *protocol.HEDecide) protocol.Msg {
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	rows, base, end := l.rows(), int(m.Base), int(m.Base)+int(m.N)
	if p := l.pending; p != nil && p.Txn == m.Txn {
		if err := l.wal.append(protocol.Marshal(&protocol.Decide{Txn: m.Txn, Commit: m.Commit})); err != nil {
			l.fatal(err)
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
		for _, rec := range []protocol.Msg{&protocol.Reserve{Txn: m.Txn, Base: m.Base, IDs: empty}, &protocol.Decide{Txn: m.Txn}} {
			if err := l.wal.append(protocol.Marshal(rec)); err != nil {
				l.fatal(err)
			}
		}
		l.reserve(empty)
		return &protocol.DecideOK{}
	}
	return protocol.Errorf(protocol.CodeInconsistent, "%s has %d rows; cannot apply a decision on rows %d..%d", l.name, rows, base, end-1)
}

// broadcast sends m to every other local server in parallel; ok checks
// the reply. It returns the errors by server.
func (l *HELocal) broadcast(ctx context.Context, m protocol.Msg, ok func(protocol.Msg) bool) []error {
	errs := make([]error, l.cfg.Mu())
	var wg sync.WaitGroup
	for k := range l.cfg.Parties {
		if k == l.self {
			continue
		}
		wg.Go(func() {
			resp, _, err := call(ctx, l.dialer, l.cfg.Parties[k], m)
			if err == nil && !ok(resp) {
				err = fmt.Errorf("unexpected answer %T", resp)
			}
			errs[k] = err
		})
	}
	wg.Wait()
	return errs
}

// transformBatch validates ids and templates and applies T_alpha on all
// cores; the float templates are dropped afterwards.
func (l *HELocal) transformBatch(items []protocol.Item) ([]template.Ternary, []string, *protocol.Error) {
	ids := make([]string, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if err := CheckID(it.ID); err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeBadRequest, "item %d: %v", i, err)
		}
		if seen[it.ID] {
			return nil, nil, protocol.Errorf(protocol.CodeDuplicate, "id %q appears twice in the batch", it.ID)
		}
		seen[it.ID] = true
		ids[i] = it.ID
	}
	zs := make([]template.Ternary, len(items))
	workers := max(min(runtime.GOMAXPROCS(0), len(items)/64), 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tr, err := template.NewTransformer(l.cfg.Dim, l.cfg.Alpha)
			if err != nil {
				errs[w] = err
				return
			}
			for i := len(items) * w / workers; i < len(items)*(w+1)/workers; i++ {
				zs[i] = template.NewTernary(l.cfg.Dim)
				if err := template.Apply(tr, items[i].Template, zs[i]); err != nil {
					errs[w] = fmt.Errorf("item %d (%s): %w", i, items[i].ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	return zs, ids, nil
}

// saveGroup replaces group g's file atomically (write, fsync, rename).
func (l *HELocal) saveGroup(g int) error {
	path := l.groupPath(g)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	l.mu.RLock()
	err = heidface.WriteGroup(f, l.p, l.groups[g])
	l.mu.RUnlock()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// delete runs at the sequencer: tombstone the row here, then at every
// other local server; a server that is down gets it when it returns.
func (l *HELocal) delete(ctx context.Context, m *protocol.Delete) protocol.Msg {
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	if resp := l.applyDelete(m); resp.Type() != protocol.TDeleteOK {
		return resp
	}
	l.m.deleted.Add(1)
	var missing []string
	for k, err := range l.broadcast(ctx, m, func(r protocol.Msg) bool { _, ok := r.(*protocol.DeleteOK); return ok }) {
		if err != nil {
			l.outbox.add(k, m)
			missing = append(missing, l.cfg.Parties[k].Name)
		}
	}
	if len(missing) > 0 {
		return protocol.Errorf(protocol.CodeUnavailable, "deleted, but not yet at %s: the deletion is retried until they acknowledge it", strings.Join(missing, ", "))
	}
	return &protocol.DeleteOK{}
}

// applyDelete tombstones an id here. At a participant an unknown id is
// already deleted (the sequencer checked it), so it succeeds.
func (l *HELocal) applyDelete(m *protocol.Delete) protocol.Msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	ref, ok := l.ids.lookup(m.ID)
	if !ok {
		if l.self != 0 {
			return &protocol.DeleteOK{}
		}
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	if err := l.wal.append(protocol.Marshal(m)); err != nil {
		l.fatal(err)
	}
	l.remove(m.ID, ref.seq)
	return &protocol.DeleteOK{}
}

// identify computes IP_DB for every group on all cores and streams the
// (ct+, ct-) pairs to the key server while later groups are still being
// summed; the key server answers with row indices only.
func (l *HELocal) identify(ctx context.Context, m *protocol.Identify) protocol.Msg {
	tr := l.trPool.Get().(*template.Transformer)
	y := template.NewTernary(l.cfg.Dim)
	err := template.Apply(tr, m.Template, y)
	l.trPool.Put(tr)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	l.mu.RLock()
	rows := l.rows()
	groups := append([]*heidface.Group(nil), l.groups...)
	live := append([]uint64(nil), l.live[:template.Words(rows)]...)
	l.mu.RUnlock()
	resp := &protocol.IdentifyOK{ScoresHidden: true, Alpha: uint16(l.cfg.Alpha), Beta: uint16(l.cfg.Beta)}
	if l.nliveSnapshot() == 0 {
		return resp
	}
	s, err := l.dialer.Open(ctx, l.cfg.KeyServer.Name, l.cfg.KeyServer.Addr, l.cfg.KeyServer.Pin)
	if err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	defer s.Finish()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	ctb := l.p.CiphertextBytes()
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
			cp := rlwe.NewCiphertext(l.p.BGV, 1, l.p.BGV.MaxLevel())
			cm := rlwe.NewCiphertext(l.p.BGV, 1, l.p.BGV.MaxLevel())
			for g := range next {
				if wctx.Err() != nil {
					results[g] <- out{err: wctx.Err()}
					continue
				}
				var err error
				if groups[g] == nil { // every slot burned: an encryption of zero would do, but nothing is live
					err = l.zeroPair(cp, cm)
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
	b, err := s.ReadFrame(protocol.MaxFrame)
	if err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "key server: %v", err)
	}
	rm, err := protocol.Decode(b)
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "key server: %v", err)
	}
	if e, ok := rm.(*protocol.Error); ok {
		return e
	}
	res, ok := rm.(*protocol.HEResult)
	if !ok {
		return protocol.Errorf(protocol.CodeInternal, "key server answered %T", rm)
	}
	l.mu.RLock()
	for _, r := range res.Rows {
		if int(r) >= rows {
			l.mu.RUnlock()
			return protocol.Errorf(protocol.CodeInternal, "key server returned row %d of %d", r, rows)
		}
		resp.Candidates = append(resp.Candidates, protocol.Candidate{ID: l.seg.id(int(r))})
	}
	l.mu.RUnlock()
	resp.Accepted = len(resp.Candidates) > 0
	resp.BytesSent, resp.BytesRecv = uint64(s.Sent()), uint64(s.Received())
	l.m.bytesOut.Add(s.Sent())
	l.m.bytesIn.Add(s.Received())
	return resp
}

func (l *HELocal) nliveSnapshot() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.nlive
}

// zeroPair encrypts zero twice: the pair for a group whose file was never
// written because every slot in it was burned by a crash.
func (l *HELocal) zeroPair(cp, cm *rlwe.Ciphertext) error {
	if err := l.local.EncryptZero(cp); err != nil {
		return err
	}
	return l.local.EncryptZero(cm)
}

func (l *HELocal) fatal(err error) {
	l.log.Error("cannot write the log; stopping", "err", err)
	os.Exit(3)
}
