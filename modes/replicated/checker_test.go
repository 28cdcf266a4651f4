package replicated_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idface/idface/client"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	shares "github.com/idface/idface/sharing/replicated"
)

// typeCounter counts the frames of one message type a member writes to
// another (a frame's 4-byte length may come alone, its body next).
type typeCounter struct {
	mu     sync.Mutex
	t      protocol.Type
	n      int
	header bool
}

func (c *typeCounter) tap(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	is := func(b []byte) bool { return len(b) >= 2 && b[0] == protocol.Version && protocol.Type(b[1]) == c.t }
	switch {
	case len(p) > 4 && is(p[4:]), c.header && is(p):
		c.n++
	}
	c.header = len(p) == 4
}

func (c *typeCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestRefusedHiddenLooksAnswered (issue 44 item 3): a helper, a checker
// of its neighbours' products, used to read the outcome of its own check
// from whether the decider fetched the answer's tags (it did so only for
// queries whose checks passed), and the entry read which check failed
// from the refusal. Now a refused hidden probe gets the same fetch, at
// each helper, as an answered one, and its refusal names no holder.
func TestRefusedHiddenLooksAnswered(t *testing.T) {
	c, xs, ids := hiddenCluster(t)
	dec := c.p.DeciderName()
	counters := map[string]*typeCounter{}
	for _, h := range []string{"p2", "p3"} {
		counters[h] = &typeCounter{t: protocol.TTagAsk}
		c.net.SetFault(dec, h, memnet.Fault{Corrupt: counters[h].tap})
	}
	asks := func() (int, int) { return counters["p2"].count(), counters["p3"].count() }
	const n = 6
	for q := range n { // honest: answered
		r, err := c.client("device", "p1").Identify(ctx(t), xs[q], 1)
		if err != nil || !r.Accepted || r.Candidates[0].ID != ids[q] {
			t.Fatalf("honest probe %d: %v %+v", q, err, r)
		}
	}
	a2, a3 := asks()
	if a2 != n || a3 != n {
		t.Fatalf("%d answered probes: the decider asked p2 %d and p3 %d times for tags", n, a2, a3)
	}
	// p3 deviates in its product share of every row: every probe is
	// refused (but about one in 64..256, whose shift is 0).
	var undo []func()
	for row := range 30 {
		undo = append(undo, replicated.CorruptShare(c.holders["p3"], row/10, row%10, 3))
	}
	defer func() {
		for _, u := range undo {
			u()
		}
	}()
	refusals := 0
	for q := range n {
		_, err := c.client("device", "p1").Identify(ctx(t), xs[q], 1)
		if err == nil {
			continue
		}
		if !refusedHidden(err) || strings.Contains(err.Error(), "p3 (") {
			t.Fatalf("refused probe %d: %v; want the one refusal, naming no holder", q, err)
		}
		refusals++
	}
	if refusals < n-1 {
		t.Fatalf("%d of %d probes refused with p3 deviating", refusals, n)
	}
	b2, b3 := asks()
	if b2-a2 != n || b3-a3 != n {
		t.Fatalf("%d refused or answered probes: the decider asked p2 %d and p3 %d times for tags; want %d each, as for answered ones", n, b2-a2, b3-a3, n)
	}
}

// frameTap keeps every frame of one message type a member writes to
// another (a frame's 4-byte length may come alone, its body next, and a
// body in several writes).
type frameTap struct {
	mu     sync.Mutex
	t      protocol.Type
	buf    []byte
	frames [][]byte
}

func (f *frameTap) tap(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	for len(f.buf) >= 4 {
		n := int(f.buf[0])<<24 | int(f.buf[1])<<16 | int(f.buf[2])<<8 | int(f.buf[3])
		if len(f.buf) < 4+n {
			return
		}
		if body := f.buf[4 : 4+n]; len(body) >= 2 && protocol.Type(body[1]) == f.t {
			f.frames = append(f.frames, append([]byte(nil), body...))
		}
		f.buf = f.buf[4+n:]
	}
}

func (f *frameTap) take() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.frames
	f.frames, f.buf = nil, nil
	return out
}

