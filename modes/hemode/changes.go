package hemode

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/txnbase"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// Changes. The sequencer (the first local server) orders every change to
// the row map: an enrollment's decision and a deletion each get the next
// change number, in its log before anyone is told. Every other local
// server applies changes strictly in that order, each once, and logs them
// with their numbers; the sequencer keeps the history in memory and brings
// a lagging server up to date (HESync) before the next change and in the
// background. So a deletion is never lost or reordered, even when the
// sequencer restarts while a server is down.
//
// The key server follows the same changes (deletions without their ids):
// it keeps its own record of which rows are live, so that only those
// count and can be returned, whatever a local server's query claims.

// Routes lists the requests a local server answers.
func (l *Local) Routes() map[protocol.Type]engine.Route {
	r := map[protocol.Type]engine.Route{
		protocol.THealth:   {Op: "health", From: engine.Anyone, Handle: l.health, Max: protocol.Small, Query: true},
		protocol.TEnroll:   {Op: "enroll", From: engine.Operators, Handle: l.stop.Guard(l.onEnroll), Max: engine.EnrollBound(l.p)},
		protocol.TIdentify: {Op: "identify", From: engine.Clients, Handle: l.stop.Guard(l.identify), Max: engine.IdentifyBound(l.p), Long: true, Query: true},
		protocol.TDelete:   {Op: "delete", From: engine.Operators, Handle: l.stop.Guard(l.onDelete), Max: protocol.Small},
		protocol.TPrepare:  {Op: "prepare", From: engine.Parties, Handle: l.stop.Guard(l.fromSequencer(l.prepare)), Max: engine.PrepareBound(l.p, 16*template.Words(l.p.Dim()))},
		protocol.THEDecide: {Op: "decide", From: engine.Parties, Handle: l.stop.Guard(l.fromSequencer(l.onChange)), Max: protocol.Small},
		protocol.THEDelete: {Op: "decide", From: engine.Parties, Handle: l.stop.Guard(l.fromSequencer(l.onChange)), Max: protocol.Small},
		// The key server, a helper, asks the sequencer to bring it up to date.
		protocol.THESync: {Op: "sync", From: engine.Allow(network.RoleParty, network.RoleHelper), Handle: l.stop.Guard(l.onSync), Max: protocol.Small},
	}
	maps.Copy(r, txnbase.IDRoutes(func(f func(*txnbase.RowMap)) {
		l.mu.RLock()
		defer l.mu.RUnlock()
		f(l.rowMap)
	}))
	if l.env.Sharded() {
		r[protocol.TShardIdentify] = engine.Route{Op: "identify", From: engine.Parties, Handle: l.stop.Guard(l.shardIdentify), Max: engine.ShardIdentifyBound(l.p), Long: true, Query: true}
	}
	return r
}

// fromSequencer admits only the sequencer's messages, at a participant.
func (l *Local) fromSequencer(h engine.Handler) engine.Handler {
	return func(ctx context.Context, r engine.Request) protocol.Msg {
		if r.From.Name != l.p.Party(0).Name || l.sequencer() {
			return protocol.Errorf(protocol.CodeForbidden, "only the sequencer %s orders changes", l.p.Party(0).Name)
		}
		return h(ctx, r)
	}
}

// Run brings lagging local servers up to date (at the sequencer), or asks
// the sequencer to bring this one up to date (at a participant that has
// not caught up since it started), until ctx ends.
func (l *Local) Run(ctx context.Context) {
	if !l.sequencer() {
		l.askSync(ctx, l.env, l.seqNow) // at once: the first tick is OutboxRetry away
	}
	engine.EveryOr(ctx, l.p.Timeouts().OutboxRetry, l.wake, func() {
		if !l.sequencer() {
			if !l.caughtUp.Load() {
				l.askSync(ctx, l.env, l.seqNow)
			}
			return
		}
		if l.lagging() > 0 {
			// Wait for a change in progress rather than skip to the next
			// tick: a restarted key server answers nothing until this
			// runs (a change syncs the local servers only).
			l.changeMu.Lock()
			if ctx.Err() != nil { // stopping: the change in progress was the last
				l.changeMu.Unlock()
				return
			}
			if err := l.syncAll(ctx, l.followers()); err != nil {
				l.env.Log.Debug("local servers or the key server still lag", "err", err)
			} else {
				l.env.Log.Info("every local server and the key server are up to date")
			}
			l.changeMu.Unlock()
		}
	})
}

