package replicated_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/modes/replicated"
	shares "github.com/idface/idface/sharing/replicated"

	"github.com/idface/idface/config"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Adversarial tests: one member (a holder, the entry, the decider) alters
// what it sends, byte by byte, through memnet's Corrupt fault on its link.
// Every altered query must be refused or, where the altered byte does not
// matter (a helper's top-K, say), answered exactly as without it; never
// answered wrongly, never with a score.

// tamperCluster is a cluster that hides scores, with 3 x 10 rows.
func tamperCluster(t *testing.T, deciderTau *float64) (*cluster, [][]float32, []string) {
	c := startCluster(t, config.Literal{Beta: 21, Timeout: config.Duration(1500 * time.Millisecond)}, deciderTau)
	xs, ids := enrollAll(t, c, 10, 7)
	return c, xs, ids
}

// outcome runs one query through p1 with f corrupting from -> to.
func outcome(t *testing.T, c *cluster, from, to string, f *flipper, y []float32, k int) (*protocol.IdentifyOK, error) {
	t.Helper()
	c.settle()
	c.net.SetFault(from, to, memnet.Fault{Corrupt: f.corrupt})
	defer c.net.SetFault(from, to, memnet.Fault{})
	return c.client("device", "p1").Identify(ctx(t), y, k)
}

// sameAnswer reports whether got is the honest answer or a prefix of it
// (an entry that alters its own top-K asks for fewer candidates).
func sameAnswer(got, honest *protocol.IdentifyOK) bool {
	if got.Accepted != honest.Accepted || len(got.Candidates) > len(honest.Candidates) || len(got.Candidates) == 0 && honest.Accepted {
		return false
	}
	for i, cd := range got.Candidates {
		if cd != honest.Candidates[i] {
			return false
		}
	}
	return true
}

func refused(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe)
}

// TestTamperingHolder: each holder (p1 is the entry) alters one byte of
// what it sends the decider: its full vector, the digest of its other
// vector, or the header. Every alteration of a vector or digest is
// refused by the decider naming the pair that disagrees (and counted); no
// alteration is ever answered wrongly. (The tags stay with the helpers:
// TestTamperingTagAnswers.)
func TestTamperingHolder(t *testing.T) {
	c, xs, _ := tamperCluster(t, nil)
	y := xs[4]
	honest, err := c.client("device", "p1").Identify(ctx(t), y, 3)
	if err != nil || !honest.Accepted {
		t.Fatalf("honest query: %v %+v", err, honest)
	}
	hdr := 4 + len(protocol.Marshal(&protocol.ReplShare{}))
	tail := 2 + 1 + 3*protocol.DigestSize + 2*protocol.VerdictKeySize // Down, Next, Hidden, the query digests, verdict keys and sigma digest follow the digest
	digestAt := hdr - tail - protocol.DigestSize
	rows := 30
	r := rand.New(rand.NewPCG(8, 9))
	dec := c.p.DeciderName()
	for hi, h := range []string{"p1", "p2", "p3"} {
		size := hdr + rows
		for at := range size {
			var must string // the pair the decider must name, if any
			switch {
			case at >= hdr:
				must = replicated.PairLabel(c.decP(), hi, (hi+2)%3) // own vector, against its other holder's digest
			case at >= digestAt && at < hdr-tail:
				must = replicated.PairLabel(c.decP(), hi, (hi+1)%3)
			case at >= 4+2 && at < 4+2+16 && at%8 != 6:
				continue // the query id: the decider holds the real query until DeciderWait; two bytes suffice
			}
			f := &flipper{at: at, mask: byte(1 + r.IntN(255))}
			before := c.counter(dec, "idface_repl_refusals_total", must)
			got, err := outcome(t, c, h, dec, f, y, 3)
			switch {
			case err == nil && must != "":
				t.Fatalf("%s altered %v (pair %s): answered %+v", h, f, must, got)
			case err == nil && !sameAnswer(got, honest):
				t.Fatalf("%s altered %v: a wrong answer %+v, honest %+v", h, f, got, honest)
			case err != nil && !refused(err):
				t.Fatalf("%s altered %v: %v", h, f, err)
			case must != "" && (!strings.Contains(err.Error(), must) || c.counter(dec, "idface_repl_refusals_total", must) != before+1):
				t.Fatalf("%s altered %v: %v; want the pair %s named and counted", h, f, err, must)
			case err == nil:
				for _, cd := range got.Candidates {
					if cd.Score != 0 {
						t.Fatalf("%s altered %v: a score in the answer", h, f)
					}
				}
			}
		}
	}
	// The cluster still answers.
	if got, err := c.client("device", "p1").Identify(ctx(t), y, 3); err != nil || !sameAnswer(got, honest) {
		t.Fatalf("after the tampering: %v %+v", err, got)
	}
}