// TestFailedCheckLooksPassed (issue 44 item 3): a checker at the entry
// that biases its check (here p1 alters its check parts on the way to the
// decider) used to read the outcome from the refusal: a test of one bit of
// the probe a query. Now the refusal is sealed to the device, and the
// entry gets what it would get had the check passed: where only a
// helper's product failed its check (p1 biased its check of p3), the
// decision on the vectors as they are. So what p1 receives is the same,
// byte for byte but the sealed verdict, for a stranger's probe, and the
// same answer for an enrolled face, whether its check passed or failed,
// while the device (which alone opens the verdict) is refused. Where the
// entry's own product failed its check (p2 biased its check of p1), the
// entry gets no candidate, as for a probe that matched nobody: it is
// honest then, or it shifted its own product to aim at rows, and must not
// read a decision on it.
func TestFailedCheckLooksPassed(t *testing.T) {
	c, xs, ids := hiddenCluster(t)
	dec := c.p.DeciderName()
	results := &frameTap{t: protocol.TReplResult}
	c.net.SetFault(dec, "p1", memnet.Fault{Corrupt: results.tap})
	// A holder's check parts follow its ReplShare and its vector of 30
	// rows; their last byte is of the digest of the vector it checks
	// (its predecessor's: p1 checks p3's so, p2 checks p1's).
	bits := c.decP().Bits
	checkEnd := 4 + len(protocol.Marshal(&protocol.ReplShare{})) + 30*bits/8 + protocol.ReplChecksSize(shares.CheckPartSize(c.p.Dim()), bits) - 1
	probe := func(y []float32, biased string) (*protocol.IdentifyOK, *protocol.ReplResult, error) {
		t.Helper()
		if biased != "" {
			f := &flipper{at: checkEnd, mask: 0x10, only: protocol.TReplShare}
			c.net.SetFault(biased, dec, memnet.Fault{Corrupt: f.corrupt})
			defer c.net.SetFault(biased, dec, memnet.Fault{})
		}
		pr, err := client.HideProbe(c.p, c.signer("device"), "device", y, 1)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rpc.Call(ctx(t), c.dialer("device"), "p1", pr.HiddenIdentify)
		if err != nil {
			t.Fatalf("the entry's answer (%q biased): %v", biased, err)
		}
		ok := resp.(*protocol.IdentifyOK)
		frames := results.take()
		if len(frames) != 1 {
			t.Fatalf("the decider sent the entry %d results", len(frames))
		}
		m, err := protocol.Decode(frames[0])
		if err != nil {
			t.Fatal(err)
		}
		return ok, m.(*protocol.ReplResult), client.CheckVerdicts(c.p, pr.VerdictKey, ok)
	}
	count := func(name string) float64 { return c.counter(dec, "idface_repl_refusals_total", name) }
	before := count("p3")
	strangers := templates(6, 99)
	for i, y := range strangers {
		honest, hres, herr := probe(y, "")
		biased, bres, berr := probe(y, "p1")
		if herr != nil || honest.Accepted {
			t.Fatalf("stranger %d, honest checks: %v %+v", i, herr, honest)
		}
		if !refusedHidden(berr) {
			t.Fatalf("stranger %d, a biased check: the device was told %v, want the refusal", i, berr)
		}
		if biased.Accepted || len(biased.Candidates) != 0 || len(biased.Verdicts) != len(honest.Verdicts) {
			t.Fatalf("stranger %d: the entry answered a failed check with %+v, a passed one with %+v", i, biased, honest)
		}
		hv, bv := hres.Verdict, bres.Verdict
		hres.Verdict, bres.Verdict = nil, nil
		if len(hv) != len(bv) || string(protocol.Marshal(hres)) != string(protocol.Marshal(bres)) {
			t.Fatalf("stranger %d: the entry got %+v (%d-byte verdict) for a failed check, %+v (%d) for a passed one", i, bres, len(bv), hres, len(hv))
		}
	}
	if got := count("p3") - before; got != float64(len(strangers)) {
		t.Fatalf("the decider counted %v refusals naming p3 (whose check p1 biased) for %d biased checks", got, len(strangers))
	}
	// Enrolled faces: with p1's check of p3 biased, p1 gets the id as
	// with its check passed, and the device is refused.
	for _, i := range []int{2, 13, 24} {
		honest, hres, herr := probe(xs[i], "")
		biased, bres, berr := probe(xs[i], "p1")
		if herr != nil || !honest.Accepted || honest.Candidates[0].ID != ids[i] || !refusedHidden(berr) {
			t.Fatalf("enrolled face %d: honest %v %+v, device with p1 biased %v", i, herr, honest, berr)
		}
		// (Bytes differ by the device's signature, whose length varies.)
		honest.Verdicts, biased.Verdicts, honest.BytesTotal, biased.BytesTotal = nil, nil, 0, 0
		if string(protocol.Marshal(honest)) != string(protocol.Marshal(biased)) || len(hres.Positions) != len(bres.Positions) || len(hres.Verdict) != len(bres.Verdict) {
			t.Fatalf("enrolled face %d: the entry answered %+v with its check biased, %+v with it passed", i, biased, honest)
		}
	}
	// p2 biases its check of the entry's product: the honest entry gets
	// no candidate, the device the refusal.
	before = count("p1")
	biased, bres, berr := probe(xs[2], "p2")
	if !refusedHidden(berr) || biased.Accepted || len(biased.Candidates) != 0 || len(bres.Positions) != 0 {
		t.Fatalf("p2 biased its check of p1: the entry got %+v (%d positions), the device %v", biased, len(bres.Positions), berr)
	}
	if got := count("p1") - before; got != 1 {
		t.Fatalf("the decider counted %v refusals naming p1", got)
	}
}