// lagging counts the other local servers and the key server not known to
// be up to date (at the sequencer).
func (l *Local) lagging() int {
	if !l.sequencer() {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, name := range l.followers() {
		if !l.synced[name] {
			n++
		}
	}
	return n
}

// Stats reports the row map; unsettled counts an undecided reservation,
// a participant that has not caught up, and (at the sequencer) lagging
// servers.
func (l *Local) Stats() engine.Stats {
	s := engine.Stats{Unsettled: l.lagging()}
	if !l.sequencer() && !l.caughtUp.Load() {
		s.Unsettled++
	}
	l.mu.RLock()
	s.Rows, s.Live = l.rows(), l.rowMap.Live(0)
	if l.pending != nil {
		s.Unsettled++
	}
	l.mu.RUnlock()
	return s
}

// health reports the unsettled changes and, to another server only, the
// row map sealed for the two (engine.Env.Health); an operator may ask for
// the comparison with every other local server.
func (l *Local) health(ctx context.Context, r engine.Request) protocol.Msg {
	return l.env.Health(ctx, r, engine.HealthOf{Mode: string(config.ModeHE), Unsettled: l.Stats().Unsettled,
		Digest: l.digest, Peers: l.others()})
}

// digest is the row map: slots, live rows and the set hash of live rows.
func (l *Local) digest() protocol.Digest {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.rowMap.Digest()
}

// others lists the other local servers.
func (l *Local) others() []string { return txnbase.Peers(l.p, l.self) }

// followers lists who follows the sequencer's changes: the other local
// servers and the key server.
func (l *Local) followers() []string { return append(l.others(), l.keySrv) }

// toFollower is change m as follower name receives it: the key server
// gets deletions without the id (it never sees ids).
func (l *Local) toFollower(name string, m protocol.Msg) protocol.Msg {
	if d, ok := m.(*protocol.HEDelete); ok && name == l.keySrv {
		return &protocol.HEDelete{Seq: d.Seq, Row: d.Row}
	}
	return m
}

// forward sends a device's request to the sequencer and relays its answer.
func (l *Local) forward(ctx context.Context, m protocol.Msg) protocol.Msg {
	resp, err := rpc.Call(ctx, l.env.Net, l.p.Party(0).Name, m)
	if err != nil {
		return engine.AsError(err, protocol.CodeUnavailable)
	}
	return resp
}

// syncAll brings the lagging ones of the named followers up to date
// (caller holds changeMu): it learns the server's last change and sends
// the rest in order. It fails naming the servers that could not be
// reached. (A change waits for local servers only: a lagging key server
// returns no row it has not heard of, and is brought up to date in the
// background.)
func (l *Local) syncAll(ctx context.Context, names []string) error {
	var missing []string
	for _, name := range names {
		l.mu.RLock()
		ok, seq := l.synced[name], l.seq
		l.mu.RUnlock()
		if ok {
			continue
		}
		if err := l.syncOne(ctx, name, seq); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		l.mu.Lock()
		l.synced[name] = true
		l.mu.Unlock()
	}
	if len(missing) > 0 {
		return fmt.Errorf("servers have not caught up with earlier changes: %s", strings.Join(missing, ", "))
	}
	return nil
}

func (l *Local) syncOne(ctx context.Context, name string, seq uint64) error {
	cctx, cancel := context.WithTimeout(ctx, l.p.Timeouts().OutboxSend)
	defer cancel()
	resp, err := rpc.Call(cctx, l.env.Net, name, &protocol.HESync{Seq: seq})
	if err != nil {
		return err
	}
	ok, isOK := resp.(*protocol.HESyncOK)
	if !isOK || ok.Seq > seq {
		return fmt.Errorf("answered the sync with change %v of our %d", resp, seq)
	}
	l.mu.RLock()
	missed := append([]protocol.Msg(nil), l.history[ok.Seq:seq]...)
	l.mu.RUnlock()
	for _, m := range missed {
		if _, err := rpc.Call(cctx, l.env.Net, name, l.toFollower(name, m)); err != nil {
			return err
		}
	}
	return nil
}

// change logs and applies the sequencer's next change (caller holds
// changeMu and mu), then remembers it for lagging servers.
func (l *Local) change(m protocol.Msg) *protocol.Error {
	switch m := m.(type) {
	case *protocol.HEDecide:
		m.Seq = l.seq + 1
		if err := l.appendChange(encodeDecide(m.Seq, m.Txn, m.Commit)); err != nil {
			return l.stop.Fatal(err)
		}
	case *protocol.HEDelete:
		m.Seq = l.seq + 1
		if err := l.appendChange(encodeAuth(m.Auth), encodeDelete(m.Seq, m.ID, int(m.Row))); err != nil {
			return l.stop.Fatal(err)
		}
		l.auth.Use(m.Auth.Nonce)
		l.remove(m.ID, int(m.Row))
	}
	l.history = append(l.history, m)
	return nil
}

// announce sends a change to every other local server and the key server;
// those that do not acknowledge are brought up to date later. It returns
// the local servers that did not.
func (l *Local) announce(ctx context.Context, m protocol.Msg) []string {
	var missing []string
	others := l.followers()
	for k, err := range engine.Broadcast(ctx, l.env.Net, others, func(k int) protocol.Msg { return l.toFollower(others[k], m) }, func(r protocol.Msg) error {
		if r.Type() != protocol.TDecideOK {
			return fmt.Errorf("unexpected answer %v", r.Type())
		}
		return nil
	}) {
		if err != nil {
			l.mu.Lock()
			l.synced[others[k]] = false
			l.mu.Unlock()
			l.env.Log.Warn("change not delivered; will retry", "to", others[k], "err", err)
			if others[k] != l.keySrv {
				missing = append(missing, others[k])
			}
		}
	}
	return missing
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
	if max := l.p.MaxEnrollBatch(); len(m.Items) > max {
		return protocol.Errorf(protocol.CodeBadRequest, "a batch of %d templates; this cluster (%s, %d rows a group) takes at most %d in one request: send smaller batches (idface enroll --batch %d)",
			len(m.Items), l.he.Name(), l.he.GroupRows(), max, max)
	}
	ids := m.IDs()
	for _, id := range ids {
		if !l.env.Owns(id) {
			return l.env.NotOwned(id)
		}
	}
	zs, err := engine.TransformBatch(m.Items, l.p.Dim(), l.p.Alpha())
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	if perr := l.authorized(m.Auth, protocol.OpPut, ids); perr != nil {
		return perr
	}
	if err := l.syncAll(ctx, l.others()); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	l.mu.RLock()
	for i, id := range ids {
		if _, dup := l.rowMap.Lookup(id); dup {
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
	if err := l.addRows(txn, base, m.Auth, ids, zs); err != nil {
		if l.stop.Failed() {
			return engine.AsError(err, protocol.CodeUnavailable)
		}
		failed = append(failed, fmt.Sprintf("%s: %v", l.env.Self, err))
	}
	var code protocol.Code
	if len(failed) == 0 && l.p.Mu() > 1 {
		prep := &protocol.Prepare{Txn: txn, Dim: uint16(l.p.Dim()), Base: uint32(base), Auth: m.Auth}
		for i, z := range zs {
			prep.Ops = append(prep.Ops, protocol.Op{Kind: protocol.OpPut, Seq: uint32(base + i), ID: ids[i], Share: ternaryBytes(z)})
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
	res := &reserve{Txn: txn, Base: uint32(base), IDs: ids}
	l.mu.Lock()
	if l.rows() == base { // the local reservation never happened: burn to stay aligned
		res.IDs = make([]string, len(ids))
		if _, err := l.log.Append(encodeReserve(res)); err != nil {
			l.mu.Unlock()
			return l.stop.Fatal(err)
		}
		l.reserve(res.IDs)
	}
	d := &protocol.HEDecide{Txn: txn, Commit: commit, Base: uint32(base), N: uint32(len(ids))}
	if perr := l.change(d); perr != nil {
		l.mu.Unlock()
		return perr
	}
	l.decided(res, commit)
	l.mu.Unlock()
	l.announce(ctx, d)
	if !commit {
		return l.m.Rollback(code, failed)
	}
	l.m.Enrolled.Add(float64(len(ids)))
	return &protocol.EnrollOK{Count: uint32(len(ids))}
}

// addRows reserves slots base.. for ids in the log, then encrypts and adds
// one delta per group the rows fall in, saving each group file.
func (l *Local) addRows(txn protocol.TxnID, base int, auth protocol.Auth, ids []string, zs []template.Ternary) error {
	if _, err := l.log.Append(encodeAuth(auth), encodeReserve(&reserve{Txn: txn, Base: uint32(base), IDs: ids})); err != nil {
		return l.stop.Fatal(err)
	}
	l.mu.Lock()
	l.auth.Use(auth.Nonce)
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
			l.slots = append(l.slots, 0)
		}
		if l.groups[g] == nil {
			l.groups[g] = delta
		} else if err := l.groups[g].Add(delta); err != nil {
			l.mu.Unlock()
			return err
		}
		l.slots[g] = max(l.slots[g], base+hi-g*gr)
		grp, h := l.groups[g], heidface.GroupHeader{Binding: l.bind, Index: g, Slots: l.slots[g]}
		l.mu.Unlock()
		l.mu.RLock() // readers may sum the group meanwhile; writers hold changeMu
		err = l.store.Save(g, h, grp)
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
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
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
		if !l.env.Owns(op.ID) {
			return l.env.NotOwned(op.ID)
		}
		seen[op.ID] = true
		l.mu.RLock()
		_, dup := l.rowMap.Lookup(op.ID)
		l.mu.RUnlock()
		if dup {
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled at %s", op.ID, l.env.Self)
		}
		var err error
		if zs[i], err = ternaryFrom(l.p.Dim(), op.Share); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d: %v", i, err)
		}
		if err := zs[i].Validate(l.p.Alpha()); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "operation %d: %v", i, err)
		}
		ids[i] = op.ID
	}
	if len(ids) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty enrollment")
	}
	if perr := l.authorized(m.Auth, protocol.OpPut, ids); perr != nil {
		return perr
	}
	l.pending = &reserve{Txn: m.Txn, Base: m.Base, IDs: ids}
	if err := l.addRows(m.Txn, base, m.Auth, ids, zs); err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%s: %v", l.env.Self, err)
	}
	return &protocol.Vote{Txn: m.Txn}
}

