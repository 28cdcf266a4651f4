package replicated

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Hidden probes (docs/HIDDEN-PROBES.md). In a cluster with hide_probes the
// device's client computes y = Q(q) itself, splits it into three
// replicated shares and seals holder i's pair (y_i, y_(i+1)) to it
// (hiddenProbe); the entry relays the other holders' parts. Holder i
// computes its product share z_i = <x_i, y_i + y_(i+1)> + <x_(i+1), y_i>
// of every row over all d positions (additive.ScoreDense), permutes it
// with sigma and masks it with m_i, and sends it in full to the decider,
// which adds the three vectors and answers as in the checked path. No
// server sees q or y: a holder sees two uniform shares of y, the decider
// masked scores in random order, the entry the answer.
//
// What is checked: every holder runs only probes a client of the cluster
// signed (so an entry cannot make its own), each nonce once; the decider
// compares the digests of the query shares each holder used with the
// other holder of each share (an entry that relays a part of another
// probe is caught), and the entry checks the decider's answer with a tag
// on each of the two vectors it lacks, keyed by the key it shares with
// that vector's holder. What is not: the cross terms of z_i are computed
// by holder i alone, so a deviating holder can shift the scores of rows
// it chooses (get a chosen row accepted, or a match rejected) without
// being caught, and a deviating entry, which knows sigma and the masks,
// can so learn the scores of up to top-k chosen rows of each probe it
// relays. The checked path, where the holders see y, catches both.

// probe is a holder's opened pair of query shares and their digests, and
// what its check's masks and blinds are bound to (replicated.ProbeContext).
type probe[E additive.Elem] struct {
	y       [2][]E
	digests [2][protocol.DigestSize]byte
	context [32]byte
	verdict [2][protocol.VerdictKeySize]byte // this holder's components of the device's verdict key, for the decider
	sigma   [protocol.DigestSize]byte        // the digest of the sigma it is permuted with, for the decider
}

// openProbe checks the device's signature of a hidden probe (request
// nonce, time, this holder's part among the signed ones), opens the part
// and digests both shares, bound to the query qid. The nonce is spent
// only once the part has opened, so nobody can burn a device's nonce with
// a forged request.
func (h *Holder[E]) openProbe(nonce [16]byte, t int64, part []byte, a *protocol.ProbeAuth, qid [16]byte) (*probe[E], *protocol.Error) {
	if perr := h.probes.check(t, time.Now(), h.env.Self); perr != nil {
		return nil, perr
	}
	if !config.OperatorSigned(h.p.ClientKeys(a.Auth.Signer), func(key *ecdsa.PublicKey) bool {
		return a.VerifyProbe(key, h.p.ClusterID(), nonce, t, h.Self(), part)
	}) {
		return nil, protocol.Errorf(protocol.CodeForbidden, "%s: the hidden probe is not signed by a client of this cluster (signer %q), or its part is not the one signed: identify with the cluster's client, which signs with its own key", h.env.Self, a.Auth.Signer)
	}
	if h.env.SealKey == nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%s has no seal key loaded and cannot open a hidden probe: start it with its home's seal.key", h.env.Self)
	}
	d := h.p.Dim()
	size := probePartSize(h.p)
	b := seal.Binding{Cluster: h.p.ClusterID(), Holder: h.env.Self, Mode: string(h.p.Mode()), Context: protocol.QueryContext(nonce, t)}
	pt, err := seal.Open(h.env.SealKey, b, part, size)
	switch {
	case errors.Is(err, seal.ErrOpen):
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%s: its part of the hidden probe does not open (damaged, or sealed for another holder, cluster or request)", h.env.Self)
	case err != nil:
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%s: %v", h.env.Self, err)
	case len(pt) != size:
		clear(pt)
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%s: its part of the hidden probe holds %d bytes, not two shares of d = %d and two components of the verdict key", h.env.Self, len(pt), d)
	}
	if perr := h.probes.use(nonce, t, time.Now(), h.env.Self); perr != nil {
		clear(pt)
		return nil, perr
	}
	// A fresh, aligned buffer for the element view.
	e := make([]E, 2*d)
	n := copy(additive.ElemBytes(e), pt)
	pr := &probe[E]{y: [2][]E{e[:d], e[d:]}, context: replicated.ProbeContext(qid, nonce, t)}
	copy(pr.verdict[0][:], pt[n:])
	copy(pr.verdict[1][:], pt[n+protocol.VerdictKeySize:])
	clear(pt)
	held := replicated.Held(h.Self())
	for i := range pr.digests {
		pr.digests[i] = replicated.VectorDigest(qid, held[i], h.p.Bits, additive.ElemBytes(pr.y[i]))
	}
	return pr, nil
}

