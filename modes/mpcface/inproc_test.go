package mpcface_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/template"
)

// These tests run mu parties in one process over network/memnet: the real
// engines, runtime and logs, with peers made silent, stale or faulty.

const dim = 128

func templates(n int, seed uint64) [][]float32 { return inproc.Templates(n, dim, seed) }

func items(xs [][]float32, prefix string) []protocol.Item { return inproc.Items(xs, prefix) }

// plainScores is the plaintext ternary score of y against every row.
func plainScores(t *testing.T, p *config.Params, rows [][]float32, y []float32) []int {
	t.Helper()
	ty, err := template.Transform(y, p.Beta())
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, x := range rows {
		tx, _ := template.Transform(x, p.Alpha())
		out = append(out, tx.Dot(ty))
	}
	return out
}

func start(t *testing.T, mu int, timeout time.Duration) *inproc.Cluster {
	mode := config.ModeMPC
	if mu == 2 {
		mode = config.Mode2PC
	}
	tau := 0.2
	return inproc.Start(t, inproc.Literal(config.Literal{Mode: mode, Dim: dim, Beta: 21, Tau: &tau,
		Timeout: config.Duration(timeout), MaxTopK: 1000, Block: 4096, RevealScores: true}, mu))
}

func ctx(t *testing.T) context.Context { return inproc.Ctx(t, 20*time.Second) }

// digests is every party's row map as the next party sees it: row counts
// per origin and set hashes sealed for that pair, so party k's answers can
// be compared with each other over time, and counts across parties.
func digests(t *testing.T, c *inproc.Cluster) []protocol.Digest {
	t.Helper()
	ps := c.P.Parties()
	var out []protocol.Digest
	for k, m := range ps {
		g, err := c.RowMap(m.Name, ps[(k+1)%len(ps)].Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// counts are a row map's rows and live rows per origin.
func counts(g protocol.Digest) string {
	var b strings.Builder
	for _, s := range g {
		fmt.Fprintf(&b, "%d/%d ", s.Rows, s.Live)
	}
	return b.String()
}

// agree checks that every party finds its row map equal to every peer's
// (the comparison an operator asks for) and returns digests.
func agree(t *testing.T, c *inproc.Cluster) []protocol.Digest {
	t.Helper()
	for _, m := range c.P.Parties() {
		peers, err := c.Agreement(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(peers) != c.P.Mu()-1 {
			t.Fatalf("%s compared with %d peers: %+v", m.Name, len(peers), peers)
		}
		for _, p := range peers {
			if p.State != protocol.PeerAgrees {
				t.Fatalf("%s: peer %s %v (%s)", m.Name, p.Name, p.State, p.Note)
			}
		}
	}
	return digests(t, c)
}

func TestInProcess(t *testing.T) {
	for _, mu := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("mu=%d", mu), func(t *testing.T) {
			t.Run("exact", func(t *testing.T) { testExact(t, mu) })
			t.Run("silent_helper", func(t *testing.T) { testSilentHelper(t, mu) })
			t.Run("stale_helper", func(t *testing.T) { testStaleHelper(t, mu) })
			t.Run("crash_between_prepare_and_commit", func(t *testing.T) { testCrashInTxn(t, mu) })
			t.Run("corrupted_blocks", func(t *testing.T) { testCorruptBlocks(t, mu) })
		})
	}
}

// testExact enrolls through every party, identifies through the last one
// and compares every score with the plaintext ternary search; then
// deletes and checks the row is never scored again.
func testExact(t *testing.T, mu int) {
	c := start(t, mu, 10*time.Second)
	xs := templates(50*mu, 1)
	var rows [][]float32
	var ids []string
	for k, m := range c.P.Parties() {
		part := xs[50*k : 50*(k+1)]
		if err := c.Client("client", m.Name).Enroll(ctx(t), items(part, m.Name)); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
		for i := range part {
			ids = append(ids, fmt.Sprintf("%s-%d", m.Name, i))
		}
	}
	agree(t, c)
	entry := c.Client("client", c.P.Party(mu-1).Name)
	check := func(deleted string) {
		for q := 0; q < 5; q++ {
			y := xs[q*7]
			want := plainScores(t, c.P, rows, y)
			r, err := entry.Identify(ctx(t), y, len(rows))
			if err != nil {
				t.Fatal(err)
			}
			n := len(rows)
			if deleted != "" {
				n--
			}
			if len(r.Candidates) != n {
				t.Fatalf("%d candidates of %d rows", len(r.Candidates), n)
			}
			for _, cd := range r.Candidates {
				i := slices.Index(ids, cd.ID)
				if cd.ID == deleted || int(cd.Score) != want[i] {
					t.Fatalf("%s scored %d, plaintext %d (deleted %q)", cd.ID, cd.Score, want[i], deleted)
				}
			}
		}
	}
	check("")
	if err := c.Client("client", c.P.Party(mu-1).Name).Delete(ctx(t), "p1-7"); err != nil {
		t.Fatal(err)
	}
	agree(t, c)
	check("p1-7")
	// A device may identify but not enroll or delete.
	dev := c.Client("device", "")
	if _, err := dev.Identify(ctx(t), xs[0], 1); err != nil {
		t.Fatal(err)
	}
	var pe *protocol.Error
	if err := dev.Delete(ctx(t), "p1-8"); err == nil {
		t.Fatal("a device deleted")
	}
	// Even with an operator's signature a device's connection may not.
	_, err := rpc.Call(ctx(t), c.Dialer("device"), "p1", &protocol.Delete{Auth: c.Sign(protocol.OpDelete, "p1-8"), ID: "p1-8"})
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden {
		t.Fatalf("a device deleted: %v", err)
	}
}

// testSilentHelper: a helper that accepts the query and never answers
// gives the device a clear error naming it, before the device's deadline.
func testSilentHelper(t *testing.T, mu int) {
	c := start(t, mu, time.Second)
	if err := c.Client("client", "").Enroll(ctx(t), items(templates(40, 2), "x")); err != nil {
		t.Fatal(err)
	}
	helper := c.P.Party(mu - 1).Name
	c.Net.SetFault(helper, "p1", memnet.Fault{Silent: true})
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Now()
	// Several at once: the first runs alone, the others wait for it and
	// then run as a batch; every one gets the error naming the helper.
	errs := make([]error, 5)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Client("client", "p1").Identify(cctx, templates(5, 3)[i], 1) })
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), helper) || !strings.Contains(err.Error(), "in time") {
			t.Fatalf("silent helper: %v", err)
		}
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Fatalf("the errors took %v, past the 1 s server timeout of each of two passes", d)
	}
	// The fault gone, the cluster answers again.
	c.Net.SetFault(helper, "p1", memnet.Fault{})
	if _, err := c.Client("client", "p1").Identify(ctx(t), templates(1, 3)[0], 1); err != nil {
		t.Fatal(err)
	}
}

