package mpcface_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/modes/mpcface"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// Adversarial tests (issue "close the leaks"): each drives one attack
// found in the review of commit 0d4c0ae against the in-process cluster and
// checks it is refused.

// startDefault starts a cluster with the default answer policy and tau.
func startDefault(t *testing.T, mu int) *inproc.Cluster {
	mode := config.ModeMPC
	if mu == 2 {
		mode = config.Mode2PC
	}
	tau := config.DefaultTau
	return inproc.Start(t, inproc.Literal(config.Literal{Mode: mode, Dim: dim, Beta: 21, Tau: &tau,
		Timeout: config.Duration(2 * time.Second)}, mu))
}

// probe returns a template whose T_beta is +1 at pos[i] where sign[i] > 0,
// -1 where sign[i] < 0: what an attacker sends to select positions.
func probe(pos []int, sign []int) []float32 {
	x := make([]float32, dim)
	for j := range x {
		x[j] = 1e-3 * float32(j%7+1)
	}
	for i, p := range pos {
		x[p] = float32(10 * sign[i])
	}
	return x
}

// TestChosenProbesLearnNothing: in 0d4c0ae a device got up to 1000
// candidates with exact scores, accepted or not, so d chosen probes (a
// fixed base set plus one varying position) revealed T_alpha of every
// enrolled row. Now a device learns accept/reject and the ids above the
// threshold only: no score, no candidate below the threshold, so a probe
// that differs in one position from another is told apart only when it
// crosses the threshold (a rare false accept at this small d, beta), not
// by a score.
func TestChosenProbesLearnNothing(t *testing.T) {
	c := startDefault(t, 2)
	victims := templates(40, 21)
	if err := c.Client("client", "").Enroll(ctx(t), items(victims, "victim")); err != nil {
		t.Fatal(err)
	}
	accepts := 0
	dev := c.Client("device", "")
	beta := c.P.Beta()
	base := make([]int, beta-1)
	sign := make([]int, beta)
	for i := range base {
		base[i] = 3 * i
		sign[i] = 1 - 2*(i%2)
	}
	for v := 3 * (beta - 1); v < dim; v++ {
		for _, s := range []int{1, -1} {
			sign[beta-1] = s
			x := probe(append(base, v), sign)
			r, err := dev.Identify(ctx(t), x, c.P.MaxTopK())
			if err != nil {
				t.Fatal(err)
			}
			want := plainScores(t, c.P, victims, x)
			if !r.ScoresHidden || r.Accepted != (len(r.Candidates) > 0) {
				t.Fatalf("probe %d%+d: %+v", v, s, r)
			}
			for _, cd := range r.Candidates {
				var i int
				fmt.Sscanf(cd.ID, "victim-%d", &i)
				if cd.Score != 0 || want[i] < c.P.Threshold() {
					t.Fatalf("probe %d%+d revealed %s (score %d, plaintext %d)", v, s, cd.ID, cd.Score, want[i])
				}
			}
			if r.Accepted {
				accepts++
			}
		}
	}
	t.Logf("%d of %d chosen probes crossed the threshold (false accepts at d = %d, beta = %d)", accepts, 2*(dim-3*(beta-1)), dim, beta)
	// A device may not ask for more candidates than the cluster allows.
	var pe *protocol.Error
	if _, err := dev.Identify(ctx(t), probe(base, sign), c.P.MaxTopK()+1); !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest {
		t.Fatalf("top %d: %v", c.P.MaxTopK()+1, err)
	}
	// A genuine probe is answered with the id, still without a score.
	x := templates(40, 21)[3]
	r, err := dev.Identify(ctx(t), x, 3)
	if err != nil || !r.Accepted || len(r.Candidates) != 1 || r.Candidates[0].ID != "victim-3" || r.Candidates[0].Score != 0 {
		t.Fatalf("genuine probe: %+v %v", r, err)
	}
}

// serverDialer speaks as server `as` (a compromised party).
func serverDialer(c *inproc.Cluster, as string) network.Dialer {
	return c.Net.Dialer(network.Peer{Name: as, Role: network.RoleParty})
}

// TestHelperRefusesWideQuery: in 0d4c0ae a helper served any query weight
// it was told, so an entry asking beta = d received every row's complete
// shares in one query. Now helpers serve the cluster's beta only.
func TestHelperRefusesWideQuery(t *testing.T) {
	c := startDefault(t, 3)
	if err := c.Client("client", "").Enroll(ctx(t), items(templates(20, 22), "a")); err != nil {
		t.Fatal(err)
	}
	g, err := c.RowMap("p2", "p1") // the row map as p1 sends it to p2
	if err != nil {
		t.Fatal(err)
	}
	w := template.Words(dim)
	all := make([]uint64, w)
	for j := range all {
		all[j] = ^uint64(0)
	}
	for _, q := range []*protocol.Query{
		{Dim: dim, Beta: dim, Plus: all, Minus: make([]uint64, w), Digest: g, BlockWords: uint32(mpcface.BlockWords(c.P))},
		{Dim: dim, Beta: uint16(c.P.Beta() + 1), Plus: probePlus(c.P.Beta() + 1), Minus: make([]uint64, w), Digest: g, BlockWords: uint32(mpcface.BlockWords(c.P))},
	} {
		_, err := rpc.Call(ctx(t), serverDialer(c, "p1"), "p2", q)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Msg, "beta") {
			t.Fatalf("query of weight %d: %v", q.Beta, err)
		}
	}
}

