package party

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/template"
)

// enroll handles a device's batch at its entry party: validate everything,
// transform with T_alpha, GenShare for mu parties, then one two-phase
// transaction. The batch is enrolled at every party or at none.
func (p *Party) enroll(ctx context.Context, m *protocol.Enroll) protocol.Msg {
	if len(m.Items) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty enrollment")
	}
	seen := make(map[string]bool, len(m.Items))
	p.st.mu.RLock()
	for i, it := range m.Items {
		if err := CheckID(it.ID); err != nil {
			p.st.mu.RUnlock()
			return protocol.Errorf(protocol.CodeBadRequest, "item %d: %v", i, err)
		}
		_, dup := p.st.ids.lookup(it.ID)
		if dup || seen[it.ID] {
			p.st.mu.RUnlock()
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled (item %d)", it.ID, i)
		}
		seen[it.ID] = true
	}
	p.st.mu.RUnlock()
	ops, err := p.share(m.Items)
	if err != nil {
		return asError(err, protocol.CodeBadRequest)
	}
	if err := p.runTxn(ctx, ops); err != nil {
		return err
	}
	p.m.enrolled.Add(int64(len(m.Items)))
	return &protocol.EnrollOK{Count: uint32(len(m.Items))}
}

// share transforms and splits a batch on all cores; ops[k] holds party k's
// shares. Seq is filled in by runTxn.
func (p *Party) share(items []protocol.Item) ([][]protocol.Op, error) {
	mu := p.cfg.Mu()
	ops := make([][]protocol.Op, mu)
	for k := range ops {
		ops[k] = make([]protocol.Op, len(items))
	}
	workers := max(min(runtime.GOMAXPROCS(0), len(items)/64), 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			tr, err := template.NewTransformer(p.cfg.Dim, p.cfg.Alpha)
			if err != nil {
				errs[g] = err
				return
			}
			rnd, err := sharing.NewStream(nil) // AES-CTR keyed from crypto/rand
			if err != nil {
				errs[g] = err
				return
			}
			z := template.NewTernary(p.cfg.Dim)
			sh := make([]sharing.Share, mu)
			for i := len(items) * g / workers; i < len(items)*(g+1)/workers; i++ {
				it := items[i]
				if err := template.Apply(tr, it.Template, z); err != nil {
					errs[g] = fmt.Errorf("item %d (%s): %w", i, it.ID, err)
					return
				}
				for k := range sh {
					sh[k] = sharing.NewShare(p.cfg.Dim)
				}
				if err := sharing.GenShareInto(sh, z, rnd); err != nil {
					errs[g] = err
					return
				}
				for k := range ops {
					ops[k][i] = protocol.Op{Kind: protocol.OpPut, ID: it.ID, Plus: sh[k].Plus, Minus: sh[k].Minus}
				}
			}
			clear(z.Plus)
			clear(z.Minus)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// delete revokes an id. Rows belong to their origin's segment and only the
// origin changes its segment, so a request for another origin's row is
// forwarded there.
func (p *Party) delete(ctx context.Context, m *protocol.Delete, fromParty bool) protocol.Msg {
	p.st.mu.RLock()
	ref, ok := p.st.ids.lookup(m.ID)
	p.st.mu.RUnlock()
	if !ok {
		return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled", m.ID)
	}
	if ref.seg != p.self {
		if fromParty {
			return protocol.Errorf(protocol.CodeInconsistent, "id %q belongs to %s, not %s", m.ID, p.cfg.Parties[ref.seg].Name, p.name)
		}
		resp, _, err := call(ctx, p.dialer, p.cfg.Parties[ref.seg], m)
		if err != nil {
			return asError(err, protocol.CodeUnavailable)
		}
		return resp
	}
	ops := make([][]protocol.Op, p.cfg.Mu())
	for k := range ops {
		ops[k] = []protocol.Op{{Kind: protocol.OpDelete, Seq: uint32(ref.seq), ID: m.ID}}
	}
	if err := p.runTxn(ctx, ops); err != nil {
		return err
	}
	p.m.deleted.Add(1)
	return &protocol.DeleteOK{}
}

// runTxn runs one two-phase transaction originated here: log and apply
// Prepare locally, collect every party's vote, log the decision (the commit
// point), then tell everyone. It returns nil only if every party voted yes,
// i.e. made the ops durable.
func (p *Party) runTxn(ctx context.Context, ops [][]protocol.Op) *protocol.Error {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	if err := p.outbox.flush(ctx); err != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "%v", err)
	}
	var txn protocol.TxnID
	rand.Read(txn[:])
	p.st.mu.Lock()
	base := p.st.segs[p.self].store.Rows()
	preps := make([]*protocol.Prepare, len(ops))
	for k := range ops {
		seq := base
		for i := range ops[k] {
			if ops[k][i].Kind == protocol.OpPut {
				ops[k][i].Seq = uint32(seq)
				seq++
			}
		}
		preps[k] = &protocol.Prepare{Txn: txn, Origin: uint8(p.self), Dim: uint16(p.cfg.Dim), Base: uint32(base), Ops: ops[k]}
	}
	if e := p.st.validate(preps[p.self]); e != nil {
		p.st.mu.Unlock()
		return e
	}
	if err := p.wal.append(protocol.Marshal(preps[p.self])); err != nil {
		p.fatal(err)
	}
	p.st.pending[txn] = preps[p.self]
	p.st.mu.Unlock()

	errs := p.broadcast(ctx, func(ctx context.Context, k int) error {
		resp, _, err := call(ctx, p.dialer, p.cfg.Parties[k], preps[k])
		if err != nil {
			return err
		}
		if v, ok := resp.(*protocol.Vote); !ok || v.Txn != txn {
			return fmt.Errorf("%s answered the prepare with %T", p.cfg.Parties[k].Name, resp)
		}
		return nil
	})
	var first *protocol.Error
	var failed []string
	for k, err := range errs {
		if err != nil {
			if first == nil {
				first = asError(err, protocol.CodeUnavailable)
			}
			failed = append(failed, fmt.Sprintf("%s: %v", p.cfg.Parties[k].Name, err))
		}
	}
	d := &protocol.Decide{Txn: txn, Origin: uint8(p.self), Commit: first == nil}
	if err := p.wal.append(protocol.Marshal(d)); err != nil {
		p.fatal(err)
	}
	if _, err := p.st.decide(txn, d.Commit); err != nil {
		p.fatal(err)
	}
	p.deliver(ctx, d)
	if first != nil {
		p.m.txnAborts.Add(1)
		code := first.Code
		if code != protocol.CodeDuplicate && code != protocol.CodeUnknownID && code != protocol.CodeBadRequest {
			code = protocol.CodeAborted
		}
		return protocol.Errorf(code, "rolled back at every party: %s", strings.Join(failed, "; "))
	}
	return nil
}