// decP is the cluster's parameters as this package reads them.
func (c *cluster) decP() *replicated.Params {
	p, err := replicated.NewParams(c.p)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// TestTamperingEntry: the entry sends a helper another sigma or another
// query (any byte of sigma, of the positions or of the coefficients), or a
// helper tells the entry another tag key: every such query is refused.
func TestTamperingEntry(t *testing.T) {
	c, xs, _ := tamperCluster(t, nil)
	y := xs[12]
	sigmaAt := 4 + 2 + 16
	coefAt := sigmaAt + 32 + 4 + 3*24 + 4
	r := rand.New(rand.NewPCG(10, 11))
	var offsets []int
	for at := sigmaAt; at < sigmaAt+32; at++ {
		offsets = append(offsets, at)
	}
	for at := coefAt; at < coefAt+3*21; at++ {
		offsets = append(offsets, at)
	}
	for _, at := range offsets {
		for _, helper := range []string{"p2", "p3"} {
			f := &flipper{at: at, mask: byte(1 + r.IntN(255)), only: protocol.TBlindQuery}
			got, err := outcome(t, c, "p1", helper, f, y, 3)
			if err == nil || !refused(err) {
				t.Fatalf("the entry altered %v of its query to %s: %v %+v", f, helper, err, got)
			}
		}
	}
	// The down holder (the last byte): naming any holder down to one
	// helper only, or a value that is no holder, is refused.
	downAt := coefAt + 3*21
	for _, mask := range []byte{1, 2, 3, 4, byte(5 + r.IntN(250))} {
		for _, helper := range []string{"p2", "p3"} {
			f := &flipper{at: downAt, mask: mask, only: protocol.TBlindQuery}
			got, err := outcome(t, c, "p1", helper, f, y, 3)
			if err == nil || !refused(err) {
				t.Fatalf("the entry altered %v (the down holder) of its query to %s: %v %+v", f, helper, err, got)
			}
		}
	}
	// A helper's tag key to the entry: ReplQueryOK is version, type, bytes, key.
	keyAt := 4 + 2 + 8
	for at := keyAt; at < keyAt+32; at += 5 {
		f := &flipper{at: at, mask: byte(1 + r.IntN(255)), only: protocol.TReplQueryOK}
		_, err := outcome(t, c, "p3", "p1", f, y, 3)
		if err == nil || !strings.Contains(err.Error(), "tag key") {
			t.Fatalf("p3 altered %v of its tag key: %v", f, err)
		}
	}
}

// TestDeviatingDecider: a decider that applies a lower threshold answers
// rows below the real one: the entry refuses every such answer (and
// counts it), and answers correctly when the best row does reach the
// threshold. A decider that alters any byte of its answer is refused.
func TestDeviatingDecider(t *testing.T) {
	low := 0.02
	c, xs, ids := tamperCluster(t, &low)
	refusals := 0
	for q := range 12 {
		y := templates(1, uint64(200+q))[0]
		if q%4 == 0 {
			y = xs[q]
		}
		want := plain(t, c.p, xs, y)
		best := slices.Max(want)
		got, err := c.client("device", "p1").Identify(ctx(t), y, 1)
		if best < c.p.Threshold() {
			if err == nil || !strings.Contains(err.Error(), "below the threshold") {
				t.Fatalf("probe %d (best %d < %d): %v %+v", q, best, c.p.Threshold(), err, got)
			}
			refusals++
			continue
		}
		if err != nil || len(got.Candidates) != 1 || want[slices.Index(ids, got.Candidates[0].ID)] != best {
			t.Fatalf("probe %d (best %d): %v %+v", q, best, err, got)
		}
	}
	if refusals == 0 || c.counter("p1", "idface_repl_entry_refusals_total", c.p.DeciderName()) != float64(refusals) {
		t.Fatalf("%d refusals, counted %v", refusals, c.counter("p1", "idface_repl_entry_refusals_total", c.p.DeciderName()))
	}

}

// TestTamperingDecider: an honest decider's answer (one row, above the
// threshold) altered in any byte on its way to the entry (a decider that
// lies about a position, a value or a tag) is refused, never answered.
// The 8 bytes before the verdict's length (empty: a visible probe) are
// the bytes its fetch of tags moved, a count the entry cannot check but
// bounds: altered in its low bytes, the answer is right; a count past any
// fetch's is refused.
func TestTamperingDecider(t *testing.T) {
	c, xs, _ := tamperCluster(t, nil)
	y := xs[3]
	honest, err := c.client("device", "p1").Identify(ctx(t), y, 1)
	if err != nil || !honest.Accepted {
		t.Fatalf("honest query: %v %+v", err, honest)
	}
	size := 4 + len(protocol.Marshal(&protocol.ReplResult{Positions: []uint32{0}, Values: []uint16{0}, Tags: []uint32{0}}))
	r := rand.New(rand.NewPCG(12, 13))
	for at := range size {
		f := &flipper{at: at, mask: byte(1 + r.IntN(255))}
		got, err := outcome(t, c, c.p.DeciderName(), "p1", f, y, 1)
		if !answerRefused(at, size-4, honest, got, err) {
			t.Fatalf("the decider altered %v of its answer: %v %+v", f, err, got)
		}
	}
	if got, err := c.client("device", "p1").Identify(ctx(t), y, 1); err != nil || !sameAnswer(got, honest) {
		t.Fatalf("after the tampering: %v %+v", err, got)
	}
}

// answerRefused reports whether an answer altered at byte at was refused,
// as it must be; in the fetch's count (the 8 bytes, big-endian, that end
// at fetched) it may be answered, rightly, where the count stays within
// any fetch's.
func answerRefused(at, fetched int, honest, got *protocol.IdentifyOK, err error) bool {
	if at >= fetched-2 && at < fetched && err == nil {
		return sameAnswer(got, honest)
	}
	return err != nil && refused(err)
}

// TestTamperingTagAnswers: either helper that keeps the tags (p3 sends
// the list of row digests, p2 its digest, for entry p1) alters a byte of
// its answer to the decider's fetch: the query is refused by the decider
// every time, whatever the answer, so the refusal tells the helper
// nothing of it (before the row digests, only an altered byte of the
// answered position's tag was refused, at the entry: a helper altering
// slot 0 learned whether the probe matched anyone). An altered row or
// list names the pair and is counted.
func TestTamperingTagAnswers(t *testing.T) {
	c, xs, _ := tamperCluster(t, nil)
	y := xs[3]
	honest, err := c.client("device", "p1").Identify(ctx(t), y, 1)
	if err != nil || !honest.Accepted {
		t.Fatalf("honest query: %v %+v", err, honest)
	}
	cols, rows := shares.TagGrid(30)
	r := rand.New(rand.NewPCG(14, 15))
	for _, h := range []string{"p2", "p3"} {
		ans := &protocol.TagAnswers{Rows: [][]byte{make([]byte, 4*cols)}}
		if h == "p3" {
			ans.List = make([]byte, rows*shares.TagRowDigestSize)
		}
		size := 4 + len(protocol.Marshal(ans))
		rowsAt := size - 4*cols // the answer's row: a refusal naming the pair
		for at := range size {
			f := &flipper{at: at, mask: byte(1 + r.IntN(255)), only: protocol.TTagAnswers}
			before := c.counter(c.p.DeciderName(), "idface_repl_refusals_total", "p2/p3")
			got, err := outcome(t, c, h, c.p.DeciderName(), f, y, 1)
			switch {
			case err == nil || !refused(err):
				t.Fatalf("%s altered %v of its tag answer: %v %+v", h, f, err, got)
			case at >= rowsAt && (!strings.Contains(err.Error(), "(p2/p3) answered their fetch inconsistently") ||
				c.counter(c.p.DeciderName(), "idface_repl_refusals_total", "p2/p3") != before+1):
				t.Fatalf("%s altered %v of its tag answer's row: %v; want the pair named and counted", h, f, err)
			}
		}
	}
	if got, err := c.client("device", "p1").Identify(ctx(t), y, 1); err != nil || !sameAnswer(got, honest) {
		t.Fatalf("after the tampering: %v %+v", err, got)
	}
}

func TestPairLabel(t *testing.T) {
	c := startCluster(t, config.Literal{Beta: 21}, nil)
	if got := replicated.PairLabel(c.decP(), 2, 0); got != "p1/p3" {
		t.Fatal(got)
	}
}

// TestRolesAndEmpty: only a holder queries another holder and only
// holders send score shares (the decider, holding every query's scores,
// must not start a query of its own); an empty gallery rejects.
func TestRolesAndEmpty(t *testing.T) {
	c := startCluster(t, config.Literal{Beta: 21}, nil)
	r, err := c.client("device", "p2").Identify(ctx(t), templates(1, 50)[0], 1)
	if err != nil || r.Accepted || len(r.Candidates) != 0 {
		t.Fatalf("empty gallery: %v %+v", err, r)
	}
	enrollAll(t, c, 3, 51)
	forbidden := func(as, to string, m protocol.Msg) {
		t.Helper()
		_, err := rpc.Call(ctx(t), c.dialer(as), to, m)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
			t.Fatalf("%s sent %v to %s: %v, want forbidden", as, m.Type(), to, err)
		}
	}
	bq := &protocol.BlindQuery{Query: [16]byte{1}, Digest: protocol.Digest{{}, {}, {}}, Pos: []int32{0}, Coef: []int8{1}}
	dec := c.p.DeciderName()
	forbidden(dec, "p2", bq)
	forbidden("device", "p2", bq)
	forbidden("client", "p2", bq)
	forbidden("device", dec, &protocol.ReplShare{Query: [16]byte{3}, Rows: 1, Bits: 8, TopK: 1})
	forbidden(dec, "p1", &protocol.Identify{TopK: 1, Template: templates(1, 52)[0]})
}
