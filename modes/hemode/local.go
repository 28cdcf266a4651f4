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
	"strings"
	"sync"
	"time"

	"github.com/bits-and-blooms/bitset"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/txnbase"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Groups stores the encrypted column groups (heidface.Groups).
type Groups interface {
	// Load reads group g, refusing a file not bound to want and to index
	// g (an error naming the file); a group never written is (nil, zero
	// header, nil).
	Load(g int, want heidface.Binding) (heidface.EncGroup, heidface.GroupHeader, error)
	// Save replaces group g durably under header h.
	Save(g int, h heidface.GroupHeader, grp heidface.EncGroup) error
	// Name names group g's file in messages.
	Name(g int) string
}

// Keys stores a key (heidface.KeyFile); Load fails with
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
	he     heidface.Scheme
	local  heidface.Encryptor // enrollment (under changeMu); identify copies it per worker
	pkHash [32]byte
	keys   string           // the public key file, in messages
	bind   heidface.Binding // what the group files are bound to (set by Start)
	log    engine.Log
	store  Groups
	self   int
	keySrv string

	mu     sync.RWMutex        // guards everything below
	groups []heidface.EncGroup // nil: a group whose slots were all burned
	slots  []int               // per group: slots 0..slots[g]-1 may hold contributions (GroupHeader.Slots)
	// rowMap is the ids of every slot, in the sequencer's order, and the
	// live ids (one segment).
	rowMap  *txnbase.RowMap
	live    *bitset.BitSet // the rows that take part in identification (sent to the key server)
	settled int            // slots covered by decided reservations: identify never looks past them
	seq     uint64         // the last change (decision or deletion) applied here
	// history is the sequencer's every change in order (history[i] is
	// change i+1), to bring a lagging local server up to date.
	history []protocol.Msg
	// auth checks operators' signatures and holds every operator nonce
	// this server logged, so that no signed enrollment or deletion
	// applies twice.
	auth *txnbase.Operators

	changeMu sync.Mutex // one change at a time: slots and change numbers are assigned in order
	pending  *reserve   // participant: prepared, undecided (at most one)
	synced   map[string]bool
	// wake runs the sequencer's background sync at once: a follower that
	// (re)started asked to be brought up to date.
	wake     chan struct{}
	follower // participant: how far behind the sequencer's changes
	tr       *engine.Transformers
	stop     *txnbase.Stop // the log could not be written: refuse everything
	replay   *localReplay
	// passes merges concurrent identifies' sums into one pass over the
	// groups (query.go).
	passes *engine.Batcher[*sumJob, struct{}]
	m      struct {
		txnbase.Counters
		passes, passed prometheus.Counter
	}
}

type localReplay struct {
	pending     map[protocol.TxnID]*reserve
	last        *reserve
	lastDecided bool
	records     int
	key         *keyRecord     // the row log's first record
	auth        *protocol.Auth // the signature of the next reservation or deletion
}