func probePlus(n int) []uint64 {
	w := make([]uint64, template.Words(dim))
	for j := range n {
		w[j>>6] |= 1 << (j & 63)
	}
	return w
}

// TestDeletedRowsAreErased: in 0d4c0ae a deleted row kept its shares in
// the store and in the log, and helpers served them. Now deletion zeroes
// the row at every party, in memory (a query carries zeros for it) and in
// the log file (its unit is overwritten in place).
func TestDeletedRowsAreErased(t *testing.T) {
	c := startDefault(t, 2)
	cl := c.Client("client", "p1")
	if err := cl.Enroll(ctx(t), items(templates(64, 23), "a")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx(t), "a-0"); err != nil {
		t.Fatal(err)
	}
	// Tap the helper's answer: row 0's bit in every selected column.
	var seen atomic.Int64
	var leaked atomic.Bool
	c.Net.SetFault("p2", "p1", memnet.Fault{Corrupt: func(b []byte) {
		if seen.Add(1)%2 == 0 { // block words (odd writes are headers)
			for i := 0; i+8 <= len(b); i += 8 { // one word per column: 64 rows
				if b[i]&1 != 0 {
					leaked.Store(true)
				}
			}
		}
	}})
	for q := range 5 {
		if _, err := cl.Identify(ctx(t), templates(5, 24)[q], 1); err != nil {
			t.Fatal(err)
		}
	}
	if leaked.Load() {
		t.Fatal("a helper served a deleted row's share bits")
	}
	// In the log of every party: the deleted row's unit reads as erased.
	for _, m := range c.P.Parties() {
		c.Stop(m.Name)
		erased := false
		_, err := store.Scan(filepath.Join(c.DataDir(m.Name), "shares.log"), engine.Binding(c.P, m.Name, store.KindShares, [32]byte{}), func(en store.Entry) error {
			if en.Type == 3 && len(en.Tail) > 0 && !en.TailIntact { // a prepare record
				u := en.Tail[:16*template.Words(dim)+4]
				erased = true
				for _, b := range u {
					erased = erased && b == 0
				}
			}
			return nil
		})
		if err != nil || !erased {
			t.Fatalf("%s: the deleted row's share is still in the log (%v)", m.Name, err)
		}
	}
}

// TestDecideInAnotherOriginsName: in 0d4c0ae a party could commit or abort
// another origin's transaction at a third party. Now every prepare and
// decision is bound to the authenticated sender.
func TestDecideInAnotherOriginsName(t *testing.T) {
	c := startDefault(t, 3)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(templates(3, 25), "a")); err != nil {
		t.Fatal(err)
	}
	mallory := serverDialer(c, "p2")
	var pe *protocol.Error
	_, err := rpc.Call(ctx(t), mallory, "p3", &protocol.Decide{Txn: protocol.TxnID{1}, Origin: 0, Commit: true})
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("Decide in p1's name: %v", err)
	}
	_, err = rpc.Call(ctx(t), mallory, "p3", &protocol.Prepare{Txn: protocol.TxnID{2}, Origin: 0, Dim: dim, Base: 3,
		Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 0, ID: "a-0"}}})
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("Prepare in p1's name: %v", err)
	}
}

// TestDamagedLogRefused: in 0d4c0ae a bad record in the middle of a log
// cut everything after it with a warning. Now the party refuses to start,
// naming the file and the offset, and changes nothing.
func TestDamagedLogRefused(t *testing.T) {
	c := startDefault(t, 2)
	cl := c.Client("client", "p1")
	for b := range 3 {
		if err := cl.Enroll(ctx(t), items(templates(10, uint64(30+b)), string(rune('a'+b)))); err != nil {
			t.Fatal(err)
		}
	}
	c.Stop("p2")
	path := filepath.Join(c.DataDir("p2"), "shares.log")
	b, _ := os.ReadFile(path)
	hl := store.HeaderLen(engine.Binding(c.P, "p2", store.KindShares, [32]byte{}))
	b[hl+44] ^= 0x08 // inside the first prepare record's sealed part
	os.WriteFile(path, b, 0o600)
	err := c.TryRestart("p2")
	var de *store.DamageError
	if !errors.As(err, &de) || de.File != path || de.Offset != int64(hl) || !strings.Contains(err.Error(), "fsck") {
		t.Fatalf("damaged log: %v", err)
	}
	if after, _ := os.ReadFile(path); len(after) != len(b) {
		t.Fatal("the damaged log was changed")
	}
	// A flipped share bit (in a tail unit) of a live row is damage too.
	b[hl+44] ^= 0x08
	b[len(b)-200] ^= 0x01
	os.WriteFile(path, b, 0o600)
	if err := c.TryRestart("p2"); !errors.As(err, &de) || !strings.Contains(err.Error(), "live row") {
		t.Fatalf("damaged share: %v", err)
	}
}

