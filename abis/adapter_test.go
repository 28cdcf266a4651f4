package abis

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
)

// fakeCluster is a plaintext cluster that reveals decisions only: ids
// whose cosine with the probe is at least 0.5, best first.
type fakeCluster struct {
	mu       sync.Mutex
	rows     map[string][]float32
	degraded bool
	enrolls  int
	batches  []int         // the size of every enrollment asked for
	gate     chan struct{} // when set, an enrollment waits for it
}

// Enroll enrolls items, all or none, as a cluster's transaction does.
func (c *fakeCluster) Enroll(_ context.Context, items []protocol.Item) error {
	c.mu.Lock()
	gate := c.gate
	c.batches = append(c.batches, len(items))
	c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range items {
		if _, ok := c.rows[it.ID]; ok {
			return &protocol.Error{Code: protocol.CodeDuplicate, Msg: "duplicate"}
		}
	}
	for _, it := range items {
		c.rows[it.ID] = it.Template
		c.enrolls++
	}
	return nil
}

func (c *fakeCluster) Delete(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.rows[id]; !ok {
		return &protocol.Error{Code: protocol.CodeUnknownID, Msg: "unknown"}
	}
	delete(c.rows, id)
	return nil
}

func (c *fakeCluster) Identify(_ context.Context, x []float32, k int) (*protocol.IdentifyOK, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	type m struct {
		id string
		s  float64
	}
	var ms []m
	for id, r := range c.rows {
		if s := cos(x, r); s >= 0.5 {
			ms = append(ms, m{id, s})
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].s > ms[j].s })
	if c.degraded {
		k = 1
	}
	res := &protocol.IdentifyOK{ScoresHidden: true, Degraded: c.degraded}
	for _, x := range ms[:min(k, len(ms))] {
		res.Candidates = append(res.Candidates, protocol.Candidate{ID: x.id})
	}
	res.Accepted = len(res.Candidates) > 0
	return res, nil
}

func (c *fakeCluster) Health(context.Context, string) (*protocol.HealthOK, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &protocol.HealthOK{Live: uint32(len(c.rows))}, nil
}

func (c *fakeCluster) Entry() string { return "p1" }

// The ABIS adapter lists no ids.
func (c *fakeCluster) IDs(context.Context, string, int) ([]string, bool, error) {
	return nil, false, protocol.Errorf(protocol.CodeInternal, "the ABIS adapter asked for a list of ids")
}
func (c *fakeCluster) Exists(context.Context, string) (bool, error) {
	return false, protocol.Errorf(protocol.CodeInternal, "the ABIS adapter asked whether an id is enrolled")
}

func cos(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

type docs map[string][]byte

func (d docs) Fetch(_ context.Context, url string) ([]byte, error) {
	if b, ok := d[url]; ok {
		return b, nil
	}
	return nil, fail(FailFetch, "no %s", url)
}

// person returns a 4-dimensional template near axis p (sample s).
func person(p, s int) []float32 {
	x := make([]float32, 4)
	x[p] = 1
	x[(p+1)%4] = 0.1 * float32(s)
	return x
}

type harness struct {
	t  *testing.T
	a  *Adapter
	c  *fakeCluster
	d  docs
	n  int
	jp string
}

func newHarness(t *testing.T, cal *config.Calibration) *harness {
	h := &harness{t: t, c: &fakeCluster{rows: map[string][]float32{}}, d: docs{}, jp: filepath.Join(t.TempDir(), "journal")}
	for p := range 4 {
		for s := range 3 {
			doc, _ := FixtureCBEFF(person(p, s))
			h.d[docURL(p, s)] = doc
		}
	}
	h.open(cal)
	return h
}

func (h *harness) open(cal *config.Calibration) {
	j, err := OpenJournal(h.jp)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { j.Close() })
	h.a = New(h.c, j, h.d, FixtureExtractor{}, Options{Dim: 4, MaxTopK: 3, Calibration: cal})
}

func docURL(p, s int) string { return "https://mosip/" + string(rune('a'+p)) + string(rune('0'+s)) }