func (pr *probe[E]) clear() { clear(pr.y[0]); clear(pr.y[1]); clear(pr.verdict[:]) }

// probePartSize is the plaintext of a holder's part of a hidden probe:
// two query shares and two components of the verdict key.
func probePartSize(p *Params) int {
	return 2*p.Dim()*p.Bits/8 + 2*protocol.VerdictKeySize
}

// view is the committed rows' view; the caller holds the read lock.
func (h *Holder[E]) view() blindbase.View {
	return blindbase.NewView(h.Digest(), func(s int) []uint64 { return h.Shares(s).own.LiveBits() })
}

// admit checks a helper's view against the entry's sealed row map (want,
// from), or shows the entry's view to started.
func (h *Holder[E]) admit(v blindbase.View, from string, want protocol.Digest, started func(blindbase.View)) *protocol.Error {
	if want != nil {
		if have, err := h.SealFor(from, v.Digest); err != nil || !have.Equal(want) {
			return protocol.Errorf(protocol.CodeInconsistent, "%s's rows changed during the query; retry", h.env.Self)
		}
	}
	if started != nil {
		started(v)
	}
	return nil
}

// scan is one caller's probes for this holder's next pass over its
// shares: the entry's batch (same: the row map it sent the helpers, which
// the pass's view must match) or a helper's batch from one entry (from,
// want: the entry's sealed row map, which the view must match).
type scan[E additive.Elem] struct {
	prs    []*probe[E]
	sigmas []*additive.Seed
	same   protocol.Digest
	from   string
	want   protocol.Digest
	warm   bool // no probe: the check sums brought to the rows of now (warmChecks)
}

// scanned is a scan's permuted, masked vectors, one per probe, or why it
// was refused.
type scanned[E additive.Elem] struct {
	vecs []*vectors[E]
	err  error
}

// scoreHidden computes this holder's permuted, masked product shares
// pi(z_i) + m_i of every committed row for a batch of probes, each with
// its sigma. Concurrent calls (this holder's own batch as the entry, and
// the batches the other entries ask it for as a helper) share one pass
// over the shares (h.scans, scanAll): every hidden probe a holder scores
// at a time costs one read of its shares, whichever entry it came from.
//
// It returns only once the pass is over, also when ctx ends first: the
// pass reads the probes' shares, which the caller clears as it returns
// (the pass is local work, bounded by the shares' size).
func (h *Holder[E]) scoreHidden(ctx context.Context, sc *scan[E]) ([]*vectors[E], error) {
	res, err := h.scans.Do(context.WithoutCancel(ctx), sc)
	if err != nil {
		return nil, err
	}
	return res.vecs, res.err
}

// scanAll is one pass over the shares for every probe of the scans: one
// view of the committed rows (each scan admitted on it or refused), the
// product shares of all probes by additive.ScoreDenseBatch, then each
// probe's permutation and masks.
func (h *Holder[E]) scanAll(_ context.Context, scans []*scan[E]) []scanned[E] {
	h.scanning.Lock()
	defer h.scanning.Unlock()
	out := make([]scanned[E], len(scans))
	t0 := time.Now()
	h.RLock()
	v := h.view()
	var prs []*probe[E]
	warm := 0
	for i, sc := range scans {
		if sc.warm {
			warm++
			continue
		}
		perr := h.admit(v, sc.from, sc.want, nil)
		if perr == nil && sc.same != nil && !sc.same.Equal(v.Digest) {
			perr = protocol.Errorf(protocol.CodeInconsistent, "%s's rows changed during the query; retry", h.env.Self)
		}
		if perr != nil {
			out[i].err = perr
			continue
		}
		prs = append(prs, sc.prs...)
	}
	zs, err := h.productShares(v, prs)
	var sums *checkSums[E]
	if err == nil && (len(prs) > 0 || warm > 0) {
		sums, err = h.sums(v) // the check sums of the same rows
	}
	h.RUnlock()
	if warm < len(scans) { // a pass for probes, not a warm pass alone
		h.m.scans.Inc()
		h.m.scanned.Add(float64(len(prs)))
	}
	t1 := time.Now()
	h.m.score.Add(t1.Sub(t0).Seconds()) // a warm pass's sums too: the holder was busy
	if len(prs) == 0 {
		return out
	}
	perm := h.permuter()
	defer h.perms.Put(perm)
	at := 0
	for i, sc := range scans {
		if out[i].err != nil || sc.warm {
			continue
		}
		out[i].err = err
		for q := range sc.prs {
			if out[i].err != nil {
				break
			}
			vec := &vectors[E]{View: v, own: make([]E, v.Rows()), sums: sums}
			out[i].err = h.permuteHidden(perm, vec, zs[at+q], sc.sigmas[q], sc.prs[q].context)
			out[i].vecs = append(out[i].vecs, vec)
		}
		at += len(sc.prs)
	}
	h.m.permute.Add(time.Since(t1).Seconds())
	return out
}

