package abis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/gateway"
	"github.com/idface/idface/protocol"
)

// Cluster is what the adapter asks of an idface cluster, as the gateway
// does: a client.Client opened as an operator.
type Cluster = gateway.Client

// DocFetcher gets the document at a referenceURL (Fetcher).
type DocFetcher interface {
	Fetch(ctx context.Context, url string) ([]byte, error)
}

// Options configures an Adapter.
type Options struct {
	Dim     int // the cluster's template dimension
	MaxTopK int // the most candidates one identify returns (config.Params.MaxTopK)
	Shards  int // shards per member (the reference count sums them)
	// Calibration, when set, is how the cluster's threshold was chosen:
	// targetFPIR is served where the threshold meets it.
	Calibration *config.Calibration
	Timeout     time.Duration // one call to the cluster (default 60 s)
	// Recent is how many inserted records' templates are kept in memory
	// for MOSIP's identify of the same referenceId (recent.go); default
	// 1024, below 0 none.
	Recent int
	Log    *slog.Logger
	Now    func() time.Time // default time.Now
}

// Adapter answers ABIS requests with an idface cluster.
type Adapter struct {
	c       Cluster
	j       *Journal
	f       DocFetcher
	x       Extractor
	o       Options
	jobs    jobs
	batches batcher
	recent  *recent
}

// New returns an adapter.
func New(c Cluster, j *Journal, f DocFetcher, x Extractor, o Options) *Adapter {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxTopK <= 0 {
		o.MaxTopK = protocol.MaxTopK
	}
	if o.Shards <= 0 {
		o.Shards = 1
	}
	if o.Recent == 0 {
		o.Recent = recentMax
	}
	return &Adapter{c: c, j: j, f: f, x: x, o: o, recent: newRecent(o.Recent)}
}

// Recorded returns the answer already recorded for q's requestId (a
// redelivered request), or nil.
func (a *Adapter) Recorded(q *Request) ([]byte, error) {
	if q == nil || q.RequestID == "" {
		return nil, nil
	}
	return a.j.Answered(q.RequestID)
}