// broadcast runs f for every other party in parallel and returns the
// errors indexed by party (nil for self).
func (p *Party) broadcast(ctx context.Context, f func(context.Context, int) error) []error {
	errs := make([]error, p.cfg.Mu())
	var wg sync.WaitGroup
	for k := range p.cfg.Parties {
		if k == p.self {
			continue
		}
		wg.Go(func() { errs[k] = f(ctx, k) })
	}
	wg.Wait()
	return errs
}

// prepare is phase one at a non-origin party: validate, log durably, vote.
func (p *Party) prepare(m *protocol.Prepare) protocol.Msg {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if int(m.Origin) == p.self {
		return protocol.Errorf(protocol.CodeBadRequest, "a prepare for my own segment must come from me")
	}
	if e := p.st.validate(m); e != nil {
		return e
	}
	if err := p.wal.append(protocol.Marshal(m)); err != nil {
		p.fatal(err)
	}
	p.st.pending[m.Txn] = m
	return &protocol.Vote{Txn: m.Txn}
}

// onDecide is phase two at a non-origin party; idempotent.
func (p *Party) onDecide(m *protocol.Decide) protocol.Msg {
	p.st.mu.RLock()
	pend, ok := p.st.pending[m.Txn]
	p.st.mu.RUnlock()
	if !ok {
		return &protocol.DecideOK{}
	}
	if pend.Origin != m.Origin {
		return protocol.Errorf(protocol.CodeForbidden, "only the origin decides its transaction")
	}
	if err := p.wal.append(protocol.Marshal(m)); err != nil {
		p.fatal(err)
	}
	if _, err := p.st.decide(m.Txn, m.Commit); err != nil {
		p.fatal(err)
	}
	return &protocol.DecideOK{}
}

// deliver sends a decision to every other party; those that do not
// acknowledge get it from the outbox later.
func (p *Party) deliver(ctx context.Context, d *protocol.Decide) {
	errs := p.broadcast(ctx, func(ctx context.Context, k int) error {
		_, _, err := call(ctx, p.dialer, p.cfg.Parties[k], d)
		return err
	})
	for k, err := range errs {
		if err != nil {
			p.outbox.add(k, d)
		}
	}
}