// productShares scores every probe over the view's rows in passes of up
// to additive.MaxDenseBatch probes; the caller holds the read lock.
func (h *Holder[E]) productShares(v blindbase.View, prs []*probe[E]) ([][]E, error) {
	n := v.Rows()
	zs, coef := make([][]E, len(prs)), make([][2][]E, len(prs))
	for q, pr := range prs {
		own, next := replicated.ProductCoefficients(pr.y)
		coef[q], zs[q] = [2][]E{own, next}, make([]E, n)
	}
	defer func() {
		for q := range coef {
			clear(coef[q][0])
		}
	}()
	outs, terms := make([][]E, len(prs)), make([][]additive.DenseTerm[E], len(prs))
	for s := range v.Digest {
		if v.Digest[s].Rows == 0 {
			continue
		}
		st := h.Shares(s)
		for q := range prs {
			outs[q] = zs[q][v.Off[s]:v.Off[s+1]]
			terms[q] = []additive.DenseTerm[E]{{S: st.own, Y: coef[q][0]}, {S: st.next, Y: coef[q][1]}}
		}
		for a := 0; a < len(prs); a += additive.MaxDenseBatch {
			b := min(a+additive.MaxDenseBatch, len(prs))
			if err := additive.ScoreDenseBatch(outs[a:b], terms[a:b], 0, v.Off[s+1]-v.Off[s], 0); err != nil {
				return nil, err
			}
		}
	}
	return zs, nil
}

// sentHidden is what sendHidden leaves a holder: the stream that carries
// the decider's answer (the entry's), the bytes its vector to its
// successor moved (the checks), and its predecessor's vector, which the
// entry uses to check the answer.
type sentHidden[E additive.Elem] struct {
	s     *network.Stream
	moved uint64
	pred  []E
}

// sendHidden sends this holder's product-share vector to the decider,
// with the digests of its query shares and its check parts. Helper
// entry+1's vector is the one the entry checks by tag: that helper and
// entry+2, which gets the vector to check it, keep its tags under
// tagKey (the two helpers' key) for the decider's fetch.
func (h *Holder[E]) sendHidden(ctx context.Context, qid [16]byte, vec *vectors[E], pr *probe[E], entry, topK int, tagKey *[32]byte) (sentHidden[E], error) {
	m := &protocol.ReplShare{Query: qid, Rows: uint32(vec.Rows()), Bits: uint8(h.p.Bits), TopK: uint16(topK), Entry: uint8(entry),
		Hidden: true, QueryDigests: pr.digests, VerdictKeys: pr.verdict, SigmaDigest: pr.sigma}
	// The checks of the products (checked.go): this holder's vector to
	// its successor, its predecessor's here, and both parts to the
	// decider with the vector.
	var out sentHidden[E]
	pred, moved, err := h.exchange(ctx, qid, vec.own)
	out.moved, out.pred = moved, pred
	if err != nil {
		return out, err
	}
	blob, err := h.checkParts(vec, pr, qid, pred)
	if err != nil {
		return out, err
	}
	switch h.Self() {
	case (entry + 1) % replicated.Holders:
		err = h.keepTags(entry, qid, vec.own, tagKey)
	case (entry + 2) % replicated.Holders:
		err = h.keepTags(entry, qid, pred, tagKey)
	}
	if err != nil {
		return out, err
	}
	tail, err := m.TailParts(protocol.ReplTail{Own: additive.ElemBytes(vec.own), Check: blob}, checkBlobSize(h.p.Dim(), h.p.Bits))
	if err != nil {
		return out, err
	}
	out.s, err = blindbase.SendShares(ctx, h.env.Net, h.p.DeciderName(), m, tail...)
	if err != nil {
		return out, fmt.Errorf("decider: %w", err)
	}
	return out, nil
}