// Answer serves a request as Decode returned it. The answer to an insert
// or delete is recorded durably before it is returned, and a change
// answered before gets its recorded answer again; other requests change
// nothing and are served afresh when they come again.
//
// turn, when set, is called where the request must wait for the changes
// received before it (Serve's ordering): after an insert's or an identify
// by referenceURL's fetch and extraction, which need not wait, and before
// anything else. An error is turn's or the journal's: nothing may be
// answered then.
func (a *Adapter) Answer(ctx context.Context, q *Request, bad *Error, turn func() error) ([]byte, error) {
	if prev, err := a.Recorded(q); err != nil || prev != nil {
		return prev, err
	}
	if turn == nil {
		turn = func() error { return nil }
	}
	var resp *Response
	ok := false
	if bad != nil {
		a.o.Log.Warn("abis: request refused", "request", q.RequestID, "op", q.ID, "failure", bad.Code, "err", bad.Msg)
		resp = answer(q, a.o.Now(), bad)
	} else {
		var err error
		if resp, ok, err = a.serve(ctx, q, turn); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	if q.RequestID != "" && q.Change() {
		if err := a.j.Done(q, ok, b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// unanswered wraps an error after which a request must not be answered
// (its turn never came, or the journal failed).
type unanswered struct{ error }

func (e unanswered) Unwrap() error { return e.error }

// serve runs a checked request; ok reports a change that took effect;
// an error is one after which it must not be answered.
func (a *Adapter) serve(ctx context.Context, q *Request, turn func() error) (*Response, bool, error) {
	r, ok, err := a.serveOp(ctx, q, turn)
	var u unanswered
	if errors.As(err, &u) {
		return nil, false, u.error
	}
	return r, ok, nil
}

func (a *Adapter) serveOp(ctx context.Context, q *Request, turn func() error) (*Response, bool, error) {
	now := a.o.Now
	waited := func() error {
		if err := turn(); err != nil {
			return unanswered{err}
		}
		return nil
	}
	switch q.ID {
	case OpPing:
		return answer(q, now(), nil), false, nil
	case OpPendingJobs:
		n, err := a.jobs.count(ctx)
		r := answer(q, now(), a.logged(q, err))
		if err == nil {
			s := strconv.Itoa(n)
			r.JobsCount = &s
		}
		return r, false, nil
	case OpReferenceCount:
		if err := waited(); err != nil {
			return nil, false, err
		}
		n, err := a.count(ctx)
		r := answer(q, now(), a.logged(q, err))
		if err == nil {
			s := strconv.Itoa(n)
			r.Count = &s
		}
		return r, false, nil
	case OpInsert:
		err := a.insert(ctx, q, waited)
		return answer(q, now(), a.logged(q, err)), err == nil, err
	case OpDelete:
		if err := waited(); err != nil {
			return nil, false, err
		}
		err := a.delete(ctx, q)
		return answer(q, now(), a.logged(q, err)), err == nil, err
	case OpIdentify:
		list, err := a.identify(ctx, q, waited)
		r := answer(q, now(), a.logged(q, err))
		r.CandidateList = list
		return r, false, err
	}
	return answer(q, now(), fail(FailID, "id %q", q.ID)), false, nil
}

func (a *Adapter) logged(q *Request, err error) error {
	if err != nil {
		a.o.Log.Warn("abis: request failed", "request", q.RequestID, "op", q.ID, "ref", q.Ref(), "failure", CodeOf(err), "err", err)
	}
	return err
}

func (a *Adapter) insert(ctx context.Context, q *Request, turn func() error) error {
	x, err := a.template(ctx, q.URL())
	if err != nil {
		return err
	}
	if err := turn(); err != nil {
		return err
	}
	ref := q.Ref()
	begun := a.j.Begun(q.RequestID)
	if r := a.j.Ref(ref); r != nil && !begun {
		return fail(FailRefIDExists, "referenceId %s was inserted before (a referenceId is never reused)", ref)
	}
	if err := a.j.Begin(q); err != nil {
		return unanswered{err}
	}
	err = a.enroll(protocol.Item{ID: ref, Template: x})
	if code, ok := protoCode(err); ok && code == protocol.CodeDuplicate {
		if begun { // this request's own enrollment, done before a restart
			a.recent.put(ref, x, a.o.Now())
			return nil
		}
		return fail(FailRefIDExists, "referenceId %s is enrolled", ref)
	}
	if err == nil {
		a.recent.put(ref, x, a.o.Now())
	}
	return clusterFailure(err)
}

func (a *Adapter) delete(ctx context.Context, q *Request) error {
	ref := q.Ref()
	a.recent.drop(ref)
	begun := a.j.Begun(q.RequestID)
	if err := a.j.Begin(q); err != nil {
		return unanswered{err}
	}
	cctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	err := a.c.Delete(cctx, ref)
	if code, ok := protoCode(err); ok && code == protocol.CodeUnknownID {
		if begun {
			return nil
		}
		return fail(FailRefIDNotFound, "referenceId %s is not enrolled", ref)
	}
	return clusterFailure(err)
}

// identify compares the probe (the record of referenceId, fetched again
// from its insert's referenceURL; or the referenceURL's) with the
// gallery or every record.
func (a *Adapter) identify(ctx context.Context, q *Request, turn func() error) (*CandidateList, error) {
	self := q.Ref()
	url := q.URL()
	var x []float32
	if self == "" { // the probe does not depend on earlier changes
		var err error
		if x, err = a.template(ctx, url); err != nil {
			return nil, err
		}
	}
	if err := turn(); err != nil {
		return nil, err
	}
	if self != "" {
		r := a.j.Ref(self)
		if r == nil || r.Deleted || r.URL == "" {
			return nil, fail(FailRefIDNotFound, "referenceId %s is not in this ABIS", self)
		}
		url = r.URL
		x = a.recent.take(self, a.o.Now()) // MOSIP's dedupe, right after the insert
	}
	if q.TargetFPIR > 0 {
		if err := a.checkFPIR(ctx, q.TargetFPIR); err != nil {
			return nil, err
		}
	}
	if x == nil {
		var err error
		if x, err = a.template(ctx, url); err != nil {
			return nil, err
		}
	}
	var gallery map[string]bool
	if q.Gallery != nil {
		gallery = map[string]bool{}
		for _, g := range q.Gallery.ReferenceIDs {
			if g.ReferenceID != self {
				gallery[g.ReferenceID] = true
			}
		}
	}
	k := q.MaxResults
	if self != "" {
		k++ // the record itself is found and left out
	}
	if gallery != nil {
		// Ids outside the gallery may rank above its own: ask for as
		// many as the cluster returns and keep the gallery's.
		k = a.o.MaxTopK
	}
	k = min(k, a.o.MaxTopK)
	cctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	res, err := a.c.Identify(cctx, x, k)
	if err != nil {
		return nil, clusterFailure(err)
	}
	list := &CandidateList{Candidates: []Candidate{}}
	for _, c := range res.Candidates {
		if c.ID == self || gallery != nil && !gallery[c.ID] {
			continue
		}
		if len(list.Candidates) == q.MaxResults {
			break
		}
		an := map[string]string{"rank": strconv.Itoa(len(list.Candidates) + 1)}
		if !res.ScoresHidden {
			an["internalScore"] = strconv.Itoa(int(c.Score))
		}
		list.Candidates = append(list.Candidates, Candidate{ReferenceID: c.ID, Analytics: an})
	}
	if gallery != nil && len(res.Candidates) >= k && len(list.Candidates) < min(q.MaxResults, len(gallery)) {
		// Every candidate the cluster returns was taken by ids outside
		// the gallery: a gallery id that matches too may rank below
		// them, and no request of the protocol restricts a search to a
		// gallery. Saying "none" would be a guess.
		return nil, fail(FailCannotServe, "gallery identify: the cluster's %d candidates hold %d of the gallery's ids, others may match below them (no gallery-restricted search in idface's protocol)", len(res.Candidates), len(list.Candidates))
	}
	list.Count = strconv.Itoa(len(list.Candidates))
	if res.Degraded {
		list.Analytics = map[string]string{"degraded": "true"}
		if res.ScoresHidden {
			// A degraded answer of a cluster that hides scores is the
			// decision alone, at most one candidate
			// (docs/REPLICATED-NOTES.md): where that one is the record
			// itself or outside the gallery, whether others match is not
			// known, and "none" would be a false answer to a dedupe.
			if len(list.Candidates) == 0 && len(res.Candidates) > 0 {
				return nil, fail(FailInternal, "a holder is down: the cluster's degraded answer holds only %s, so whether other records match is not known; ask again once the holder is back", res.Candidates[0].ID)
			}
			list.Analytics["complete"] = "false" // more may match
		}
	}
	return list, nil
}

// checkFPIR serves a targetFPIR only where the cluster's calibrated
// threshold meets it at the cluster's present size: the cluster has one
// threshold, so a looser target is served at the stricter threshold and
// a stricter one refused.
func (a *Adapter) checkFPIR(ctx context.Context, target int) error {
	c := a.o.Calibration
	if c == nil {
		return fail(FailCannotServe, "targetFPIR %d: the cluster's threshold was not calibrated (idface calibrate, cluster assemble --calibration)", target)
	}
	n, err := a.count(ctx)
	if err != nil {
		return err
	}
	have := c.ExpectedFPIR(n)
	if have > FPIR(target)*(1+1e-9) && TargetOf(have) < target {
		return fail(FailCannotServe, "targetFPIR %d (FPIR %.2g): the threshold was calibrated for FPIR %g and gives about %.2g with %d records", target, FPIR(target), c.TargetFPIR, have, n)
	}
	return nil
}

// template fetches the CBEFF at url and extracts its face's template.
func (a *Adapter) template(ctx context.Context, url string) ([]float32, error) {
	doc, err := a.f.Fetch(ctx, url)
	if err != nil {
		return nil, err
	}
	rec, err := FaceBDB(doc)
	if err != nil {
		return nil, err
	}
	x, err := a.x.Extract(ctx, rec)
	if err != nil {
		return nil, err
	}
	if len(x) != a.o.Dim {
		return nil, fmt.Errorf("abis: the extractor gave a template of %d numbers, the cluster's dimension is %d", len(x), a.o.Dim)
	}
	var norm float64
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fail(FailQuality, "the extractor's template holds %v", v)
		}
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		return nil, fail(FailQuality, "the extractor's template is zero")
	}
	return x, nil
}

// count is the number of records enrolled (the entry's count, or its
// shards' in a sharded cluster).
func (a *Adapter) count(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	if a.o.Shards <= 1 {
		h, err := a.c.Health(ctx, a.c.Entry())
		if err != nil {
			return 0, clusterFailure(err)
		}
		return int(h.Live), nil
	}
	n := 0
	for s := range a.o.Shards {
		h, err := a.c.Health(ctx, config.ShardName(a.c.Entry(), s))
		if err != nil {
			return 0, clusterFailure(err)
		}
		n += int(h.Live)
	}
	return n, nil
}

func protoCode(err error) (protocol.Code, bool) {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code, true
	}
	return 0, false
}

// clusterFailure maps the cluster's refusals to the spec's codes: a
// rolled-back change is "aborted", a malformed one "unable to serve",
// anything else (a server down, a timeout) an internal error.
func clusterFailure(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	var u unanswered
	if errors.As(err, &e) || errors.As(err, &u) {
		return err
	}
	code, _ := protoCode(err)
	switch code {
	case protocol.CodeAborted:
		return &Error{Code: FailAborted, Msg: err.Error()}
	case protocol.CodeBadRequest:
		return &Error{Code: FailCannotServe, Msg: err.Error()}
	}
	return &Error{Code: FailInternal, Msg: err.Error()}
}
