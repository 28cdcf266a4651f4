package mpcface

import (
	"context"
	"fmt"
	"strings"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// enroll handles a batch at its entry party (MPCFace.Enroll): validate
// everything, transform with T_alpha, GenShare for mu parties, then one
// two-phase transaction. The batch is enrolled at every party or at none.
func (e *Engine) enroll(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Enroll)
	if err := engine.CheckItems(m.Items); err != nil {
		return err
	}
	e.st.mu.RLock()
	for i, it := range m.Items {
		if _, dup := e.st.ids.Lookup(it.ID); dup {
			e.st.mu.RUnlock()
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled (item %d)", it.ID, i)
		}
	}
	e.st.mu.RUnlock()
	ops, err := e.share(m.Items)
	if err != nil {
		return engine.AsError(err, protocol.CodeBadRequest)
	}
	if err := e.runTxn(ctx, ops); err != nil {
		return err
	}
	e.m.enrolled.Add(float64(len(m.Items)))
	return &protocol.EnrollOK{Count: uint32(len(m.Items))}
}

// share transforms and splits a batch on all cores; ops[k] holds party k's
// shares. Seq is filled in by runTxn.
func (e *Engine) share(items []protocol.Item) ([][]protocol.Op, error) {
	mu, d := e.p.Mu(), e.p.Dim()
	ops := make([][]protocol.Op, mu)
	for k := range ops {
		ops[k] = make([]protocol.Op, len(items))
	}
	err := engine.Parallel(len(items), 64, func(lo, hi int) error {
		tr, err := template.NewTransformer(d, e.p.Alpha())
		if err != nil {
			return err
		}
		rnd, err := sharing.NewStream(e.env.Rand) // AES-CTR keyed from crypto/rand
		if err != nil {
			return err
		}
		z := template.NewTernary(d)
		defer func() { clear(z.Plus); clear(z.Minus) }()
		sh := make([]sharing.Share, mu)
		for i := lo; i < hi; i++ {
			if err := template.Apply(tr, items[i].Template, z); err != nil {
				return fmt.Errorf("item %d (%s): %w", i, items[i].ID, err)
			}
			for k := range sh {
				sh[k] = sharing.NewShare(d)
			}
			if err := sharing.GenShareInto(sh, z, rnd); err != nil {
				return err
			}
			for k := range ops {
				ops[k][i] = protocol.Op{Kind: protocol.OpPut, ID: items[i].ID, Plus: sh[k].Plus, Minus: sh[k].Minus}
			}
		}
		return nil
	})
	return ops, err
}

// delete revokes an id. Rows belong to their origin's segment and only the
// origin changes its segment, so a request for another origin's row is
// forwarded there.
func (e *Engine) delete(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Delete)
	e.st.mu.RLock()
	ref, ok := e.st.ids.Lookup(m.ID)
	e.st.mu.RUnlock()
	if !ok {
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	if ref.Seg != e.self {
		if r.From.Role == network.RoleServer {
			return protocol.Errorf(protocol.CodeInconsistent, "id %q belongs to %s, not %s", m.ID, e.p.Party(ref.Seg).Name, e.env.Self)
		}
		resp, err := network.Call(ctx, e.env.Net, e.p.Party(ref.Seg).Name, m)
		if err != nil {
			return engine.AsError(err, protocol.CodeUnavailable)
		}
		return resp
	}
	ops := make([][]protocol.Op, e.p.Mu())
	for k := range ops {
		ops[k] = []protocol.Op{{Kind: protocol.OpDelete, Seq: uint32(ref.Seq), ID: m.ID}}
	}
	if err := e.runTxn(ctx, ops); err != nil {
		return err
	}
	e.m.deleted.Inc()
	return &protocol.DeleteOK{}
}

