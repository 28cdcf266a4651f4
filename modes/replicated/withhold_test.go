package replicated_test

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// withhold garbles every message of the given types that from sends to
// to: to gets none of them, as if from withheld them.
func withhold(c *inproc.Cluster, from, to string, types ...protocol.Type) {
	c.Net.SetFault(from, to, memnet.Fault{Corrupt: func(p []byte) { garble(p, types...) }})
}

// garble spoils the type byte of chunk p when it starts a message of one
// of types, and reports whether it did.
func garble(p []byte, types ...protocol.Type) bool {
	for _, typ := range types {
		if b, ok := frameMsg(p, typ); ok {
			b[1] = 0xEE
			return true
		}
	}
	return false
}

// TestWithheldCatchUp (issue 44 item 2): p2 is stopped while the operator
// enrolls two rows through p1, which keeps p2's part as the protocol
// says, and p1 then withholds it: it never delivers what it kept, nor any
// prepare or decision, and garbles its answers to p2's catch-up fetch.
// Before, p2 came back, stood down behind p1 and p3 for as long as p1
// liked, and counted as down, so p3 and the decider served p1's degraded
// queries, whose vectors nobody checks. Now p3 kept p2's part too (p2
// could not say that it prepared) and relays it with the commit: p2
// catches up from p3 alone within seconds, and meanwhile every query at p1
// and p3 is answered checked or refused, never degraded.
func TestWithheldCatchUp(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(5, 83)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:3], "early")); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop("p2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "late")); err != nil {
		t.Fatalf("enroll with p2 down: %v", err)
	}
	withhold(c, "p1", "p2", protocol.TPrepare, protocol.TSealedPrepare, protocol.TDecide, protocol.TReplRows)
	start := time.Now()
	if err := c.TryRestart("p2"); err != nil { // (p1 never settles what it keeps for p2)
		t.Fatal(err)
	}
	deadline := start.Add(30 * time.Second)
	answered := 0
	for {
		for _, entry := range []string{"p1", "p3"} {
			r, err := c.Client("device", entry).Identify(ctx(t), xs[4], 1)
			if err != nil {
				continue // refused: p2 is catching up
			}
			if r.Degraded {
				t.Fatalf("entry %s answered degraded %v after p2 came back while p1 withholds what p2 missed: the withholding peer's vectors went unchecked", entry, time.Since(start))
			}
			answered++
		}
		_, aerr := c.Agreement("p2")
		r, err := c.Client("device", "p3").Identify(ctx(t), xs[4], 1)
		if aerr == nil && err == nil && !r.Degraded && r.Accepted && r.Candidates[0].ID == "late-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p2 did not catch up from p3 within 30 s while p1 withholds: %v; %v %+v", aerr, err, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("p2 caught up from p3 %v after it came back; %d queries answered checked meanwhile, none degraded", time.Since(start).Round(time.Millisecond), answered)
	for _, name := range []string{"p1", "p3"} {
		if m := c.Metrics(name); strings.Contains(m, "idface_repl_degraded_served_total{") {
			t.Fatalf("%s served degraded queries while p1 withheld:\n%s", name, metricLines(m, "idface_repl_degraded_served"))
		}
	}
}

// TestThirdVotesNoWithoutCopy: an origin that gives the third party no
// good copy of a missing holder's part (here p1 damages the copy it sends
// p3 of p2's part) cannot commit without p2: p3 has not heard from p2
// that it prepared, has nothing to keep for it, and votes no, so nothing
// is committed that only p1 could give p2. With every holder up the same
// damage changes nothing: p2 tells p3 that it prepared.
func TestThirdVotesNoWithoutCopy(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(4, 89)
	c.Net.SetFault("p1", "p3", memnet.Fault{Corrupt: func(p []byte) {
		for _, off := range []int{4, 0} {
			if len(p) > off+1 && p[off] == protocol.Version && p[off+1] == byte(protocol.TSealedPrepare) {
				p[len(p)-1-32] ^= 1 // the last byte of the held copy (the origin's 32-byte proof ends the message)
				return
			}
		}
	}})
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:2], "up")); err != nil {
		t.Fatalf("enroll with every holder up: %v", err)
	}
	if err := c.Stop("p2"); err != nil {
		t.Fatal(err)
	}
	err := c.Client("client", "p1").Enroll(ctx(t), items(xs[2:], "down"))
	if err == nil || !strings.Contains(err.Error(), "p3") || !strings.Contains(err.Error(), "no copy of p2's part") {
		t.Fatalf("enroll with p2 down and a damaged copy for p3 to keep: %v; want p3's refusal", err)
	}
}

