package hemode

import (
	"context"
	"runtime"
	"sync"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// identify answers a device's identify (unsharded): the ids of the rows
// the key server returns, best first.
func (l *Local) identify(ctx context.Context, r engine.Request) protocol.Msg {
	if l.env.Sharded() {
		return protocol.Errorf(protocol.CodeBadRequest, "%s is one shard of %s: identify through %s's address (its coordinator)", l.env.Member(), l.env.Self, l.env.Self)
	}
	m := r.Msg.(*protocol.Identify)
	res, perr := l.query(ctx, int(m.TopK), m.Template, [16]byte{})
	if perr != nil {
		return perr
	}
	ans := engine.NewAnswer(l.p, int(m.TopK)) // mode he never reveals scores (config)
	for _, id := range res.ids {
		ans.Passed(id)
	}
	ans.Bytes(res.sent, res.recv, res.sent+res.recv)
	return ans.Done()
}

// shardIdentify runs a query over this shard's rows under the
// coordinator's query id: the key server's shard ranks its best rows among
// every shard's, and the shard answers its ids with their ranks.
func (l *Local) shardIdentify(ctx context.Context, r engine.Request) protocol.Msg {
	if !l.env.Sharded() || r.From.Name != l.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only a shard's own coordinator asks it to identify")
	}
	m := r.Msg.(*protocol.ShardIdentify)
	if m.Query == ([16]byte{}) {
		return protocol.Errorf(protocol.CodeBadRequest, "a sharded query without its coordinator's query id")
	}
	res, perr := l.query(ctx, int(m.TopK), m.Template, m.Query)
	if perr != nil {
		return perr
	}
	return &protocol.ShardAnswer{IDs: res.ids, Ranks: res.ranks, Bytes: res.sent + res.recv, Sent: res.sent, Recv: res.recv}
}

// queried is what a query found: the ids of the rows the key server
// returned, best first, their ranks over every shard (sharded only), and
// the bytes this server sent to and received from the key server.
type queried struct {
	ids        []string
	ranks      []uint16
	sent, recv uint64
}

// query computes IP_DB for every group on all cores and streams the
// (ct+, ct-) pairs to the key server while later groups are still being
// summed; the key server answers with row indices only (and, sharded,
// their ranks over every shard under query id qid).
func (l *Local) query(ctx context.Context, topK int, probe []float32, qid [16]byte) (*queried, *protocol.Error) {
	if !l.sequencer() && !l.caughtUp.Load() {
		return nil, protocol.Errorf(protocol.CodeUnavailable, "%s has not caught up with the sequencer's changes since it started (a deletion may be missing); it answers once %s has brought it up to date", l.env.Member(), l.env.Peer(l.p.Party(0).Name))
	}
	if perr := engine.CheckTopK(l.p, topK); perr != nil {
		return nil, perr
	}
	y, err := l.tr.Apply(probe)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	// Only settled slots count: rows of an enrollment in progress are not
	// live, and their group may not exist yet.
	l.mu.RLock()
	rows, nlive := l.settled, l.rowMap.Live(0)
	gr := l.he.GroupRows()
	groups := make([]heidface.EncGroup, (rows+gr-1)/gr) // nil: a group whose slots were all burned
	copy(groups, l.groups)
	live := make([]uint64, template.Words(rows)) // the key server's copy
	copy(live, l.live.Words())
	l.mu.RUnlock()
	if nlive == 0 && qid == ([16]byte{}) { // a shard asks even when empty: the other shards' merge waits for it
		return &queried{}, nil
	}
	s, err := l.env.Net.Open(ctx, l.keySrv)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: %v", l.env.Peer(l.keySrv), err)
	}
	defer s.Finish()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	ctb := l.he.CiphertextBytes()
	q := &protocol.HEQuery{Key: l.pkHash, Groups: uint32(len(groups)), Rows: uint32(rows), TopK: uint16(topK), CtBytes: uint32(ctb), Query: qid}
	// A key server that refuses the query answers at once and stops
	// reading: a failed write is followed by reading its answer.
	sendErr := func(err error) (*queried, *protocol.Error) {
		if _, rerr := rpc.ReadReply(ctx, s, l.keySrv); rerr != nil {
			if perr, ok := rerr.(*protocol.Error); ok {
				return nil, perr
			}
		}
		return nil, protocol.Errorf(protocol.CodeUnavailable, "key server %s: %v", l.env.Peer(l.keySrv), err)
	}
	if err := s.WriteFrame(protocol.Marshal(q)); err != nil {
		return sendErr(err)
	}
	if err := s.WriteWords(live); err != nil {
		return sendErr(err)
	}
	// The groups are summed in a pass shared with the concurrent
	// identifies (sumPass); this one's sums arrive in group order and go
	// to the key server while later groups are still being summed.
	jctx, cancel := context.WithCancel(ctx) // an early return stops the summing of this job's groups
	defer cancel()
	job := &sumJob{ctx: jctx, y: y, groups: groups, results: make([]chan sumOut, len(groups))}
	for i := range job.results {
		job.results[i] = make(chan sumOut, 1)
	}
	go l.passes.Do(context.Background(), job) // the pass answers every group of the job, also on failure
	for g := range groups {
		o := <-job.results[g]
		if o.err != nil {
			if ctx.Err() != nil { // the requester gave up, or the deadline passed: not the server's fault
				return nil, protocol.Errorf(protocol.CodeUnavailable, "%s: %v", l.env.Member(), ctx.Err())
			}
			return nil, protocol.Errorf(protocol.CodeInternal, "group %d: %v", g, o.err)
		}
		if _, err := s.Write(o.b); err != nil {
			return sendErr(err)
		}
	}
	s.CloseWrite()
	rm, err := rpc.ReadReply(ctx, s, l.keySrv)
	if err != nil {
		return nil, engine.AsError(err, protocol.CodeUnavailable)
	}
	res, perr := checkResult(rm, qid, topK)
	if perr != nil {
		return nil, perr
	}
	out := &queried{ranks: res.Ranks, sent: uint64(s.Sent()), recv: uint64(s.Received())}
	l.mu.RLock()
	for _, row := range res.Rows {
		if int(row) >= rows || live[row>>6]>>(row&63)&1 == 0 {
			l.mu.RUnlock()
			return nil, protocol.Errorf(protocol.CodeInternal, "key server returned row %d, which is not live", row)
		}
		out.ids = append(out.ids, l.rowMap.ID(0, int(row)))
	}
	l.mu.RUnlock()
	return out, nil
}