// onChange applies the sequencer's change number Seq at a participant:
// each exactly once, in order; a change that skips one is refused (the
// sequencer sends the missing ones first).
func (l *Local) onChange(_ context.Context, r engine.Request) protocol.Msg {
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if resp := inOrder(r.Msg, l.seq, l.env.Self); resp != nil {
		return resp
	}
	if perr := l.apply(r.Msg); perr != nil {
		return perr
	}
	l.applied(l.seq)
	return &protocol.DecideOK{}
}

// apply logs and applies the next change at a participant (caller holds
// changeMu and mu).
func (l *Local) apply(m protocol.Msg) *protocol.Error {
	switch m := m.(type) {
	case *protocol.HEDecide:
		p := l.pending
		if p == nil || p.Txn != m.Txn {
			if int(m.Base) != l.rows() || m.Commit {
				return protocol.Errorf(protocol.CodeInconsistent, "%s has %d rows; cannot apply a decision on rows %d..%d", l.env.Self, l.rows(), m.Base, int(m.Base)+int(m.N)-1)
			}
			// It refused or missed the prepare: burn the same slots.
			p = &reserve{Txn: m.Txn, Base: m.Base, IDs: make([]string, m.N)}
			if _, err := l.log.Append(encodeReserve(p)); err != nil {
				return l.stop.Fatal(err)
			}
			l.reserve(p.IDs)
		}
		if err := l.appendChange(encodeDecide(m.Seq, m.Txn, m.Commit)); err != nil {
			return l.stop.Fatal(err)
		}
		l.decided(p, m.Commit)
		l.pending = nil
	case *protocol.HEDelete:
		if perr := l.auth.Check(m.Auth, protocol.OpDelete, []string{m.ID}, nil); perr != nil {
			return perr
		}
		if err := l.appendChange(encodeAuth(m.Auth), encodeDelete(m.Seq, m.ID, int(m.Row))); err != nil {
			return l.stop.Fatal(err)
		}
		l.auth.Use(m.Auth.Nonce)
		l.remove(m.ID, int(m.Row))
	}
	return nil
}