// NewLocal makes local server env.Self: it loads the public key, fetching
// it from the key server on the first start only (and keeping it in
// keys). existing names the server's data files that are already there
// (its row log, group files): when there are any, a missing public key is
// never fetched again, because the key server's current key may be a new
// one that cannot decrypt them; the server refuses to start instead.
// Feed it the row log with Replay, then call Start.
func NewLocal(ctx context.Context, env engine.Env, groups Groups, keys Keys, existing []string) (*Local, error) {
	p := env.Params
	k := p.PartyIndex(env.Self)
	if k < 0 {
		return nil, fmt.Errorf("hemode: %q is not a local server of this cluster", env.Self)
	}
	ks, _ := p.KeyServer()
	l := &Local{env: env, p: p, he: Scheme(p), store: groups, self: k, keySrv: ks.Name,
		synced: map[string]bool{}, wake: make(chan struct{}, 1), tr: engine.NewTransformers(p.Dim(), p.Beta()),
		rowMap: txnbase.NewRowMap(p.ClusterID(), 1), live: bitset.New(0), auth: txnbase.NewOperators(p.OperatorKeys, p.ClusterID()),
		stop: txnbase.NewStop(env, "hemode"), replay: &localReplay{pending: map[protocol.TxnID]*reserve{}}}
	l.keys = "public.key"
	if n, ok := keys.(fmt.Stringer); ok {
		l.keys = n.String()
	}
	pkb, err := l.publicKey(ctx, keys, existing)
	if err != nil {
		return nil, err
	}
	if l.local, err = l.he.NewEncryptor(pkb); err != nil {
		return nil, err
	}
	l.pkHash = heidface.Fingerprint(pkb)
	for _, c := range []struct {
		f    *prometheus.Counter
		name string
		help string
	}{
		{&l.m.passes, "idface_he_passes_total", "Passes over the encrypted groups for identifies (concurrent ones share a pass)."},
		{&l.m.passed, "idface_he_passed_total", "Identifies summed in those passes (over passes: the mean pass)."},
	} {
		*c.f = prometheus.NewCounter(prometheus.CounterOpts{Name: c.name, Help: c.help})
		env.Metrics.MustRegister(*c.f)
	}
	l.m.Counters = txnbase.NewCounters(env.Metrics)
	// A pass starts as soon as none runs; the identifies that arrive while
	// one runs (up to batch_max) share the next.
	bmax, _ := p.Batch()
	l.passes = engine.NewBatcher(bmax, 0, 1, p.Timeouts().Identify, l.sumPass)
	return l, nil
}

// KeyFingerprint is the fingerprint of the public key this local server
// encrypts under (heidface.Fingerprint), known once NewLocal returns:
// what its row log and group files are bound to.
func (l *Local) KeyFingerprint() [32]byte { return l.pkHash }

// publicKey loads the saved public key or, on a first start (no data yet),
// fetches it from the key server (pinned TLS), retrying while the key
// server starts.
func (l *Local) publicKey(ctx context.Context, keys Keys, existing []string) ([]byte, error) {
	b, err := keys.Load(heidface.PublicKeyFile)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || l.env.Net == nil {
		return b, err
	}
	if len(existing) > 0 {
		return nil, fmt.Errorf("hemode: %s is missing, but this local server already has data (%s). It will not fetch the key server's public key again: "+
			"if the key server has made a new key pair since, that key cannot decrypt this database and the key server would accept strangers. "+
			"Restore %s from this server's backup, or copy it from another local server of this cluster (the same file); "+
			"'idface fsck' shows the fingerprint the row log records, and the server checks it at start",
			l.keys, strings.Join(existing[:min(len(existing), 3)], ", ")+more(len(existing)-3), l.keys)
	}
	to := l.p.Timeouts()
	deadline := time.Now().Add(to.KeyFetch)
	for {
		cctx, cancel := context.WithTimeout(ctx, to.KeyFetchTry)
		resp, cerr := rpc.Call(cctx, l.env.Net, l.keySrv, &protocol.PublicKeyRequest{})
		cancel()
		if cerr == nil {
			m, ok := resp.(*protocol.PublicKey)
			if !ok {
				return nil, fmt.Errorf("hemode: key server answered %v", resp.Type())
			}
			if err := l.he.CheckPublicKey(m.Key); err != nil {
				return nil, fmt.Errorf("hemode: public key from the key server: %w", err)
			}
			return m.Key, keys.Save(heidface.PublicKeyFile, m.Key)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("hemode: fetching the public key from %s: %w", l.keySrv, cerr)
		}
		select { // the key server may still be starting
		case <-time.After(to.KeyFetchPause):
		case <-ctx.Done():
			return nil, fmt.Errorf("hemode: fetching the public key from %s: %w", l.keySrv, ctx.Err())
		}
	}
}