// TestDecisionPulledFromThird (issue 44 item 2): a relayed decision lives
// in the third party's outbox, in memory. p1 withholds its decision on an
// enrollment from p2, and p3's relay of it cannot reach p2 either until
// p3 has restarted, which empties its outbox. Before, p2 stayed in doubt
// for good (its catch-up refuses to run while a transaction of p1 is
// undecided there), so its rows differed and queries through it were
// refused. Now p2 asks p3, which knows from its log that it committed
// the transaction, and takes its commit: p2 settles and answers.
func TestDecisionPulledFromThird(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(5, 89)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:3], "early")); err != nil {
		t.Fatal(err)
	}
	withhold(c, "p1", "p2", protocol.TDecide)
	withhold(c, "p3", "p2", protocol.TDecide)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "late")); err != nil {
		t.Fatalf("enroll while p1 and p3 withhold decisions from p2: %v", err)
	}
	inDoubt := func(name string) uint32 { return inDoubt(t, c, name) }
	p3Rows := func() uint32 { // p3's rows of origin p1, as p1 sees its row map
		g, err := c.RowMap("p3", "p1")
		if err != nil || len(g) == 0 {
			return 0
		}
		return g[0].Rows
	}
	for deadline := time.Now().Add(30 * time.Second); p3Rows() != 5 || inDoubt("p2") != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("want p3 to have committed the late enrollment (rows of p1 there: %d) and p2 in doubt on it (%d)", p3Rows(), inDoubt("p2"))
		}
	}
	if err := c.TryRestart("p3"); err != nil { // its queued relay of the commit is gone (and p1 never settles)
		t.Fatal(err)
	}
	c.Net.SetFault("p3", "p2", memnet.Fault{})
	start := time.Now()
	for deadline := start.Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := c.Client("device", "p2").Identify(ctx(t), xs[4], 1)
		if err == nil && !r.Degraded && r.Accepted && r.Candidates[0].ID == "late-1" && inDoubt("p2") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p2 still in doubt (%d) 30 s after p3 restarted, while p1 withholds the decision: %v %+v", inDoubt("p2"), err, r)
		}
	}
	t.Logf("p2 took the commit from p3 %v after p3 restarted", time.Since(start).Round(time.Millisecond))
}

// inDoubt is the number of transactions server name has prepared and not
// seen decided (1<<31 when it does not answer).
func inDoubt(t *testing.T, c *inproc.Cluster, name string) uint32 {
	cctx, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()
	h, err := c.Client("client", "").Health(cctx, name)
	if err != nil {
		return 1 << 31
	}
	return h.InDoubt
}

// TestRelayedCommitNeedsProof (issue 44 item 2(c)): p3, the third party
// of p1's enrollment, relays to p2 a commit p1 never sent it (p1 withholds
// its decision from p2, and p3's own relay of it is held back). A relayed
// commit used to be taken on the relayer's word, so a deviating third
// could commit at p2 a change its origin had aborted. Now p2 takes one
// only with p1's proof for p2 (protocol.CommitProof, a MAC under the key
// p1 and p2 share, which p1 sends p3 with its commit): without it, or with
// a forged one, it is refused and nothing is applied; p3's honest relay,
// once let through, carries the proof and is taken.
func TestRelayedCommitNeedsProof(t *testing.T) {
	c := inproc.Start(t, literal(config.Literal{Beta: 21, RevealScores: true}))
	xs := templates(5, 91)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:3], "early")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var txn protocol.TxnID
	c.Net.SetFault("p1", "p2", memnet.Fault{Corrupt: func(p []byte) {
		if b, ok := frameMsg(p, protocol.TSealedPrepare); ok && len(b) >= 2+16 {
			mu.Lock()
			copy(txn[:], b[2:2+16])
			mu.Unlock()
		}
		garble(p, protocol.TDecide)
	}})
	// p3's own relays (and answers to p2's pulls) are held back; what the
	// test sends as p3, with the proofs below, goes through.
	forged := [][32]byte{{}, {1, 2, 3}}
	c.Net.SetFault("p3", "p2", memnet.Fault{Corrupt: func(p []byte) {
		if b, ok := frameMsg(p, protocol.TDecide); ok && len(b) >= 32 {
			for _, f := range forged {
				if [32]byte(b[len(b)-32:]) == f {
					return
				}
			}
			b[1] = 0xEE
		}
	}})
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[3:5], "late")); err != nil {
		t.Fatalf("enroll while p1 and p3 withhold decisions from p2: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); inDoubt(t, c, "p2") != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("want p2 in doubt on the late enrollment: %d", inDoubt(t, c, "p2"))
		}
	}
	mu.Lock()
	late := txn
	mu.Unlock()
	before := segRows(t, c, "p2", "p1", 0)
	for _, proof := range forged {
		_, err := rpc.Call(ctx(t), c.Dialer("p3"), "p2", &protocol.Decide{Txn: late, Origin: 0, Commit: true, Proof: proof})
		if err == nil || !strings.Contains(err.Error(), "does not carry its origin's proof") {
			t.Fatalf("p3 relays a commit with proof %x: %v; want it refused", proof[:3], err)
		}
	}
	if after := segRows(t, c, "p2", "p1", 0); after != before || inDoubt(t, c, "p2") != 1 {
		t.Fatalf("p2 took a commit relayed without p1's proof: rows of origin p1 %d -> %d, in doubt %d", before, after, inDoubt(t, c, "p2"))
	}
	c.Net.SetFault("p3", "p2", memnet.Fault{}) // p3's relay, or its answer to p2's pull
	for deadline := time.Now().Add(30 * time.Second); inDoubt(t, c, "p2") != 0 || segRows(t, c, "p2", "p1", 0) != 5; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("p2 did not take p3's honest relay: in doubt %d, rows of origin p1 %d", inDoubt(t, c, "p2"), segRows(t, c, "p2", "p1", 0))
		}
	}
}