// onSync compares change numbers. At a participant, the sequencer
// announces its last change and learns this server's; the server answers
// identification once it has applied every change up to the sequencer's.
// At the sequencer, a participant or the key server that (re)started asks
// to be brought up to date.
func (l *Local) onSync(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.HESync)
	if l.sequencer() {
		if l.p.PartyIndex(r.From.Name) <= 0 && r.From.Name != l.keySrv {
			return protocol.Errorf(protocol.CodeForbidden, "only local servers and the key server sync with the sequencer")
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if m.Seq < l.seq {
			l.synced[r.From.Name] = false // the background loop sends what it misses, at once
			select {
			case l.wake <- struct{}{}:
			default:
			}
		}
		return &protocol.HESyncOK{Seq: l.seq}
	}
	if r.From.Name != l.p.Party(0).Name {
		return protocol.Errorf(protocol.CodeForbidden, "only the sequencer %s orders changes", l.p.Party(0).Name)
	}
	seq := l.seqNow()
	l.caughtUpTo(m.Seq, seq)
	return &protocol.HESyncOK{Seq: seq}
}

// seqNow is the last change applied here.
func (l *Local) seqNow() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.seq
}

// onDelete runs a deletion at the sequencer, or forwards a device's to it.
func (l *Local) onDelete(ctx context.Context, r engine.Request) protocol.Msg {
	if !l.sequencer() {
		return l.forward(ctx, r.Msg)
	}
	return l.delete(ctx, r.Msg.(*protocol.Delete))
}

