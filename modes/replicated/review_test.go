package replicated_test

// Regression tests from the adversarial review of the share records
// (issue 44 item 1): each failed at the commit before its mend.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

// rewriteMsg is a memnet Corrupt that decodes every frame of type typ the
// sender writes, lets f change it (f returns false: leave it), and writes
// it back when its encoding keeps its length: a deviating sender.
func rewriteMsg(typ protocol.Type, f func(protocol.Msg) bool) func(p []byte) {
	return func(p []byte) {
		for _, off := range []int{4, 0} { // a small frame has its length prefix in the same write
			if len(p) < off+2 || p[off+1] != byte(typ) || p[off] != protocol.Version {
				continue
			}
			m, err := protocol.Decode(p[off:])
			if err != nil {
				continue
			}
			if !f(m) {
				return
			}
			if b := protocol.Marshal(m); len(b) == len(p)-off {
				copy(p[off:], b)
			}
			return
		}
	}
}

func metricLines(page, prefix string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAttestRefusalNamesPair: p1 deviates only in the records it
// attests to p3 after a reshare of its segment (it flips a byte of the
// fresh record of the last row it attests). p3, the recorder of s_1,
// refuses the attestation: so far as designed. But whom does p3 count?
func TestAttestRefusalNamesPair(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	if err := c.Client("client", "p1").Enroll(ctx(t), items(templates(4, 91), "a")); err != nil {
		t.Fatal(err)
	}
	c.Net.SetFault("p1", "p3", memnet.Fault{Corrupt: rewriteMsg(protocol.TReplRows, func(m protocol.Msg) bool {
		r := m.(*protocol.ReplRows)
		if len(r.IDs) == 0 || len(r.Shares) != 0 { // attest answers only
			return false
		}
		r.Records[len(r.Records)-1] ^= 1
		return true
	})})
	if _, err := c.Client("client", "p1").Reshare(ctx(t), "p1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(c.Metrics("p3"), "idface_repl_fetch_refused_total{") {
		if time.Now().After(deadline) {
			t.Fatalf("p3 refused nothing in 20 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	page := c.Metrics("p3")
	if got := metricLines(page, "idface_repl_fetch_refused_total{"); !strings.HasPrefix(got, `idface_repl_fetch_refused_total{pair="p1/p2"}`) || strings.Count(got, "\n") > 0 {
		t.Errorf("p1 deviated in its attestation; p3 counts %q, want the pair p1/p2 alone (it cannot tell which of the two)", got)
	}
}

// TestThirdRecordRefusalNamesPair: p2 is stale (restored from a copy
// that misses 2 rows of origin p1); p3 deviates only in the fresh record
// of p2's third share s_0 that it sends with the rows. p2 refuses: so far
// as designed. Whom does it count?
func TestThirdRecordRefusalNamesPair(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(6, 92)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:4], "early")); err != nil {
		t.Fatal(err)
	}
	c.RestoreBehind("p2", func() {
		if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[4:6], "late")); err != nil {
			t.Fatal(err)
		}
		c.Net.SetFault("p3", "p2", memnet.Fault{Corrupt: rewriteMsg(protocol.TReplRows, func(m protocol.Msg) bool {
			r := m.(*protocol.ReplRows)
			if len(r.IDs) == 0 || len(r.Shares) == 0 {
				return false
			}
			r.Records[len(r.Records)-1] ^= 1 // the last row's fresh record of s_0
			return true
		})})
	})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(c.Metrics("p2"), "idface_repl_fetch_refused_total{") {
		if time.Now().After(deadline) {
			t.Fatalf("p2 refused nothing in 20 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err := c.Agreement("p2")
	page := c.Metrics("p2")
	t.Logf("p2: %v\n%s", err, metricLines(page, "idface_repl_fetch_refused_total"))
	if got := metricLines(page, "idface_repl_fetch_refused_total{"); !strings.HasPrefix(got, `idface_repl_fetch_refused_total{pair="p1/p3"}`) || strings.Count(got, "\n") > 0 {
		t.Errorf("p3 deviated in the record it sent; p2 counts %q, want the pair p1/p3 alone", got)
	}
	if err == nil || !strings.Contains(err.Error(), "p2 stands down") {
		t.Errorf("p2 after refusing the rows: %v; want it to stand down", err)
	}
}

// TestReshareVoteThirdDigest: p1 deviates only in the third digest
// of its vote on p2's reshare (the digest of its records, all zeros in a
// reshare): which pairs does the abort name?
func TestReshareVoteThirdDigest(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	if err := c.Client("client", "p2").Enroll(ctx(t), items(templates(3, 93), "b")); err != nil {
		t.Fatal(err)
	}
	c.Net.SetFault("p1", "p2", memnet.Fault{Corrupt: rewriteMsg(protocol.TVote, func(m protocol.Msg) bool {
		v := m.(*protocol.Vote)
		if len(v.Check) != 96 {
			return false
		}
		v.Check[95] = 1
		return true
	})})
	_, err := c.Client("client", "p2").Reshare(ctx(t), "p2")
	if err == nil || !strings.Contains(err.Error(), "(p1)") || strings.Contains(err.Error(), "p2/p3") {
		t.Errorf("p1 deviated in its vote on a reshare: %v; want the reshare refused naming p1 alone", err)
	}
}

type statser interface{ Stats() engine.Stats }

// TestOwnRewriteKeepsDecision: after a Rewrite of its own segment
// (attestRecords), a restarted holder's log names the Rewrite as its last
// own transaction; the decision of its real last transaction, which a peer
// missed, is not sent again, and the peer aborts a transaction the two
// others committed when the next prepare comes.
func TestOwnRewriteKeepsDecision(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("rewrite=%v", rewrite), func(t *testing.T) { ownRewrite(t, rewrite) })
	}
}

func ownRewrite(t *testing.T, rewrite bool) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(8, 94)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:3], "a")); err != nil {
		t.Fatal(err)
	}
	// 1. p1's own records of its reshared segment stay unattested a while
	// (p3's attest answers to p1 garbled: a transient fault).
	garble := rewriteMsg(protocol.TReplRows, func(m protocol.Msg) bool {
		r := m.(*protocol.ReplRows)
		if len(r.IDs) == 0 || len(r.Shares) != 0 {
			return false
		}
		r.Records[len(r.Records)-1] ^= 1
		return true
	})
	c.Net.SetFault("p3", "p1", memnet.Fault{Corrupt: garble})
	if _, err := c.Client("client", "p1").Reshare(ctx(t), "p1"); err != nil {
		t.Fatal(err)
	}
	// 2. An enrollment through p1 whose decision p3 misses.
	c.Net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		if len(p) > 6 && p[4] == protocol.Version && p[5] == byte(protocol.TDecide) {
			p[5] = 0xEE
		}
	}})
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "b")); err != nil {
		t.Fatal(err)
	}
	// 3. The fault clears: p1 attests its records (a Rewrite of origin p1).
	if rewrite {
		c.Net.SetFault("p3", "p1", memnet.Fault{})
	}
	time.Sleep(2500 * time.Millisecond)
	if rewrite && !strings.Contains(c.Metrics("p1"), "idface_repl_records_unattested 0") {
		t.Fatalf("p1 did not attest:\n%s", metricLines(c.Metrics("p1"), "idface_repl_records_unattested"))
	}
	// 4. p1 crashes before its outbox delivered the decision; back up.
	c.Stop("p1")
	c.Net.SetFault("p1", "p3", memnet.Fault{})
	c.Net.SetFault("p3", "p1", memnet.Fault{})
	if err := c.TryRestart("p1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	rows := func(n string) int { return c.Engine(n).(statser).Stats().Rows }
	t.Logf("after restart: rows p1 %d p2 %d p3 %d", rows("p1"), rows("p2"), rows("p3"))
	// 5. The next enrollment through p1.
	err := c.Client("client", "p1").Enroll(ctx(t), items(xs[5:6], "c"))
	t.Logf("next enrollment: %v; rows p1 %d p2 %d p3 %d", err, rows("p1"), rows("p2"), rows("p3"))
	if rows("p3") != rows("p1") {
		_, aerr := c.Agreement("p3")
		t.Errorf("p3 holds %d rows, p1 %d: p3 aborted b-0, b-1, which p1 and p2 committed (p3: %v)", rows("p3"), rows("p1"), aerr)
	}
	if err != nil {
		t.Errorf("the next enrollment through p1: %v", err)
	}
	for _, e := range []string{"p1", "p2", "p3"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := c.Client("device", e).Identify(ctx(t), xs[0], 3)
			if err == nil && !r.Degraded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("identify through %s: %v %+v; want checked answers", e, err, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

type redirect struct {
	network.Dialer
	from, to string
}

func (d redirect) Open(ctx context.Context, to string) (*network.Stream, error) {
	if to == d.from {
		to = d.to
	}
	return d.Dialer.Open(ctx, to)
}

// TestRebuildTruncatedRefused: p1 deviates in the rebuild's fetch of p2
// only: it says origin p1's segment has 5 rows (of 9) and sends those 5
// honestly. The rebuild takes the smaller total of the two peers.
func TestRebuildTruncatedRefused(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	if err := cl.client("client", "p1").Enroll(ctx(t), items(templates(9, 95), "a")); err != nil {
		t.Fatal(err)
	}
	path, env := cl.lose("p2")
	cl.mu.Lock()
	p1 := cl.holders["p1"]
	cl.mu.Unlock()
	fetch := p1.(interface {
		Routes() map[protocol.Type]engine.Route
	}).Routes()[protocol.TReplFetch].Handle
	ln, err := cl.net.Listen("p1x")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	go ln.Serve(sctx, func(ctx context.Context, s *network.Stream) {
		b, err := s.ReadFrame(1 << 20)
		if err != nil {
			return
		}
		m, err := protocol.Decode(b)
		if err != nil {
			return
		}
		resp := fetch(ctx, engine.Request{From: network.Peer{Name: "p2", Role: network.RoleParty}, Msg: m})
		if r, ok := resp.(*protocol.ReplRows); ok && r.Seg == 0 && r.Total > 5 {
			n := max(0, min(len(r.IDs), 5-int(r.From)))
			half := len(r.Shares) / max(1, len(r.IDs))
			r.Total, r.IDs, r.Live, r.Shares = 5, r.IDs[:n], r.Live[:n], r.Shares[:n*half]
			r.Salts, r.Records = r.Salts[:n*protocol.SaltSize], r.Records[:2*n*protocol.RecordSize]
		}
		s.WriteFrame(protocol.Marshal(resp))
	})
	env.Net = redirect{env.Net, "p1", "p1x"}
	rep, err := replicated.Rebuild(ctx(t), env, path, nil)
	if err == nil || !strings.Contains(err.Error(), "p1 says origin p1 has 5 rows") {
		t.Errorf("a rebuild from a peer that says 5 of 9 rows: %+v, %v; want it refused, naming the counts", rep, err)
	}
}

// TestDeletedTrailerErased: a deleted row's salts and record leave
// every holder's log.
func TestDeletedTrailerErased(t *testing.T) {
	cl := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	if err := cl.client("client", "p2").Enroll(ctx(t), items(templates(3, 96), "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.client("client", "p2").Reshare(ctx(t), "p2"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	var units, live [][]byte
	cl.mu.Lock()
	for _, h := range []string{"p1", "p2", "p3"} {
		u := replicated.StoredPair(cl.holders[h], 1, 1)
		units = append(units, append([]byte(nil), u...))
		u = replicated.StoredPair(cl.holders[h], 1, 0)
		live = append(live, append([]byte(nil), u...))
	}
	cl.mu.Unlock()
	if err := cl.client("client", "p3").Delete(ctx(t), "a-1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	for i, h := range []string{"p1", "p2", "p3"} {
		cl.halt(h)
		b, err := os.ReadFile(filepath.Join(cl.dir, h+".log"))
		if err != nil {
			t.Fatal(err)
		}
		tr := units[i][len(units[i])-replicated.TrailerSize:]
		for k, part := range [][]byte{tr[:16], tr[16:32], tr[32:]} {
			if strings.Contains(string(b), string(part)) {
				t.Errorf("%s's log still holds part %d of deleted row a-1's trailer", h, k)
			}
		}
		if lt := live[i][len(live[i])-replicated.TrailerSize:]; !strings.Contains(string(b), string(lt[:16])) || !strings.Contains(string(b), string(lt[32:])) {
			t.Errorf("control: %s's log lacks live row a-0's trailer", h)
		}
		if strings.Contains(string(b), string(units[i][:64])) {
			t.Errorf("%s's log still holds deleted row a-1's share", h)
		}
	}
}