// do sends one request and returns the answer.
func (h *harness) do(op string, f map[string]any) *Response {
	h.t.Helper()
	h.n++
	m := map[string]any{"id": op, "version": "1.1", "requestId": "r" + string(rune('A'+h.n%26)) + string(rune('0'+h.n/26)), "requesttime": "2026-01-01T00:00:00.000Z"}
	for k, v := range f {
		m[k] = v
	}
	body, _ := json.Marshal(m)
	q, bad := Decode(body)
	out, err := h.a.Answer(context.Background(), q, bad, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := CheckResponse(out, op); err != nil {
		h.t.Fatalf("%s: %v\n%s", op, err, out)
	}
	var r Response
	json.Unmarshal(out, &r)
	return &r
}

func ids(r *Response) []string {
	var out []string
	if r.CandidateList != nil {
		for _, c := range r.CandidateList.Candidates {
			out = append(out, c.ReferenceID)
		}
	}
	return out
}

func TestAdapterFlows(t *testing.T) {
	h := newHarness(t, nil)
	ok := func(r *Response) {
		t.Helper()
		if r.ReturnValue != ReturnSuccess {
			t.Fatalf("%s failed: %s", r.ID, r.FailureReason)
		}
	}
	failed := func(r *Response, want Failure) {
		t.Helper()
		if r.ReturnValue != ReturnFailed || r.FailureReason != strconv.Itoa(int(want)) {
			t.Fatalf("%s: returnValue %s failure %s, want %d", r.ID, r.ReturnValue, r.FailureReason, want)
		}
	}
	for p := range 4 {
		ok(h.do(OpInsert, map[string]any{"referenceId": "ref" + string(rune('0'+p)), "referenceURL": docURL(p, 0)}))
	}
	// Dedupe: a duplicate of person 0.
	ok(h.do(OpInsert, map[string]any{"referenceId": "dup", "referenceURL": docURL(0, 1)}))
	if got := ids(h.do(OpIdentify, map[string]any{"referenceId": "dup"})); !slices.Equal(got, []string{"ref0"}) {
		t.Fatalf("dedupe: %v", got)
	}
	ok(h.do(OpInsert, map[string]any{"referenceId": "dup2", "referenceURL": docURL(0, 2)}))
	if got := ids(h.do(OpIdentify, map[string]any{"referenceId": "ref0"})); len(got) != 2 {
		t.Fatalf("two duplicates: %v", got)
	}
	if got := ids(h.do(OpIdentify, map[string]any{"referenceId": "ref0", "flags": map[string]any{"maxResults": 1}})); len(got) != 1 {
		t.Fatalf("maxResults 1: %v", got)
	}
	// Gallery: the cluster returns at most 3, enough here.
	gal := map[string]any{"referenceIds": []map[string]string{{"referenceId": "dup2"}}}
	if got := ids(h.do(OpIdentify, map[string]any{"referenceId": "ref0", "gallery": gal})); !slices.Equal(got, []string{"dup2"}) {
		t.Fatalf("gallery: %v", got)
	}
	// Past the cluster's top-k the gallery cannot be served honestly.
	for s := range 3 {
		doc, _ := FixtureCBEFF([]float32{1, 0.01 * float32(s+1), 0, 0})
		h.d["https://mosip/near"+string(rune('0'+s))] = doc
		ok(h.do(OpInsert, map[string]any{"referenceId": "near" + string(rune('0'+s)), "referenceURL": "https://mosip/near" + string(rune('0'+s))}))
	}
	failed(h.do(OpIdentify, map[string]any{"referenceId": "ref0", "gallery": gal}), FailCannotServe)

	ok(h.do(OpDelete, map[string]any{"referenceId": "dup"}))
	failed(h.do(OpIdentify, map[string]any{"referenceId": "dup"}), FailRefIDNotFound)
	failed(h.do(OpDelete, map[string]any{"referenceId": "dup"}), FailRefIDNotFound)
	failed(h.do(OpInsert, map[string]any{"referenceId": "dup", "referenceURL": docURL(1, 1)}), FailRefIDExists)
	failed(h.do(OpInsert, map[string]any{"referenceId": "x", "referenceURL": "https://mosip/none"}), FailFetch)
	failed(h.do(OpIdentify, map[string]any{"referenceId": "nobody"}), FailRefIDNotFound)
	failed(h.do(OpIdentify, map[string]any{"referenceId": "ref1", "flags": map[string]any{"targetFPIR": 30}}), FailCannotServe) // not calibrated
	if r := h.do(OpReferenceCount, nil); r.Count == nil || *r.Count != "8" {
		t.Fatalf("referenceCount: %+v", r)
	}
	if r := h.do(OpPendingJobs, nil); r.JobsCount == nil || *r.JobsCount != "0" {
		t.Fatalf("pendingJobs: %+v", r)
	}
	// Degraded: the decision alone.
	h.c.degraded = true
	r := h.do(OpIdentify, map[string]any{"referenceURL": docURL(1, 1)})
	if !slices.Equal(ids(r), []string{"ref1"}) || r.CandidateList.Analytics["degraded"] != "true" || r.CandidateList.Analytics["complete"] != "false" {
		t.Fatalf("degraded: %+v", r.CandidateList)
	}
	failed(h.do(OpIdentify, map[string]any{"referenceId": "ref1"}), FailInternal)
}

// TestAdapterRestart: a change begun and done at the cluster but not
// answered (the adapter stopped between) is answered success when the
// broker redelivers it, not "already exists"; an answered request gets
// its recorded answer and is not done again.
func TestAdapterRestart(t *testing.T) {
	h := newHarness(t, nil)
	body := []byte(`{"id":"mosip.abis.insert","version":"1.1","requestId":"R","requesttime":"2026-01-01T00:00:00Z","referenceId":"A","referenceURL":"` + docURL(0, 0) + `"}`)
	q, _ := Decode(body)
	h.a.j.Begin(q)
	h.c.Enroll(context.Background(), []protocol.Item{{ID: "A", Template: person(0, 0)}}) // done, then a crash
	h.a.j.Close()
	h.open(nil)
	q, bad := Decode(body)
	first, err := h.a.Answer(context.Background(), q, bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r Response
	json.Unmarshal(first, &r)
	if r.ReturnValue != ReturnSuccess {
		t.Fatalf("redelivered insert: %s", first)
	}
	again, _ := h.a.Answer(context.Background(), q, bad, nil)
	if string(again) != string(first) || h.c.enrolls != 1 {
		t.Fatalf("answered again: %s (first %s), %d enrollments", again, first, h.c.enrolls)
	}
}

func TestAdapterTargetFPIR(t *testing.T) {
	cal := &config.Calibration{TargetFPIR: 1e-3, Rows: 4}
	h := newHarness(t, cal)
	for p := range 4 {
		h.do(OpInsert, map[string]any{"referenceId": "ref" + string(rune('0'+p)), "referenceURL": docURL(p, 0)})
	}
	for target, want := range map[int]string{20: ReturnSuccess, 30: ReturnSuccess, 40: ReturnFailed} {
		r := h.do(OpIdentify, map[string]any{"referenceId": "ref1", "flags": map[string]any{"targetFPIR": target}})
		if r.ReturnValue != want {
			t.Errorf("targetFPIR %d with the threshold calibrated for 30 at 4 records: %s %s", target, r.ReturnValue, r.FailureReason)
		}
	}
	// Past the size it was calibrated for the threshold no longer holds 30.
	doc, _ := FixtureCBEFF([]float32{0.5, 0.5, 0.5, 0.5})
	h.d["https://mosip/e"] = doc
	h.do(OpInsert, map[string]any{"referenceId": "extra", "referenceURL": "https://mosip/e"})
	for i := range 8 {
		h.c.rows["bulk"+string(rune('a'+i))] = []float32{-1, -1, 0.1 * float32(i), 1}
	}
	if r := h.do(OpIdentify, map[string]any{"referenceId": "ref1", "flags": map[string]any{"targetFPIR": 30}}); r.ReturnValue != ReturnFailed {
		t.Errorf("targetFPIR 30 at 13 records, calibrated for 4: answered")
	}
}

// TestInsertsBatched: inserts of different referenceIds that wait while
// one enrollment runs go to the cluster together, as one enrollment; a
// batch refused for one of its items (a referenceId the cluster already
// has) is enrolled again item by item, so that only that insert fails.
func TestInsertsBatched(t *testing.T) {
	h := newHarness(t, nil)
	h.c.rows["taken"] = person(3, 2) // enrolled, but not through this adapter
	round := func(refs []string) []*Response {
		t.Helper()
		gate := make(chan struct{})
		h.c.mu.Lock()
		h.c.gate, h.c.batches = gate, nil
		h.c.mu.Unlock()
		out := make([]*Response, len(refs))
		var wg sync.WaitGroup
		for i, ref := range refs {
			h.n++
			body, _ := json.Marshal(map[string]any{"id": OpInsert, "version": "1.1", "requestId": "b" + strconv.Itoa(h.n), "requesttime": "2026-01-01T00:00:00.000Z",
				"referenceId": ref, "referenceURL": docURL(i%4, i%3)})
			q, bad := Decode(body)
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := h.a.Answer(context.Background(), q, bad, nil)
				if err != nil {
					t.Error(err)
					return
				}
				var r Response
				json.Unmarshal(b, &r)
				out[i] = &r
			}()
			if i == 0 { // the first enrollment runs; the others queue behind it
				for {
					h.c.mu.Lock()
					n := len(h.c.batches)
					h.c.mu.Unlock()
					if n == 1 {
						break
					}
				}
			}
		}
		for {
			h.a.batches.mu.Lock()
			n := len(h.a.batches.queue)
			h.a.batches.mu.Unlock()
			if n == len(refs)-1 {
				break
			}
		}
		close(gate)
		wg.Wait()
		return out
	}
	refs := []string{"b0", "b1", "b2", "b3", "b4", "b5"}
	for i, r := range round(refs) {
		if r == nil || r.ReturnValue != ReturnSuccess {
			t.Fatalf("insert %s: %+v", refs[i], r)
		}
	}
	if !slices.Equal(h.c.batches, []int{1, 5}) {
		t.Fatalf("enrollments of %v, want [1 5]: the five that waited go together", h.c.batches)
	}
	refs = []string{"c0", "c1", "taken", "c3"}
	rs := round(refs)
	for i, r := range rs {
		want := ReturnSuccess
		if refs[i] == "taken" {
			want = ReturnFailed
		}
		if r == nil || r.ReturnValue != want {
			t.Fatalf("insert %s: %+v, want returnValue %s", refs[i], r, want)
		}
	}
	if !slices.Equal(h.c.batches, []int{1, 3, 1, 1, 1}) {
		t.Fatalf("enrollments of %v, want [1 3 1 1 1]: a batch refused for one item is enrolled item by item", h.c.batches)
	}
}

// countingDocs counts the fetches of each document.
type countingDocs struct {
	docs
	mu sync.Mutex
	n  map[string]int
}

func (d *countingDocs) Fetch(ctx context.Context, url string) ([]byte, error) {
	d.mu.Lock()
	d.n[url]++
	d.mu.Unlock()
	return d.docs.Fetch(ctx, url)
}

// TestDedupeUsesInsertTemplate: MOSIP's dedupe identifies a record by its
// referenceId right after inserting it; the template the insert extracted
// is used (kept in memory until then), not fetched and extracted again.
// Once taken, or after a delete, the next identify fetches it.
func TestDedupeUsesInsertTemplate(t *testing.T) {
	h := newHarness(t, nil)
	cd := &countingDocs{docs: h.d, n: map[string]int{}}
	h.a.f = cd
	if r := h.do(OpInsert, map[string]any{"referenceId": "A", "referenceURL": docURL(0, 0)}); r.ReturnValue != ReturnSuccess {
		t.Fatal(r.FailureReason)
	}
	if r := h.do(OpInsert, map[string]any{"referenceId": "A2", "referenceURL": docURL(0, 1)}); r.ReturnValue != ReturnSuccess {
		t.Fatal(r.FailureReason)
	}
	r := h.do(OpIdentify, map[string]any{"referenceId": "A2"})
	if r.ReturnValue != ReturnSuccess || !slices.Equal(ids(r), []string{"A"}) || cd.n[docURL(0, 1)] != 1 {
		t.Fatalf("identify of A2 right after its insert: %v %v, %d fetches", r.ReturnValue, ids(r), cd.n[docURL(0, 1)])
	}
	r = h.do(OpIdentify, map[string]any{"referenceId": "A2"})
	if r.ReturnValue != ReturnSuccess || !slices.Equal(ids(r), []string{"A"}) || cd.n[docURL(0, 1)] != 2 {
		t.Fatalf("a second identify of A2: %v %v, %d fetches (want it fetched again)", r.ReturnValue, ids(r), cd.n[docURL(0, 1)])
	}
	if r := h.do(OpDelete, map[string]any{"referenceId": "A"}); r.ReturnValue != ReturnSuccess {
		t.Fatal(r.FailureReason)
	}
	if got := h.a.recent.take("A", h.a.o.Now()); got != nil {
		t.Fatalf("a deleted record's template is still kept: %v", got)
	}
}

// TestRecentBounded: the kept templates are at most the bound, the oldest
// let go first (zeroed), and none older than recentTTL is returned.
func TestRecentBounded(t *testing.T) {
	r := newRecent(2)
	t0 := time.Unix(1000, 0)
	a := []float32{1, 2}
	r.put("a", a, t0)
	r.put("b", []float32{3}, t0)
	r.put("c", []float32{4}, t0.Add(time.Second))
	if r.take("a", t0) != nil || len(r.m) != 2 {
		t.Fatalf("the oldest of three kept with a bound of 2: %v", r.m)
	}
	if got := r.take("b", t0.Add(recentTTL)); got != nil {
		t.Fatalf("a template %v old returned: %v", recentTTL, got)
	}
	if got := r.take("c", t0.Add(2*time.Second)); !slices.Equal(got, []float32{4}) {
		t.Fatalf("c: %v", got)
	}
	if newRecent(-1).put("x", a, t0); a[0] != 1 {
		t.Fatal("put changed the caller's template")
	}
}