// authorized checks that an operator signed op on exactly ids for this
// cluster with a nonce this server never logged (caller holds changeMu).
func (l *Local) authorized(a protocol.Auth, op protocol.OpKind, ids []string) *protocol.Error {
	if perr := l.auth.Signed(a, op, ids, nil); perr != nil {
		return perr
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.auth.Fresh(a, op, len(ids))
}

// more says how many names a list left out.
func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

func (l *Local) sequencer() bool { return l.self == 0 }
func (l *Local) rows() int       { return l.rowMap.Len(0) }

// Replay applies one record of the row log: Reserve takes slots, Decide
// commits them (live) or leaves them burned, Delete tombstones a row.
// Decisions and deletions are the sequencer's numbered changes.
func (l *Local) Replay(en store.Entry) error {
	r := l.replay
	rec, err := decodeRecord(en)
	if err != nil {
		return err
	}
	r.records++
	switch {
	case rec.typ == recKey && r.records == 1:
		r.key = &rec.key
		return nil
	case rec.typ == recKey:
		return fmt.Errorf("hemode: a second public key record in the row log")
	case r.records == 1:
		return fmt.Errorf("hemode: the row log does not start with the public key it is bound to: it was written by an earlier idface. " +
			"This build refuses it (its group files are refused too): run the earlier release to finish with that data, or start a new cluster and enroll again")
	}
	auth := r.auth
	r.auth = nil
	if rec.typ == recAuth {
		r.auth = &rec.auth
		l.auth.Use(rec.auth.Nonce)
		return nil
	}
	if rec.typ != recReserve {
		if rec.seq != l.seq+1 {
			return fmt.Errorf("change %d after change %d", rec.seq, l.seq)
		}
		l.seq = rec.seq
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
		res := r.pending[rec.txn]
		if res == nil {
			return fmt.Errorf("decision on an unknown reservation")
		}
		l.decided(res, rec.commit)
		delete(r.pending, rec.txn)
		if rec.txn == r.last.Txn {
			r.lastDecided = true
		}
		l.history = append(l.history, &protocol.HEDecide{Seq: rec.seq, Txn: rec.txn, Commit: rec.commit, Base: res.Base, N: uint32(len(res.IDs))})
	case recDelete:
		l.remove(rec.id, rec.row)
		d := &protocol.HEDelete{Seq: rec.seq, ID: rec.id, Row: uint32(rec.row)}
		if auth != nil {
			d.Auth = *auth
		}
		l.history = append(l.history, d)
	}
	return nil
}

// decided applies a decision on a reservation (caller holds mu or replays).
func (l *Local) decided(res *reserve, commit bool) {
	if commit {
		l.commit(int(res.Base), res.IDs)
	}
	l.settled = max(l.settled, int(res.Base)+len(res.IDs))
}

// Start finishes recovery with the log open for appending and loads the
// group files. The sequencer decides: an enrollment it never decided is
// aborted (presumed abort, a new change). Every other local server keeps
// an undecided reservation until the sequencer's decision arrives, and
// answers no identification until the sequencer has brought it up to
// date: a deletion it missed would otherwise still be identifiable here.
func (l *Local) Start(log engine.Log) error {
	l.log = log
	r := l.replay
	l.replay = nil
	if err := l.bindLog(log, r.key); err != nil {
		return err
	}
	if last := r.last; last != nil && !r.lastDecided {
		if l.sequencer() {
			if err := txnbase.AbortAtRestart(l.env, log, encodeDecide(l.seq+1, last.Txn, false), func() error {
				l.seq++ // the abort is change seq+1
				l.decided(last, false)
				l.history = append(l.history, &protocol.HEDecide{Seq: l.seq, Txn: last.Txn, Base: last.Base, N: uint32(len(last.IDs))})
				return nil
			}, "burned_slots", len(last.IDs)); err != nil {
				return err
			}
		} else {
			l.pending = r.last
			l.env.Log.Info("waiting for the sequencer's decision on an interrupted enrollment")
		}
	}
	if !l.sequencer() {
		l.history = nil // only the sequencer sends changes
	}
	gr := l.he.GroupRows()
	ng := (l.rows() + gr - 1) / gr
	for g := range ng {
		grp, h, err := l.store.Load(g, l.bind)
		if err != nil {
			return err
		}
		if err := l.checkSlots(g, grp != nil, h.Slots); err != nil {
			return err
		}
		l.groups = append(l.groups, grp) // nil: never written, every slot in it burned so far
		l.slots = append(l.slots, h.Slots)
	}
	fp := l.pkHash
	l.env.Log.Info("encrypted database loaded", "rows", l.rows(), "live", l.rowMap.Live(0), "groups", ng, "changes", l.seq,
		"group_rows", gr, "ciphertext_bytes", l.he.CiphertextBytes(), "public_key", fmt.Sprintf("%x", fp[:8]), "generation", l.bind.Generation)
	return nil
}

// logName names the row log in messages.
func logName(log engine.Log) string {
	if n, ok := log.(interface{ Path() string }); ok {
		return n.Path()
	}
	return "the row log"
}

// bindLog binds a new row log to the public key (its first record), or
// checks that an existing one records this public key, and sets what the
// group files must be bound to.
func (l *Local) bindLog(log engine.Log, key *keyRecord) error {
	if key == nil {
		k := keyRecord{Key: l.pkHash, Generation: Generation}
		if _, err := log.Append(encodeKey(k)); err != nil {
			return err
		}
		key = &k
	}
	if key.Key != l.pkHash {
		return fmt.Errorf("hemode: %s records public key %x (generation %d), but %s holds %x: the public key file was replaced, "+
			"perhaps fetched again from a key server that has made a new key pair since. This database is encrypted under %x; "+
			"queries under another key would decrypt to noise and accept strangers. Restore %s from this server's backup "+
			"(or another local server's copy whose fingerprint is %x: 'idface fsck' shows it). If the key server lost the key pair itself, "+
			"no one can decrypt this database: start a new cluster and enroll again",
			logName(log), key.Key[:8], key.Generation, l.keys, l.pkHash[:8], key.Key[:8], l.keys, key.Key[:8])
	}
	if key.Generation != Generation {
		return fmt.Errorf("hemode: %s is of key generation %d; this build knows generation %d only: use the idface release that wrote it", logName(log), key.Generation, Generation)
	}
	l.bind = heidface.Binding{Cluster: l.p.ClusterID(), Member: l.env.Bound(), Mode: string(config.ModeHE), Key: l.pkHash, Generation: key.Generation}
	return nil
}

// checkSlots compares group g's file (present or not, holding
// contributions in slots 0..slots-1) with the row log: every live row of
// the group must be in the file (else the file is older than the log: a
// stale backup), and the file must not hold slots the log never reserved
// (else the log is older than the file, and those slots would be used
// twice).
func (l *Local) checkSlots(g int, present bool, slots int) error {
	gr := l.he.GroupRows()
	lo := g * gr
	reserved := min(gr, l.rows()-lo)
	liveEnd := 0
	if i, ok := l.lastLive(lo, lo+reserved); ok {
		liveEnd = i - lo + 1
	}
	switch {
	case !present && liveEnd > 0:
		return fmt.Errorf("hemode: %s is missing, but the row log has %d live rows in group %d: restore the file from this server's backup (those rows cannot be identified without it)",
			l.store.Name(g), l.liveBetween(lo, lo+reserved), g)
	case present && slots < liveEnd:
		return fmt.Errorf("hemode: %s holds slots 0..%d of group %d, but the row log has a live row in slot %d: the file is older than the log (a stale backup?) "+
			"and misses rows. Restore the file that goes with this row log (from the same backup), or the log that goes with the file",
			l.store.Name(g), slots-1, g, liveEnd-1)
	case present && slots > reserved:
		return fmt.Errorf("hemode: %s holds contributions up to slot %d of group %d, but the row log reserved only %d slots there: the log is older than the file "+
			"(restored from an older backup?), and new rows would land on slots already used. Restore the row log that goes with the file (from the same backup)",
			l.store.Name(g), slots-1, g, reserved)
	}
	return nil
}

// liveBetween counts the live rows in [lo, hi) (the bitset ends at the
// last live row, which may come before hi).
func (l *Local) liveBetween(lo, hi int) int {
	hi = min(hi, int(l.live.Len()))
	if lo >= hi {
		return 0
	}
	return int(l.live.OnesBetween(uint(lo), uint(hi)))
}

// lastLive is the last live row in [lo, hi).
func (l *Local) lastLive(lo, hi int) (int, bool) {
	for i := hi - 1; i >= lo; i-- {
		if l.live.Test(uint(i)) {
			return i, true
		}
	}
	return 0, false
}

// appendChange logs change l.seq+1 (after the records that go with it)
// and advances l.seq (caller holds mu or recovers).
func (l *Local) appendChange(recs ...store.Record) error {
	if _, err := l.log.Append(recs...); err != nil {
		return err
	}
	l.seq++
	return nil
}

// reserve appends slots for ids (not live yet).
func (l *Local) reserve(ids []string) {
	for _, id := range ids {
		l.rowMap.Reserve(0, id)
	}
}

// commit makes reserved rows base.. live.
func (l *Local) commit(base int, ids []string) {
	for i := range ids {
		l.live.Set(uint(base + i))
		l.rowMap.Commit(rowmap.Ref{Seq: base + i})
	}
}

// remove deletes row r if id is live there.
func (l *Local) remove(id string, r int) {
	if l.rowMap.Remove(rowmap.Ref{Seq: r}, id) {
		l.live.Clear(uint(r))
	}
}

// Inspection is what a local server's row log and group files hold, for
// fsck.
type Inspection struct {
	Rows, Live, Settled int
	Changes             uint64
	Pending             bool
	Groups              int
	// Key is the fingerprint of the public key file; LogKey the one the
	// row log records in its first record, with LogGeneration (nil: the
	// log has no records yet).
	Key           [32]byte
	LogKey        *[32]byte
	LogGeneration uint64
	// Binding is what every group file must be bound to (to the row
	// log's key when it records one).
	Binding heidface.Binding
	// DamagedGroups lists group files that fail their checks (damaged,
	// bound to anything else, stale or missing), with the live rows in
	// each: those rows cannot be identified here.
	DamagedGroups map[int]int
	GroupErrors   []string
}

// Inspect reports what the replayed log and the group files hold (call
// after Replay, instead of Start).
func (l *Local) Inspect() Inspection {
	in := Inspection{Rows: l.rows(), Live: l.rowMap.Live(0), Settled: l.settled, Changes: l.seq, DamagedGroups: map[int]int{}, Key: l.pkHash}
	r := l.replay
	in.Pending = r.last != nil && !r.lastDecided
	in.Binding = heidface.Binding{Cluster: l.p.ClusterID(), Member: l.env.Bound(), Mode: string(config.ModeHE), Key: l.pkHash, Generation: Generation}
	if r.key != nil {
		in.LogKey, in.LogGeneration = &r.key.Key, r.key.Generation
		in.Binding.Key, in.Binding.Generation = r.key.Key, r.key.Generation
	}
	gr := l.he.GroupRows()
	in.Groups = (l.rows() + gr - 1) / gr
	for g := range in.Groups {
		grp, h, err := l.store.Load(g, in.Binding)
		var be *store.FileBindingError
		if err != nil && !errors.As(err, &be) {
			err = fmt.Errorf("%w: restore this server's own file from its backup", err)
		}
		if err == nil {
			err = l.checkSlots(g, grp != nil, h.Slots)
		}
		if err != nil {
			in.DamagedGroups[g] = l.liveBetween(g*gr, (g+1)*gr)
			in.GroupErrors = append(in.GroupErrors, err.Error())
		}
	}
	return in
}