// TestRelabelledPrepareNotCommitted (reviews of bed437f and 35a9893): the
// proof of a commit first covered the transaction's id alone, so p3
// (deviating) relayed to p2 the prepare of a change p1 had aborted,
// relabelled with the id of an earlier transaction p1 committed, and then
// that commit with its genuine proof for p2: p2 applied the aborted change
// (6 rows of origin p1 against 4 at p1 and p3). With the proof over the
// prepare's content, the relabelled prepare was still taken and held in
// doubt, and p1's own word on that id (Prior, or its direct commit of a
// transaction p3 raced) committed it. Now a relayed prepare is taken only
// with p1's proof over its content (Prepare.Relay), so p2 refuses it.
func TestRelabelledPrepareNotCommitted(t *testing.T) {
	c, _ := startEarly(t)
	var mu sync.Mutex
	var commit *protocol.Decide
	var aborted *protocol.SealedPrepare
	var frame []byte
	need := 0
	// p3 keeps what p1 sends it, as a deviating p3 would, and during the
	// second enrollment garbles p1's prepare so that p1 aborts.
	listen := func(garbleTo bool) memnet.Fault {
		return memnet.Fault{Corrupt: func(p []byte) {
			mu.Lock()
			defer mu.Unlock()
			if need > 0 { // the rest of a prepare's frame
				frame = append(frame, p...)
				if len(frame) >= need {
					if m, err := protocol.Decode(frame[:need]); err == nil {
						aborted = m.(*protocol.SealedPrepare)
					}
					need = 0
				}
				return
			}
			if b, ok := frameMsg(p, protocol.TDecide); ok {
				if m, err := protocol.Decode(b); err == nil && m.(*protocol.Decide).Commit {
					commit = m.(*protocol.Decide)
				}
			}
			if b, ok := frameMsg(p, protocol.TSealedPrepare); ok && garbleTo && len(p) >= 4 && &b[0] == &p[4] {
				n := int(binary.BigEndian.Uint32(p[:4]))
				frame = append([]byte(nil), b...)
				if len(frame) >= n {
					if m, err := protocol.Decode(frame[:n]); err == nil {
						aborted = m.(*protocol.SealedPrepare)
					}
				} else {
					need = n
				}
				b[1] = 0xEE
			}
		}}
	}
	xs := templates(3, 777)
	c.Net.SetFault("p1", "p3", listen(false))
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[:1], "mid")); err != nil {
		t.Fatal(err)
	}
	c.Net.SetFault("p1", "p2", memnet.Fault{Refuse: true})
	c.Net.SetFault("p1", "p3", listen(true))
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs[1:3], "aborted")); err == nil {
		t.Fatal("want the second enrollment aborted")
	}
	c.Net.SetFault("p1", "p2", memnet.Fault{})
	c.Net.SetFault("p1", "p3", memnet.Fault{})
	mu.Lock()
	t1, got := commit, aborted
	mu.Unlock()
	if t1 == nil || got == nil {
		t.Fatalf("p3 kept commit %v and aborted prepare %v", t1 != nil, got != nil)
	}
	relabelled := got.Prepare
	relabelled.Txn, relabelled.Prior = t1.Txn, protocol.Decide{}
	_, err := rpc.Call(ctx(t), c.Dialer("p3"), "p2", &protocol.SealedPrepare{Prepare: relabelled, Part: got.Held, Hashes: got.Hashes})
	if err == nil || !strings.Contains(err.Error(), "prepare relayed by p3 does not carry its origin's proof") {
		t.Fatalf("p3 relays the aborted change relabelled as %x: %v; want it refused", t1.Txn[:4], err)
	}
	// The relayed commit finds nothing pending under that id; a commit of
	// a relabelled change would need a proof over its content anyway.
	if _, err = rpc.Call(ctx(t), c.Dialer("p3"), "p2", &protocol.Decide{Txn: t1.Txn, Origin: 0, Commit: true, Proof: t1.Proof}); err != nil {
		t.Logf("the earlier commit relayed again: %v", err)
	}
	if at1, at2 := segRows(t, c, "p1", "p3", 0), segRows(t, c, "p2", "p1", 0); at1 != at2 || inDoubt(t, c, "p2") != 0 {
		t.Fatalf("rows of origin p1: %d at p1, %d at p2, p2 in doubt on %d: p2 took a change its origin aborted", at1, at2, inDoubt(t, c, "p2"))
	}
}