// checkResult checks the key server's answer: a result, with a rank for
// every row in a shard's query (qid set) and none otherwise, ranks within
// top K and increasing.
func checkResult(rm protocol.Msg, qid [16]byte, topK int) (*protocol.HEResult, *protocol.Error) {
	res, ok := rm.(*protocol.HEResult)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeInternal, "key server answered %v", rm.Type())
	}
	if sharded := qid != ([16]byte{}); sharded != (len(res.Ranks) == len(res.Rows)) && len(res.Rows) > 0 {
		return nil, protocol.Errorf(protocol.CodeInternal, "key server answered %d rows with %d ranks", len(res.Rows), len(res.Ranks))
	}
	for i, r := range res.Ranks { // places in the merged top K, best first
		if int(r) >= topK || i > 0 && r <= res.Ranks[i-1] {
			return nil, protocol.Errorf(protocol.CodeInternal, "key server answered rank %d (of top %d) after %v", r, topK, res.Ranks[:i])
		}
	}
	return res, nil
}

// sumJob is one identify's part in a pass over the groups: its query, the
// groups it saw, and a channel per group for the group's ct+ || ct-.
type sumJob struct {
	ctx     context.Context // the identify's: once it ends, its groups are not summed
	y       template.Ternary
	groups  []heidface.EncGroup
	results []chan sumOut
}

type sumOut struct {
	b   []byte
	err error
}

// sumPass sums every group for every job, the groups in order on all
// cores; a group that several jobs saw alike is summed for them in one
// IPDBBatch (each column it holds read once). Every job gets an answer
// for each of its groups, an error where it was not summed.
func (l *Local) sumPass(_ context.Context, jobs []*sumJob) []struct{} {
	n := 0
	for _, j := range jobs {
		n = max(n, len(j.groups))
	}
	next := make(chan int, n)
	for g := range n {
		next <- g
	}
	close(next)
	ctb := l.he.CiphertextBytes()
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		enc := l.local.Copy()
		wg.Go(func() {
			for g := range next {
				l.sumGroup(enc, jobs, g, ctb)
			}
		})
	}
	wg.Wait()
	l.m.passes.Inc()
	l.m.passed.Add(float64(len(jobs)))
	return make([]struct{}, len(jobs))
}

// sumGroup sums group g for every job that has it, the jobs that saw the
// same group (all of them, unless an enrollment made it between their
// snapshots) in one batch.
func (l *Local) sumGroup(enc heidface.Encryptor, jobs []*sumJob, g, ctb int) {
	var batch []*sumJob
	var ys []template.Ternary
	var outs [][]byte
	var grp heidface.EncGroup
	flush := func() {
		if len(batch) == 0 {
			return
		}
		l.mu.RLock() // enrollment adds into groups under the write lock
		err := enc.IPDBBatch(grp, ys, outs)
		l.mu.RUnlock()
		for i, j := range batch {
			j.results[g] <- sumOut{outs[i], err}
		}
		batch, ys, outs = batch[:0], ys[:0], outs[:0]
	}
	for _, j := range jobs {
		if g >= len(j.groups) {
			continue
		}
		if err := j.ctx.Err(); err != nil {
			j.results[g] <- sumOut{err: err}
			continue
		}
		if len(batch) > 0 && j.groups[g] != grp {
			flush()
		}
		grp = j.groups[g]
		batch, ys, outs = append(batch, j), append(ys, j.y), append(outs, make([]byte, 2*ctb))
	}
	flush()
}