// TestDedupeRefusedEnrolls (issue 44 item 3, the dedupe path): a
// dedupe that stops at a refused search shows every holder whether a
// deviating checker's test of the enrolee's probe passed (an enrollment
// follows or not). With Bulk.EnrollRefused the item is enrolled anyway,
// unchecked, and told to the operator once enrolled. Here p2 biases its
// check of the entry's product on chosen searches: without the option
// the enrollment stops at the first, enrolling nothing; with it, over
// searches biased and honest in turn, exactly the biased items are
// enrolled unchecked, and an honest search still leaves a person
// enrolled already out (a biased one lets such a duplicate in, listed:
// the option's price).
func TestDedupeRefusedEnrolls(t *testing.T) {
	c, xs, ids := hiddenCluster(t)
	dec := c.p.DeciderName()
	bits := c.decP().Bits
	rows := len(ids)
	const honest, biased, broken = 0, 1, 2
	bias := func(how int) { // p2's next ReplShare: its check parts' last byte, or its type
		at := 4 + len(protocol.Marshal(&protocol.ReplShare{})) + rows*bits/8 + protocol.ReplChecksSize(shares.CheckPartSize(c.p.Dim()), bits) - 1
		switch how {
		case honest:
			c.net.SetFault("p2", dec, memnet.Fault{})
			return
		case broken: // the decider cannot read it: a failure, not a verdict
			at = 5
		}
		f := &flipper{at: at, mask: 0x10, only: protocol.TReplShare}
		c.net.SetFault("p2", dec, memnet.Fault{Corrupt: f.corrupt})
	}
	defer bias(honest)
	op := c.client("client", "p1")
	run := func(batch [][]float32, prefix string, how func(i int) int, refused bool) (int, []string, []client.Duplicate, error) {
		t.Helper()
		var unchecked []string
		var dups []client.Duplicate
		bias(how(0))
		n, err := op.EnrollAll(ctx(t), len(batch), func(i int) protocol.Item {
			return protocol.Item{ID: fmt.Sprintf("%s-%d", prefix, i), Template: batch[i]}
		}, client.Bulk{Batch: 1, Dedupe: true, EnrollRefused: refused,
			Unchecked: func(_ int, id string) { unchecked = append(unchecked, id) },
			Duplicate: func(d client.Duplicate) { dups = append(dups, d) },
			Before:    func(idx []int) error { rows++; bias(how(idx[0] + 1)); return nil }}) // the next search's
		bias(honest)
		return n, unchecked, dups, err
	}
	always := func(int) int { return biased }
	strangers := templates(4, 99)

	if n, _, _, err := run(strangers[:3], "stop", always, false); n != 0 || !refusedHidden(err) {
		t.Fatalf("a dedupe whose search was refused, without EnrollRefused: %d enrolled, %v", n, err)
	}
	// Searches 0 and 2 biased, 1 and 3 honest; item 3 is enrolled already.
	batch := [][]float32{strangers[0], strangers[1], strangers[2], xs[4]}
	n, unchecked, dups, err := run(batch, "mixed", func(i int) int { return 1 - i%2 }, true)
	if err != nil || n != 3 || fmt.Sprint(unchecked) != "[mixed-0 mixed-2]" || len(dups) != 1 || dups[0].ID != "mixed-3" || dups[0].Matched != ids[4] {
		t.Fatalf("biased and honest searches in turn: %d enrolled (%v), unchecked %v (want mixed-0 and mixed-2), duplicates %+v", n, err, unchecked, dups)
	}
	// A biased search of a person enrolled already lets the duplicate in,
	// listed.
	if n, unchecked, dups, err := run([][]float32{xs[5], strangers[3]}, "dup", always, true); err != nil || n != 2 || fmt.Sprint(unchecked) != "[dup-0 dup-1]" || len(dups) != 0 {
		t.Fatalf("biased searches of a duplicate and a stranger: %d enrolled (%v), unchecked %v, duplicates %+v", n, err, unchecked, dups)
	}
	// A search that fails otherwise (the decider cannot read p2's part)
	// stops the enrollment, EnrollRefused or not: only this client's own
	// verdict enrolls unchecked.
	if n, unchecked, _, err := run([][]float32{templates(1, 98)[0]}, "failed", func(int) int { return broken }, true); n != 0 || err == nil || refusedHidden(err) || len(unchecked) != 0 {
		t.Fatalf("a search that failed without a verdict, with EnrollRefused: %d enrolled, unchecked %v, %v", n, unchecked, err)
	}
	r, err := c.client("device", "p1").Identify(ctx(t), strangers[0], 1)
	if err != nil || !r.Accepted || r.Candidates[0].ID != "mixed-0" {
		t.Fatalf("an unchecked enrollee, searched again: %v %+v", err, r)
	}
}