// TestSilentHelperBoundsTheQuery is the memory-exhaustion side of a
// helper: a helper cannot make the entry allocate beyond its blocks (the
// entry reads blocks into its own buffers of the planned size) — a block
// header announcing more words than planned is refused.
func TestOversizedBlockRefused(t *testing.T) {
	c := startDefault(t, 2)
	if err := c.Client("client", "").Enroll(ctx(t), items(templates(10, 40), "a")); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	c.Net.SetFault("p2", "p1", memnet.Fault{Corrupt: func(b []byte) {
		if n.Add(1) == 1 {
			b[len(b)-2] = 0x7f // NW of the first block header
		}
	}})
	_, err := c.Client("client", "p1").Identify(context.Background(), templates(1, 41)[0], 1)
	if err == nil || !strings.Contains(err.Error(), "was due") {
		t.Fatalf("oversized block: %v", err)
	}
}

// TestOnlyOperatorsChangeTheGallery is issue 17 item 5: at bfed9c1 p1 of a
// 3-party MPC cluster sent Delete for rows of p2's and p3's segments and
// both were removed, because a party may forward deletions. Now every
// enrollment and deletion carries an operator's signature over (cluster,
// operation, ids, nonce) that every party checks, and a nonce applies once.
func TestOnlyOperatorsChangeTheGallery(t *testing.T) {
	c := startDefault(t, 3)
	xs := templates(6, 61)
	for k, entry := range []string{"p2", "p3"} {
		if err := c.Client("client", entry).Enroll(ctx(t), items(xs[3*k:3*k+3], entry)); err != nil {
			t.Fatal(err)
		}
	}
	p1 := serverDialer(c, "p1")
	var pe *protocol.Error
	forbidden := func(what, to string, m protocol.Msg) {
		t.Helper()
		if _, err := rpc.Call(ctx(t), p1, to, m); !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
			t.Fatalf("%s: %v, want forbidden", what, err)
		}
	}
	forbidden("p1 deletes p2's row unsigned", "p2", &protocol.Delete{ID: "p2-0"})
	forbidden("p1 deletes p3's row unsigned", "p3", &protocol.Delete{ID: "p3-0"})
	// A signature for another id, or from a key that is not an operator's.
	forbidden("a signature for another id", "p2", &protocol.Delete{Auth: c.Sign(protocol.OpDelete, "p2-1"), ID: "p2-0"})
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := protocol.Sign(stranger, "client", c.P.ClusterID(), protocol.OpDelete, []string{"p2-0"})
	forbidden("a forged signature", "p2", &protocol.Delete{Auth: forged, ID: "p2-0"})
	// p1 originates an enrollment of its own (its segment) without an operator.
	g, err := c.RowMap("p2", "p1")
	if err != nil {
		t.Fatal(err)
	}
	forbidden("p1 enrolls on its own", "p2", &protocol.Prepare{Txn: protocol.TxnID{7, 0x9}, Origin: 0, Dim: dim, Base: g[0].Rows,
		Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: g[0].Rows, ID: "mallory", Share: make([]byte, 16*template.Words(dim))}}})

	// The operator deletes p2-0; p1 keeps the signed request and replays it
	// after p2-0 is enrolled again.
	del := &protocol.Delete{Auth: c.Sign(protocol.OpDelete, "p2-0"), ID: "p2-0"}
	if _, err := rpc.Call(ctx(t), c.Dialer("client"), "p2", del); err != nil {
		t.Fatal(err)
	}
	if err := c.Client("client", "p2").Enroll(ctx(t), items(xs[:1], "p2")); err != nil {
		t.Fatal(err)
	}
	forbidden("a replayed deletion", "p2", del)
	c.Restart("p2") // the nonces come back from the log
	forbidden("a replayed deletion after a restart", "p2", del)

	for i, x := range xs {
		r, err := c.Client("client", "").Identify(ctx(t), x, 1)
		want := []string{"p2-0", "p2-1", "p2-2", "p3-0", "p3-1", "p3-2"}[i]
		if err != nil || !r.Accepted || r.Candidates[0].ID != want {
			t.Fatalf("%s after the attempts: %+v %v", want, r, err)
		}
	}
}