// runTxn runs one two-phase transaction originated here: log and hold the
// Prepare locally, collect every party's vote, log the decision (the
// commit point), apply it, then tell everyone. It returns nil only if
// every party voted yes, i.e. made the ops durable.
func (e *Engine) runTxn(ctx context.Context, ops [][]protocol.Op) *protocol.Error {
	e.txnMu.Lock()
	defer e.txnMu.Unlock()
	if err := e.outbox.Flush(ctx); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	txn, err := e.env.NewTxnID()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	e.st.mu.Lock()
	base := e.st.segs[e.self].store.Rows()
	preps := make([]*protocol.Prepare, len(ops))
	for k := range ops {
		seq := base
		for i := range ops[k] {
			if ops[k][i].Kind == protocol.OpPut {
				ops[k][i].Seq = uint32(seq)
				seq++
			}
		}
		preps[k] = &protocol.Prepare{Txn: txn, Origin: uint8(e.self), Dim: uint16(e.p.Dim()), Base: uint32(base), Ops: ops[k]}
	}
	if perr := e.st.validate(preps[e.self]); perr != nil {
		e.st.mu.Unlock()
		return perr
	}
	pos, err := e.log.Append(encodePrepare(preps[e.self]))
	if err != nil {
		e.st.mu.Unlock()
		return e.fatal(err)
	}
	e.st.pending[txn] = &pendingTxn{prep: preps[e.self], tail: pos[0].TailOffset}
	e.st.mu.Unlock()

	peers := e.peers()
	idx := make([]int, 0, len(peers)) // party index of each peer
	for k := range e.p.Mu() {
		if k != e.self {
			idx = append(idx, k)
		}
	}
	errs := engine.Broadcast(ctx, e.env.Net, peers, func(i int) protocol.Msg { return preps[idx[i]] }, func(m protocol.Msg) error {
		if v, ok := m.(*protocol.Vote); !ok || v.Txn != txn {
			return fmt.Errorf("answered the prepare with %v", m.Type())
		}
		return nil
	})
	var first *protocol.Error
	var failed []string
	for i, err := range errs {
		if err != nil {
			if first == nil {
				first = engine.AsError(err, protocol.CodeUnavailable)
			}
			failed = append(failed, fmt.Sprintf("%s: %v", peers[i], err))
		}
	}
	d := &protocol.Decide{Txn: txn, Origin: uint8(e.self), Commit: first == nil}
	if perr := e.decide(d); perr != nil {
		return perr
	}
	for i, err := range engine.Broadcast(ctx, e.env.Net, peers, func(int) protocol.Msg { return d }, engine.Expect(protocol.TDecideOK)) {
		if err != nil {
			e.outbox.Add(peers[i], d)
		}
	}
	if first != nil {
		e.m.aborts.Inc()
		code := first.Code
		if code != protocol.CodeDuplicate && code != protocol.CodeUnknownID && code != protocol.CodeBadRequest {
			code = protocol.CodeAborted
		}
		return protocol.Errorf(code, "rolled back at every party: %s", strings.Join(failed, "; "))
	}
	return nil
}

// decide logs a decision on a pending transaction (the commit point at the
// origin, idempotent at the others) and applies it.
func (e *Engine) decide(d *protocol.Decide) *protocol.Error {
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	t := e.st.pending[d.Txn]
	if t == nil {
		return nil
	}
	if _, err := e.log.Append(encodeDecide(d)); err != nil {
		return e.fatal(err)
	}
	delete(e.st.pending, d.Txn)
	if err := e.settle(t, d.Commit, false); err != nil {
		return e.fatal(err)
	}
	return nil
}

// prepare is phase one at a non-origin party: validate, log durably, vote.
// Only the origin party itself may prepare a change of its segment.
func (e *Engine) prepare(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Prepare)
	if int(m.Origin) >= e.p.Mu() || e.p.Party(int(m.Origin)).Name != r.From.Name {
		return protocol.Errorf(protocol.CodeForbidden, "%s may not prepare a transaction of origin %d", r.From.Name, m.Origin)
	}
	if int(m.Origin) == e.self {
		return protocol.Errorf(protocol.CodeBadRequest, "a prepare for my own segment must come from me")
	}
	e.st.mu.Lock()
	defer e.st.mu.Unlock()
	if err := e.st.validate(m); err != nil {
		return err
	}
	pos, err := e.log.Append(encodePrepare(m))
	if err != nil {
		return e.fatal(err)
	}
	e.st.pending[m.Txn] = &pendingTxn{prep: m, tail: pos[0].TailOffset}
	return &protocol.Vote{Txn: m.Txn}
}

// onDecide is phase two at a non-origin party; idempotent. Only the
// transaction's origin may decide it.
func (e *Engine) onDecide(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Decide)
	if int(m.Origin) >= e.p.Mu() || e.p.Party(int(m.Origin)).Name != r.From.Name {
		return protocol.Errorf(protocol.CodeForbidden, "%s may not decide a transaction of origin %d", r.From.Name, m.Origin)
	}
	e.st.mu.RLock()
	t, ok := e.st.pending[m.Txn]
	e.st.mu.RUnlock()
	if !ok {
		return &protocol.DecideOK{}
	}
	if t.prep.Origin != m.Origin {
		return protocol.Errorf(protocol.CodeForbidden, "only the origin decides its transaction")
	}
	if err := e.decide(m); err != nil {
		return err
	}
	return &protocol.DecideOK{}
}