// TestHiddenSigmaBound (review of 152aec2): an entry that gives its two
// helpers different sigmas (here p1's HiddenQuery to p3 has one byte of
// sigma changed) could make the helpers check its product under two
// permutations, shift its own product so that its checks pass, and be
// answered a decision on it, since only the helpers' products failed. Now
// every holder sends the decider the digest of the sigma it permuted
// with, and the decider refuses the probe as it does different query
// shares: the entry gets no candidate, the device the refusal, and the
// pair is counted.
func TestHiddenSigmaBound(t *testing.T) {
	c, xs, ids := hiddenCluster(t)
	dec := c.p.DeciderName()
	hq := 4 + len(protocol.Marshal(&protocol.HiddenQuery{Digest: protocol.Digest{{}, {}, {}}}))
	before := c.counter(dec, "idface_repl_refusals_total", "p2/p3")
	for _, i := range []int{2, 13} {
		f := &flipper{at: hq + 16 + 5, mask: 0x20, only: protocol.THiddenQuery} // a byte of the item's sigma
		c.net.SetFault("p1", "p3", memnet.Fault{Corrupt: f.corrupt})
		pr, err := client.HideProbe(c.p, c.signer("device"), "device", xs[i], 1)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rpc.Call(ctx(t), c.dialer("device"), "p1", pr.HiddenIdentify)
		c.net.SetFault("p1", "p3", memnet.Fault{})
		if err != nil {
			t.Fatalf("face %d, sigmas split: %v", i, err)
		}
		ok := resp.(*protocol.IdentifyOK)
		if ok.Accepted || len(ok.Candidates) != 0 || !refusedHidden(client.CheckVerdicts(c.p, pr.VerdictKey, ok)) {
			t.Fatalf("face %d (%s), sigmas split: the entry got %+v; want no candidate, and the device refused", i, ids[i], ok)
		}
	}
	if got := c.counter(dec, "idface_repl_refusals_total", "p2/p3") - before; got != 2 {
		t.Fatalf("the decider counted %v refusals of the pair p2/p3 for 2 probes with sigmas split", got)
	}
}
