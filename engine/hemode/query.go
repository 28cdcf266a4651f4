package hemode

import (
	"context"
	"runtime"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// identify computes IP_DB for every group on all cores and streams the
// (ct+, ct-) pairs to the key server while later groups are still being
// summed; the key server answers with row indices only.
func (l *Local) identify(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.Identify)
	if !l.sequencer() && !l.caughtUp.Load() {
		return protocol.Errorf(protocol.CodeUnavailable, "%s has not caught up with the sequencer's changes since it started (a deletion may be missing); it answers once %s has brought it up to date", l.env.Self, l.p.Party(0).Name)
	}
	if perr := engine.CheckTopK(l.p, int(m.TopK)); perr != nil {
		return perr
	}
	y, err := l.tr.Apply(m.Template)
	if err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	// Only settled slots count: rows of an enrollment in progress are not
	// live, and their group may not exist yet.
	l.mu.RLock()
	rows, nlive := l.settled, l.nlive
	gr := l.he.GroupRows()
	groups := make([]heidface.EncGroup, (rows+gr-1)/gr) // nil: a group whose slots were all burned
	copy(groups, l.groups)
	live := make([]uint64, template.Words(rows)) // the key server's copy
	copy(live, l.live.Words())
	l.mu.RUnlock()
	ans := engine.NewAnswer(l.p, int(m.TopK)) // mode he never reveals scores (config)
	if nlive == 0 {
		return ans.Done()
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
	q := &protocol.HEQuery{Key: l.pkHash, Groups: uint32(len(groups)), Rows: uint32(rows), TopK: m.TopK, CtBytes: uint32(ctb)}
	// A key server that refuses the query answers at once and stops
	// reading: a failed write is followed by reading its answer.
	sendErr := func(err error) protocol.Msg {
		if _, rerr := rpc.ReadReply(ctx, s, l.keySrv); rerr != nil {
			if perr, ok := rerr.(*protocol.Error); ok {
				return perr
			}
		}
		return protocol.Errorf(protocol.CodeUnavailable, "key server: %v", err)
	}
	if err := s.WriteFrame(protocol.Marshal(q)); err != nil {
		return sendErr(err)
	}
	if err := s.WriteWords(live); err != nil {
		return sendErr(err)
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
		enc := l.local.Copy()
		go func() {
			for g := range next {
				if wctx.Err() != nil {
					results[g] <- out{err: wctx.Err()}
					continue
				}
				b := make([]byte, 2*ctb)
				l.mu.RLock() // enrollment adds into groups under the write lock
				err := enc.IPDB(groups[g], y, b)
				l.mu.RUnlock()
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
			return sendErr(err)
		}
	}
	s.CloseWrite()
	rm, err := rpc.ReadReply(ctx, s, l.keySrv)
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
		ans.Passed(l.ids.At(int(row)))
	}
	l.mu.RUnlock()
	ans.Bytes(uint64(s.Sent()), uint64(s.Received()), uint64(s.Sent()+s.Received()))
	return ans.Done()
}