// identifyPlain refuses a template in a hidden-probe cluster (a device
// that sent one has shown it to this server already; say so), else runs
// the checked path.
func (h *Holder[E]) identifyPlain(ctx context.Context, r engine.Request) protocol.Msg {
	if h.p.HideProbes() {
		return protocol.Errorf(protocol.CodeBadRequest, "this cluster hides probes: identify with a client that has this cluster's configuration (it seals the probe's shares to the holders); a template was not used")
	}
	return h.identify(ctx, r)
}

// hiddenJob is one hidden probe at the entry: the device's request, its
// signature, this holder's opened part, and the query's id and sigma.
type hiddenJob[E additive.Elem] struct {
	m      *protocol.HiddenIdentify
	signed protocol.ProbeAuth
	pr     *probe[E]
	qid    [16]byte
	sigma  additive.Seed
}

// hiddenDone is a hidden probe's answer, and the helper that could not
// be reached when that is why it failed (else noneDown).
type hiddenDone struct {
	resp protocol.Msg
	lost int
}

// identifyHidden runs a hidden-probe query as the entry: it checks the
// request and opens this holder's part, then the probe joins a batch
// (engine.Batcher: concurrent probes share one pass over the shares, here
// and at the helpers). Every holder must be up: the product needs all
// three shares' cross terms.
func (h *Holder[E]) identifyHidden(ctx context.Context, r engine.Request) protocol.Msg {
	if h.env.Sharded() {
		return protocol.Errorf(protocol.CodeBadRequest, "%s is one shard of %s: identify through %s's address (its coordinator)", h.env.Member(), h.env.Self, h.env.Self)
	}
	return h.runHiddenProbe(ctx, r.Msg.(*protocol.HiddenIdentify), nil)
}

// shardHidden runs a device's hidden probe over this shard's rows for the
// holder's coordinator, under the coordinator's query id: the shard's
// checked candidates with their scores (engine/shard merges them). The
// same shard of every other holder opens its part of the probe, each
// once; a helper that cannot be reached fails the probe (it is never run
// again: a hidden probe needs all three holders, and runs once).
func (h *Holder[E]) shardHidden(ctx context.Context, r engine.Request) protocol.Msg {
	if !h.env.Sharded() || r.From.Name != h.env.Self {
		return protocol.Errorf(protocol.CodeForbidden, "only a shard's own coordinator asks it to identify")
	}
	m := r.Msg.(*protocol.ShardHidden)
	return h.runHiddenProbe(ctx, &m.Probe, &m.Query)
}

