package blind_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine/merge"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
)

// Adversarial tests of blind mode: what one server or one failure can and
// cannot do.

// TestRolesAreEnforced: the decider holds the scores of every query, so it
// must not be able to ask the holders for a query of its own (it would
// then learn a chosen probe's scores, and with sigma the rows). Servers
// that hold no rows may not identify, enroll or delete either.
func TestRolesAreEnforced(t *testing.T) {
	cl := start(t, 2, config.Literal{Beta: 21})
	if err := cl.Client("client", "").Enroll(ctx(t), items(templates(10, 40), "a")); err != nil {
		t.Fatal(err)
	}
	g, err := cl.RowMap("p2", "p1") // the row map p1 would send p2
	if err != nil {
		t.Fatal(err)
	}
	y := make([]int8, dim)
	y[0], y[1] = 1, -1
	q, err := additive.DenseQuery(y)
	if err != nil {
		t.Fatal(err)
	}
	pos, coef := q.Coefficients()
	forbidden := func(as, to string, m protocol.Msg) {
		t.Helper()
		_, err := rpc.Call(ctx(t), cl.Dialer(as), to, m)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
			t.Fatalf("%s sent %v to %s: %v, want forbidden", as, m.Type(), to, err)
		}
	}
	dec := cl.P.DeciderName()
	forbidden(dec, "p2", &protocol.BlindQuery{Query: [16]byte{1}, Digest: g, Pos: pos, Coef: coef})
	forbidden(dec, "p1", &protocol.Identify{TopK: 1, Template: templates(1, 41)[0]})
	forbidden(dec, "p1", &protocol.Delete{ID: "a-0"})
	forbidden(dec, "p1", &protocol.Enroll{Items: items(templates(1, 42), "z")})
	forbidden("p1", "p2", &protocol.Identify{TopK: 1, Template: templates(1, 41)[0]})
	forbidden("device", "p2", &protocol.BlindQuery{Query: [16]byte{2}, Digest: g, Pos: pos, Coef: coef})
	forbidden("device", dec, &protocol.DecideShare{Query: [16]byte{3}, Rows: 1, Bits: 8, TopK: 1, Entry: true})
}

// TestHelperFailureEndsTheQuery: a helper that cannot reach the decider
// fails the query at once with its reason; the entry does not sit on its
// stream to the decider until the deadline, and the decider forgets the
// query's shares.
func TestHelperFailureEndsTheQuery(t *testing.T) {
	cl := start(t, 3, config.Literal{Beta: 21, Timeout: config.Duration(9 * time.Second)})
	xs := templates(20, 43)
	if err := cl.Client("client", "").Enroll(ctx(t), items(xs, "a")); err != nil {
		t.Fatal(err)
	}
	dec := cl.P.DeciderName()
	cl.Net.SetFault("p3", dec, memnet.Fault{Refuse: true})
	t0 := time.Now()
	_, err := cl.Client("device", "p1").Identify(ctx(t), xs[0], 1)
	if err == nil || !strings.Contains(err.Error(), "p3") {
		t.Fatalf("a helper without the decider: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second { // DeciderWait is 3 s, the deadline 9 s
		t.Fatalf("the entry waited %v for a query a helper had failed", d)
	}
	cl.Net.SetFault("p3", dec, memnet.Fault{})

	// One helper fails while another is slow to acknowledge: the failure
	// ends the entry's wait for the slow one too.
	cl.Net.SetFault("p2", dec, memnet.Fault{Refuse: true})
	cl.Net.SetFault("p3", "p1", memnet.Fault{Delay: 5 * time.Second})
	t0 = time.Now()
	_, err = cl.Client("device", "p1").Identify(ctx(t), xs[0], 1)
	if err == nil || !strings.Contains(err.Error(), "p2") || time.Since(t0) > 2*time.Second {
		t.Fatalf("a failed and a slow helper: %v after %v", err, time.Since(t0))
	}
	cl.Net.SetFault("p2", dec, memnet.Fault{})
	cl.Net.SetFault("p3", "p1", memnet.Fault{})
	r, err := cl.Client("device", "p1").Identify(ctx(t), xs[0], 1)
	if err != nil || !r.Accepted || r.Candidates[0].ID != "a-0" {
		t.Fatalf("after the helper recovered: %+v %v", r, err)
	}
}

// sendShares speaks as holder `as` to the decider: a DecideShare and then
// `send` bytes of score shares.
func sendShares(t *testing.T, cl interface {
	Dialer(string) network.Dialer
}, dec, as string, m *protocol.DecideShare, send int) error {
	t.Helper()
	s, err := cl.Dialer(as).Open(ctx(t), dec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Finish()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	if err := s.WriteFrame(protocol.Marshal(m)); err != nil {
		t.Fatal(err)
	}
	s.Write(make([]byte, send))
	s.CloseWrite()
	_, err = rpc.ReadReply(ctx(t), s, dec)
	return err
}

// TestDeciderBoundsOrphans: one holder sending shares of queries no other
// holder joins fills at most half of the decider's table, those shares
// expire, and a share vector announced but not sent costs the decider no
// memory.
func TestDeciderBoundsOrphans(t *testing.T) {
	cl := start(t, 2, config.Literal{Beta: 21, Timeout: config.Duration(3 * time.Second)})
	dec := cl.P.DeciderName()
	var err error
	sent := 0
	for i := range merge.MaxQueries {
		m := &protocol.DecideShare{Query: [16]byte{byte(i), 7}, Rows: 64, Bits: 8, TopK: 1}
		if err = sendShares(t, cl, dec, "p2", m, 64); err != nil {
			break
		}
		sent++
	}
	var pe *protocol.Error
	if sent != merge.MaxQueries/2 || !errors.As(err, &pe) || pe.Code != protocol.CodeUnavailable || !strings.Contains(pe.Msg, "p2") {
		t.Fatalf("%d orphan queries taken, then %v", sent, err)
	}
	// They expire after DeciderWait (1 s) and a tick of the sweep.
	deadline := time.Now().Add(5 * time.Second)
	for sendShares(t, cl, dec, "p2", &protocol.DecideShare{Query: [16]byte{99}, Rows: 64, Bits: 8, TopK: 1}, 64) != nil {
		if time.Now().After(deadline) {
			t.Fatal("orphan shares never expired")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 2^27 rows announced (128 MB), 1 KB sent: the decider must not have
	// allocated the vector (the decider runs in this process).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err = sendShares(t, cl, dec, "p1", &protocol.DecideShare{Query: [16]byte{100}, Rows: 1 << 27, Bits: 8, TopK: 1, Entry: true}, 1024)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "score shares") {
		t.Fatalf("a truncated vector: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Fatalf("the decider allocated %d MB for 1 KB of score shares", grew>>20)
	}
}
