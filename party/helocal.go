package party

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
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

	enrollMu sync.Mutex // one enrollment at a time: slots are assigned in order
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
	l := &HELocal{cfg: cfg, name: name, log: log, p: p, dialer: transport.NewDialer(cert), started: time.Now()}
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
		case *protocol.Decide:
			if r := pending[m.Txn]; r != nil && m.Commit {
				l.commit(int(r.Base), r.IDs)
			}
			delete(pending, m.Txn)
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
	if len(pending) > 0 {
		log.Info("enrollments interrupted by a crash left their slots unused", "batches", len(pending))
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
	}
}

func (l *HELocal) remove(id string, r int) {
	l.live[r>>6] &^= 1 << uint(r&63)
	l.ids.remove(id)
	l.nlive--
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
	l.log.Info("serving", "addr", ln.Addr().String(), "role", "local server")
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
	b, err := s.ReadFrame(protocol.MaxFrame)
	if err != nil {
		reply(protocol.Errorf(protocol.CodeBadRequest, "reading the request: %v", err))
		return
	}
	m, err := protocol.Decode(b)
	if err != nil {
		reply(protocol.Errorf(protocol.CodeBadRequest, "%v", err))
		return
	}
	switch m := m.(type) {
	case *protocol.Health:
		l.mu.RLock()
		g := protocol.Digest{{Rows: uint32(l.rows()), Live: uint32(l.nlive)}}
		l.mu.RUnlock()
		reply(&protocol.HealthOK{Name: l.name, Mode: "he", Digest: g})
	case *protocol.Enroll:
		reply(l.enroll(m))
	case *protocol.Identify:
		start := time.Now()
		resp := l.identify(ctx, m)
		l.m.identifies.Add(1)
		l.m.identifyNanos.Add(int64(time.Since(start)))
		reply(resp)
	case *protocol.Delete:
		reply(l.delete(m))
	default:
		reply(protocol.Errorf(protocol.CodeBadRequest, "unexpected %T at a local server", m))
	}
}

// enroll transforms a batch with T_alpha and adds it to the encrypted
// database: for every group the batch touches, one delta of 2d fresh
// encryptions. Slots are reserved in the log first, the group files are
// replaced atomically, and the commit record makes the rows live; a crash in
// between burns the slots but never reuses one.
func (l *HELocal) enroll(m *protocol.Enroll) protocol.Msg {
	if len(m.Items) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty enrollment")
	}
	zs, ids, perr := l.transformBatch(m.Items)
	if perr != nil {
		return perr
	}
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
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
	if err := l.wal.append(protocol.Marshal(&protocol.Reserve{Txn: txn, Base: uint32(base), IDs: ids})); err != nil {
		l.fatal(err)
	}
	l.mu.Lock()
	l.reserve(ids)
	l.mu.Unlock()

	abort := func(err error) protocol.Msg {
		if werr := l.wal.append(protocol.Marshal(&protocol.Decide{Txn: txn, Commit: false})); werr != nil {
			l.fatal(werr)
		}
		return protocol.Errorf(protocol.CodeAborted, "enrollment rolled back: %v", err)
	}
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
			return abort(err)
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
			return abort(err)
		}
		lo = hi
	}
	if err := l.wal.append(protocol.Marshal(&protocol.Decide{Txn: txn, Commit: true})); err != nil {
		l.fatal(err)
	}
	l.mu.Lock()
	l.commit(base, ids)
	l.mu.Unlock()
	l.m.enrolled.Add(int64(len(ids)))
	return &protocol.EnrollOK{Count: uint32(len(ids))}
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

func (l *HELocal) delete(m *protocol.Delete) protocol.Msg {
	l.enrollMu.Lock()
	defer l.enrollMu.Unlock()
	l.mu.RLock()
	ref, ok := l.ids.lookup(m.ID)
	l.mu.RUnlock()
	if !ok {
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	if err := l.wal.append(protocol.Marshal(m)); err != nil {
		l.fatal(err)
	}
	l.mu.Lock()
	l.remove(m.ID, ref.seq)
	l.mu.Unlock()
	l.m.deleted.Add(1)
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