// runHiddenProbe runs a device's hidden probe as the entry, under query id
// qid when given (a shard's coordinator's) or a fresh one.
func (h *Holder[E]) runHiddenProbe(ctx context.Context, m *protocol.HiddenIdentify, qid *[16]byte) protocol.Msg {
	if !h.p.HideProbes() {
		return protocol.Errorf(protocol.CodeBadRequest, "this cluster does not hide probes: identify with a template (the client's configuration is not this cluster's)")
	}
	if perr := engine.CheckTopK(h.p.Params, int(m.TopK)); perr != nil {
		return perr
	}
	if len(m.Parts) != replicated.Holders {
		return protocol.Errorf(protocol.CodeBadRequest, "a hidden probe of %d parts, want one per share holder (%d)", len(m.Parts), replicated.Holders)
	}
	// Every part of the size a sealed pair of shares has, before the probe
	// joins a batch: a helper refuses a malformed batch whole, so one
	// device's bad part would fail the other devices' probes with it.
	want := seal.Overhead + probePartSize(h.p)
	for k, part := range m.Parts {
		if len(part) != want {
			return protocol.Errorf(protocol.CodeBadRequest, "the hidden probe's part for %s holds %d bytes, not a sealed pair of shares and verdict key components (%d): a device of another build?", h.p.Party(k).Name, len(part), want)
		}
	}
	if down := h.outage.current(); down != noneDown {
		return protocol.Errorf(protocol.CodeUnavailable, "%s is down, and a hidden probe needs all three share holders; retry once it is back", h.p.Party(down).Name)
	}
	job := &hiddenJob[E]{m: m, signed: m.Probe()}
	sigma, err := additive.NewSeed(h.env.RandReader())
	if qid != nil {
		job.qid = *qid
	} else if err == nil {
		_, err = h.env.RandReader().Read(job.qid[:])
	}
	if err != nil {
		return protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	job.sigma = sigma
	pr, perr := h.openProbe(m.Nonce, m.Time, m.Parts[h.Self()], &job.signed, job.qid)
	if perr != nil {
		return perr
	}
	pr.sigma = protocol.SigmaDigest(job.qid, job.sigma)
	job.pr = pr
	done, err := h.hidden.Do(ctx, job) // the batch clears the probe
	if err != nil {
		return engine.AsError(err, protocol.CodeUnavailable)
	}
	if done.lost != noneDown {
		name := h.p.Party(done.lost).Name
		if h.outage.mark(done.lost, name, ping(h.env.Net, name)) {
			h.env.Log.Warn("a share holder cannot be reached; hidden probes are refused until it is back", "holder", name)
		}
	}
	if e, failed := done.resp.(*protocol.Error); failed && e.Code == protocol.CodeCountedDown {
		// A run again is the device's to make: a hidden probe runs once.
		return protocol.Errorf(protocol.CodeUnavailable, "%s; a hidden probe runs once: send a fresh one", e.Msg)
	}
	return done.resp
}

// runHidden runs a batch of hidden probes as the entry: it asks each
// helper for the whole batch in one request, scores the batch in one
// pass, and then, for each probe on its own, sends its vector to the
// decider and checks the answer. A probe fails alone when a helper
// refuses it (its part, say); every probe fails when a helper cannot be
// reached, naming it.
func (h *Holder[E]) runHidden(ctx context.Context, jobs []*hiddenJob[E]) []hiddenDone {
	h.m.batches.Inc()
	h.m.batched.Add(float64(len(jobs)))
	out := make([]hiddenDone, len(jobs))
	defer func() {
		for _, j := range jobs {
			j.pr.clear()
		}
	}()
	self := h.Self()
	helpers := [2]int{(self + 1) % replicated.Holders, (self + 2) % replicated.Holders}
	names := []string{h.p.Party(helpers[0]).Name, h.p.Party(helpers[1]).Name}
	fs := make([]*fanout, len(jobs))
	for q := range jobs {
		fs[q] = h.newFanout(ctx, names)
		fs[q].wg.Add(len(names))
		defer fs[q].cancel()
	}
	// The helpers are asked at once, on the row map of now, so that their
	// passes over their shares need not wait for this holder's to start;
	// this holder's pass then scores on the same rows or refuses.
	h.RLock()
	v := h.view()
	h.RUnlock()
	h.askAll(ctx, v, jobs, names, helpers, fs)
	prs, sigmas, qids := make([]*probe[E], len(jobs)), make([]*additive.Seed, len(jobs)), make([][16]byte, len(jobs))
	for q, j := range jobs {
		prs[q], sigmas[q], qids[q] = j.pr, &j.sigma, j.qid
	}
	vecs, scored := h.scoreHidden(ctx, &scan[E]{prs: prs, sigmas: sigmas, same: v.Digest})
	if scored != nil {
		h.skipVectors(scored, qids...) // the successor checks none of them
	}
	var wg sync.WaitGroup
	for q, j := range jobs {
		wg.Go(func() {
			var vec *vectors[E]
			if scored == nil {
				vec = vecs[q]
			}
			out[q] = h.finishHidden(fs[q], scored, vec, j)
		})
	}
	wg.Wait()
	return out
}

// askAll sends each helper the batch, on the entry's view v.
func (h *Holder[E]) askAll(ctx context.Context, v blindbase.View, jobs []*hiddenJob[E], names []string, helpers [2]int, fs []*fanout) {
	for i, name := range names {
		hq := &protocol.HiddenQuery{Items: make([]protocol.HiddenItem, len(jobs))}
		var sealErr error
		sealed, perr := h.SealFor(name, v.Digest)
		if perr != nil { // a *protocol.Error; never a typed nil in sealErr
			sealErr = perr
		}
		for q, j := range jobs {
			hq.Items[q] = protocol.HiddenItem{Query: j.qid, Sigma: j.sigma, Nonce: j.m.Nonce, Time: j.m.Time, Sealed: j.m.Parts[helpers[i]], Probe: j.signed}
		}
		hq.Digest = sealed
		go h.askHidden(ctx, i, name, hq, fs, sealErr)
	}
}

// askHidden sends helper i the batch and records its result for each
// probe in that probe's fanout (sealing the row map failed: sealErr).
func (h *Holder[E]) askHidden(ctx context.Context, i int, name string, hq *protocol.HiddenQuery, fs []*fanout, sealErr error) {
	var ok *protocol.HiddenQueryOK
	var n uint64
	err := sealErr
	if err == nil {
		var resp protocol.Msg
		resp, n, err = rpc.Ask(ctx, h.env.Net, name, hq)
		if err == nil {
			var isOK bool
			if ok, isOK = resp.(*protocol.HiddenQueryOK); !isOK || len(ok.Items) != len(fs) {
				err = fmt.Errorf("%s answered a batch of %d hidden probes with %v", name, len(fs), resp.Type())
			}
		}
	}
	for q, f := range fs {
		switch {
		case err != nil:
			f.fail(name, err)
		case ok.Items[q].Err != nil:
			f.fail(name, ok.Items[q].Err)
		default: // the batch's request bytes, shared
			f.oks[i] = &protocol.ReplQueryOK{Bytes: ok.Items[q].Bytes + n/uint64(len(fs)), TagKey: ok.Items[q].TagKey}
		}
		f.wg.Done()
	}
}

// finishHidden sends one probe's vector to the decider, and checks and
// answers the decider's result.
func (h *Holder[E]) finishHidden(f *fanout, scored error, vec *vectors[E], j *hiddenJob[E]) hiddenDone {
	topK := int(j.m.TopK)
	var sent sentHidden[E]
	res, total, perr := f.finish(scored, func(ctx context.Context) (*network.Stream, error) {
		var err error
		sent, err = h.sendHidden(ctx, j.qid, vec, j.pr, h.Self(), topK, nil)
		return sent.s, err
	})
	total += sent.moved
	if perr != nil {
		return hiddenDone{perr, f.lost}
	}
	if perr := h.sameTagKey(f); perr != nil {
		return hiddenDone{perr, noneDown}
	}
	// Helper entry+1's vector by its tag; entry+2's is the copy this
	// holder got to check it, whose digest the decider compared with the
	// vector it added.
	base := func(p int) E { return vec.own[p] + sent.pred[p] }
	scores, perr := h.check(res, vec.Rows(), base, &tagged{res.Values, res.Tags, &f.oks[0].TagKey}, topK)
	if perr != nil {
		return hiddenDone{perr, noneDown}
	}
	out := h.answer(res, scores, vec.View, &j.sigma, topK, total, false)
	switch a := out.(type) { // the decider's verdict, sealed to the device
	case *protocol.IdentifyOK:
		a.Verdicts = [][]byte{res.Verdict}
	case *protocol.ShardAnswer:
		a.Verdict = res.Verdict
	}
	return hiddenDone{out, noneDown}
}

// serveHidden answers an entry's batch of hidden probes as a helper: open
// and check each probe's part (a probe refused here fails alone), check
// the row maps, score the batch in one pass and send each probe's vector
// and tags to the decider.
func (h *Holder[E]) serveHidden(ctx context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.HiddenQuery)
	entry := h.p.PartyIndex(r.From.Name)
	switch {
	case entry < 0 || entry == h.Self():
		return protocol.Errorf(protocol.CodeForbidden, "only another share holder sends a query")
	case !h.p.HideProbes():
		return protocol.Errorf(protocol.CodeBadRequest, "a hidden-probe query in a cluster that does not hide probes")
	}
	ok := &protocol.HiddenQueryOK{Items: make([]protocol.HiddenResult, len(m.Items))}
	var prs []*probe[E]
	var sigmas []*additive.Seed
	var qids [][16]byte
	var at []int // the items opened, in order
	defer func() {
		for _, pr := range prs {
			pr.clear()
		}
	}()
	for q := range m.Items {
		it := &m.Items[q]
		pr, perr := h.openProbe(it.Nonce, it.Time, it.Sealed, &it.Probe, it.Query)
		if perr != nil {
			ok.Items[q].Err = perr
			h.skipVectors(perr, it.Query)
			continue
		}
		sigma := additive.Seed(it.Sigma)
		pr.sigma = protocol.SigmaDigest(it.Query, it.Sigma)
		prs, sigmas, qids, at = append(prs, pr), append(sigmas, &sigma), append(qids, it.Query), append(at, q)
	}
	if len(prs) == 0 {
		return ok
	}
	if err := h.AwaitDigest(ctx, r.From.Name, m.Digest); err != nil {
		h.skipVectors(err, qids...)
		return err
	}
	vecs, err := h.scoreHidden(ctx, &scan[E]{prs: prs, sigmas: sigmas, from: r.From.Name, want: m.Digest})
	if err != nil {
		h.skipVectors(err, qids...)
		return engine.AsError(err, protocol.CodeInternal)
	}
	var wg sync.WaitGroup
	for x, q := range at {
		it := &m.Items[q]
		wg.Go(func() {
			key, err := h.tagKey(entry, it.Query)
			if err != nil {
				ok.Items[q].Err = protocol.Errorf(protocol.CodeUnavailable, "%v", err)
				h.skipVectors(err, it.Query)
				return
			}
			sent, err := h.sendHidden(ctx, it.Query, vecs[x], prs[x], entry, int(it.Probe.TopK), &key)
			if err != nil {
				ok.Items[q].Err = engine.AsError(err, protocol.CodeUnavailable)
				return
			}
			s := sent.s
			ok.Items[q].TagKey = key
			// Waited for, unlike the checked path's: a refusal (a full
			// table) is then this probe's error at the entry at once,
			// not a wait of DeciderWait.
			defer s.Finish()
			if _, err := rpc.ReadReply(ctx, s, h.p.DeciderName()); err != nil {
				ok.Items[q].Err = engine.AsError(fmt.Errorf("decider: %w", err), protocol.CodeUnavailable)
				return
			}
			ok.Items[q].Bytes = uint64(s.Sent()+s.Received()) + sent.moved // with its vector to its successor
		})
	}
	wg.Wait()
	return ok
}