// delete runs at the sequencer: the deletion becomes the next change,
// durable here before anyone is told; a server that is down gets it when
// it returns, before it answers any identification.
func (l *Local) delete(ctx context.Context, m *protocol.Delete) protocol.Msg {
	if !l.env.Owns(m.ID) {
		return l.env.NotOwned(m.ID)
	}
	l.changeMu.Lock()
	defer l.changeMu.Unlock()
	if perr := l.authorized(m.Auth, protocol.OpDelete, []string{m.ID}); perr != nil {
		return perr
	}
	l.syncAll(ctx, l.others()) // best effort: the deletion is ordered after what they miss either way
	l.mu.Lock()
	ref, ok := l.rowMap.Lookup(m.ID)
	if !ok {
		l.mu.Unlock()
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	d := &protocol.HEDelete{ID: m.ID, Row: uint32(ref.Seq), Auth: m.Auth}
	perr := l.change(d)
	l.mu.Unlock()
	if perr != nil {
		return perr
	}
	l.m.Deleted.Inc()
	if missing := l.announce(ctx, d); len(missing) > 0 {
		return protocol.Errorf(protocol.CodeUnavailable, "deleted, but not yet at %s: it gets the deletion before it answers again", strings.Join(missing, ", "))
	}
	return &protocol.DeleteOK{}
}

// ternaryBytes is the wire form of a row the sequencer sends the other
// local servers: z+ and z- as little-endian words.
func ternaryBytes(z template.Ternary) []byte {
	return append(append([]byte(nil), network.WordBytes(z.Plus)...), network.WordBytes(z.Minus)...)
}

func ternaryFrom(d int, b []byte) (template.Ternary, error) {
	z := template.NewTernary(d)
	w := len(z.Plus)
	if len(b) != 16*w {
		return z, fmt.Errorf("a row of %d bytes, want %d", len(b), 16*w)
	}
	copy(network.WordBytes(z.Plus), b[:8*w])
	copy(network.WordBytes(z.Minus), b[8*w:])
	return z, nil
}