// testStaleHelper: a helper restored from an older copy of its data has a
// different row map; queries are refused, never answered with scores.
func testStaleHelper(t *testing.T, mu int) {
	c := start(t, mu, 2*time.Second)
	cl := c.Client("client", "p1")
	if err := cl.Enroll(ctx(t), items(templates(30, 4), "a")); err != nil {
		t.Fatal(err)
	}
	helper := c.P.Party(mu - 1).Name
	backup := t.TempDir()
	c.Stop(helper)
	if err := os.CopyFS(backup, os.DirFS(c.DataDir(helper))); err != nil {
		t.Fatal(err)
	}
	c.Restart(helper)
	if err := cl.Enroll(ctx(t), items(templates(10, 5), "b")); err != nil {
		t.Fatal(err)
	}
	c.Stop(helper)
	os.RemoveAll(c.DataDir(helper))
	if err := os.CopyFS(c.DataDir(helper), os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	c.Restart(helper)
	r, err := cl.Identify(ctx(t), templates(1, 6)[0], 5)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInconsistent || r != nil {
		t.Fatalf("stale helper: %v %v", r, err)
	}
	// Its next prepare is refused too: no enrollment builds on the gap.
	if err := cl.Enroll(ctx(t), items(templates(1, 7), "c")); err == nil {
		t.Fatal("enrolled with a stale helper")
	}
}

// testCrashInTxn crashes the coordinator after its prepare is durable and
// the participants voted, before the decision is logged (the commit point):
// on restart the transaction is aborted everywhere (presumed abort). Then a
// participant crashes after voting: the coordinator's commit reaches it
// when it returns.
func testCrashInTxn(t *testing.T, mu int) {
	c := start(t, mu, 2*time.Second)
	cl := c.Client("client", "p1")
	if err := cl.Enroll(ctx(t), items(templates(20, 8), "a")); err != nil {
		t.Fatal(err)
	}
	before := agree(t, c)
	c.Storage["p1"] = inproc.FailAfter(1) // the prepare is written, the decision is not
	c.Restart("p1")
	if err := cl.Enroll(ctx(t), items(templates(5, 9), "b")); err == nil {
		t.Fatal("enrollment acknowledged without a durable decision")
	}
	if err := c.Wait("p1", 10*time.Second); !errors.Is(err, inproc.ErrDisk) {
		t.Fatalf("the coordinator did not stop on the failed log: %v", err)
	}
	delete(c.Storage, "p1")
	c.Restart("p1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := digests(t, c)
		same := true
		for k := range g {
			same = same && g[k].Equal(before[k])
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not back to the state before the aborted enrollment: %v vs %v", g, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cl.Enroll(ctx(t), items(templates(5, 9), "b")); err != nil {
		t.Fatal(err)
	}

	// A participant votes, then cannot write the decision and stops.
	victim := c.P.Party(mu - 1).Name
	c.Storage[victim] = inproc.FailAfter(1)
	c.Restart(victim)
	if err := cl.Enroll(ctx(t), items(templates(3, 10), "c")); err != nil {
		t.Fatal(err) // every party voted yes: committed, whoever crashes afterwards
	}
	if err := c.Wait(victim, 10*time.Second); !errors.Is(err, inproc.ErrDisk) {
		t.Fatalf("the participant did not stop: %v", err)
	}
	delete(c.Storage, victim)
	c.Restart(victim)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		g := digests(t, c)
		ok := true
		for k := range g {
			ok = ok && counts(g[k]) == counts(g[0]) && g[k][0].Live == 28
		}
		if ok {
			agree(t, c)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the participant did not learn the commit: %v", g)
		}
	}
}

// testCorruptBlocks: a helper that sends corrupted blocks. Semi-honest
// security assumes helpers follow the protocol; what this implementation
// can and cannot detect:
//   - broken framing (a block header out of order, a short block, garbage
//     where a message belongs) is detected: the query fails cleanly;
//   - a flipped share bit is NOT detected: XOR shares carry no MAC, so the
//     entry scores the wrong bit and that row's score moves by one. QUIC
//     with TLS rules out any third party; only the helper itself can do it,
//     which the semi-honest model excludes. Detecting it would need
//     authenticated shares (SPDZ-style MACs), which the paper does not have.
func testCorruptBlocks(t *testing.T, mu int) {
	c := start(t, mu, 2*time.Second)
	xs := templates(64, 11)
	if err := c.Client("client", "p1").Enroll(ctx(t), items(xs, "r")); err != nil {
		t.Fatal(err)
	}
	helper := c.P.Party(1).Name
	y := templates(1, 12)[0]
	want := plainScores(t, c.P, xs, y)
	scores := func() (map[string]int, error) {
		r, err := c.Client("client", "p1").Identify(ctx(t), y, 64)
		if err != nil {
			return nil, err
		}
		out := map[string]int{}
		for _, cd := range r.Candidates {
			out[cd.ID] = int(cd.Score)
		}
		return out, nil
	}
	// Flip the first bit of the first block's data: row 0 in the first
	// selected column.
	var writes atomic.Int64
	c.Net.SetFault(helper, "p1", memnet.Fault{Corrupt: func(b []byte) {
		if writes.Add(1) == 2 { // write 1 is the block header, 2 its words
			b[0] ^= 1
		}
	}})
	got, err := scores()
	if err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		id := fmt.Sprintf("r-%d", i)
		d := got[id] - want[i]
		if i == 0 && d != 1 && d != -1 || i != 0 && d != 0 {
			t.Fatalf("row %d: %d, plaintext %d", i, got[id], want[i])
		}
	}
	// Garbage where the block header belongs: a clean error.
	writes.Store(0)
	c.Net.SetFault(helper, "p1", memnet.Fault{Corrupt: func(b []byte) {
		if writes.Add(1) == 1 {
			b[len(b)-1] ^= 0x40 // the header's word count
		}
	}})
	if _, err := scores(); err == nil || !strings.Contains(err.Error(), helper) {
		t.Fatalf("a broken block header was not refused: %v", err)
	}
}