// ProbeWindow is how far a hidden probe's time may be from a holder's
// clock; within it, a holder refuses a nonce it has seen. So the entry
// cannot run a traveller's probe again later (after new enrollments, say).
const ProbeWindow = 2 * time.Minute

// maxProbeNonces bounds the nonces a holder remembers (a window's worth
// at over 8,000 probes a second); past it, probes are refused until the
// oldest leave the window.
const maxProbeNonces = 1 << 20

// probeNonces are the nonces of the hidden probes a holder has opened in
// the window, with their times. They live in memory only, so a holder
// refuses probes made before it started: a restart cannot open the window
// again for probes it ran before.
type probeNonces struct {
	mu      sync.Mutex
	seen    map[[16]byte]int64
	pruneAt int
	start   int64 // Unix seconds at which this holder started
}

// check refuses a probe whose time is outside the window around now, or
// before this holder started.
func (n *probeNonces) check(t int64, now time.Time, self string) *protocol.Error {
	w := int64(ProbeWindow / time.Second)
	if d := now.Unix() - t; d > w || d < -w {
		return protocol.Errorf(protocol.CodeBadRequest, "the probe's time is %d s from %s's clock (window %v): set the device's clock (NTP) and identify again", d, self, ProbeWindow)
	}
	if t < n.start {
		return protocol.Errorf(protocol.CodeUnavailable, "the probe was made before %s started (it runs a probe once, and forgets the probes of its last run): identify again, with a new probe", self)
	}
	return nil
}

// use admits a probe of (nonce, t) at now, once.
func (n *probeNonces) use(nonce [16]byte, t int64, now time.Time, self string) *protocol.Error {
	if perr := n.check(t, now, self); perr != nil {
		return perr
	}
	w := int64(ProbeWindow / time.Second)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen, n.pruneAt = map[[16]byte]int64{}, 4096
	}
	if len(n.seen) >= n.pruneAt {
		for k, ts := range n.seen {
			if now.Unix()-ts > w {
				delete(n.seen, k)
			}
		}
		// Never above the cap: a full table is pruned on every probe
		// until the oldest leave the window.
		n.pruneAt = min(max(4096, 2*len(n.seen)), maxProbeNonces)
	}
	if _, dup := n.seen[nonce]; dup {
		return protocol.Errorf(protocol.CodeForbidden, "%s has seen this hidden probe before (its nonce): a probe runs once; the device must make a new one", self)
	}
	if len(n.seen) >= maxProbeNonces {
		return protocol.Errorf(protocol.CodeUnavailable, "%s holds %d hidden probes of the last %v; retry shortly", self, len(n.seen), ProbeWindow)
	}
	n.seen[nonce] = t
	return nil
}
