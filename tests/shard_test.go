package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/protocol"
)

// TestShardedBlindCLI runs a sharded blind cluster as processes (each
// holder and the decider as a coordinator and three shard servers):
// enrollment and identification through the CLI answer as the plaintext
// search; a shard killed with SIGKILL while clients identify never gives
// a wrong answer, only errors naming the shard, and once it is back every
// query is answered again; moved to two shards, the answers stay.
func TestShardedBlindCLI(t *testing.T) { testShardedCLI(t, "blind") }

// TestSharded2PCCLI is TestShardedBlindCLI for 2PCFace: each party a
// coordinator and three shards, no decider (the entry's shards score,
// its coordinator merges).
func TestSharded2PCCLI(t *testing.T) { testShardedCLI(t, "2pc") }

// TestShardedReplicatedCLI is TestShardedBlindCLI for replicated mode,
// where a killed holder's shard makes its rows' queries degraded, not
// failed: every query is answered, right, while it is down.
func TestShardedReplicatedCLI(t *testing.T) { testShardedCLI(t, "replicated") }

func testShardedCLI(t *testing.T, mode string) {
	const S = 3
	parties, degrades := 2, mode == "replicated"
	if degrades {
		parties = 3
	}
	dir, cfg := newCluster(t, mode, parties, "--reveal-scores", "--shards", "3")
	if cfg.Shards() != S {
		t.Fatalf("%d shards", cfg.Shards())
	}
	d := newDataset(t, t.TempDir(), 300, 43)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "64", "--quiet")
	rows := transformRows(t, d.gallery, d.names, cfg.Alpha())
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:20])
	type best struct {
		id    string
		score int
	}
	wants := make([][]best, 20)
	for i := range wants {
		for _, w := range plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), 4) {
			wants[i] = append(wants[i], best{w.id, w.score})
		}
	}
	// right reports whether candidates are the plaintext top 3 of query i
	// (ids where scores are not tied).
	right := func(i int, ids []string, scores []int) bool {
		want := wants[i]
		if len(ids) != 3 {
			return false
		}
		for j, w := range want[:3] {
			tied := j > 0 && want[j-1].score == w.score || want[j+1].score == w.score
			if scores[j] != w.score || !tied && ids[j] != w.id {
				return false
			}
		}
		return true
	}
	check := func(entry string) {
		t.Helper()
		for i, r := range parseResults(t, must(t, "identify", "--cluster", dir, "--entry", entry, "--templates", q, "--top", "3", "--json")) {
			var ids []string
			var scores []int
			for _, c := range r.Candidates {
				ids, scores = append(ids, c.ID), append(scores, c.Score)
			}
			if !right(i, ids, scores) {
				t.Fatalf("query %d through %s: %v %v, plaintext %v", i, entry, ids, scores, wants[i])
			}
		}
	}
	check("p1")
	check("p2")
	if st := must(t, "cluster", "status", "--cluster", dir); !strings.Contains(st, "coordinator of 3 shards") || !strings.Contains(st, "p2#2") || !strings.Contains(st, "all servers agree") {
		t.Fatalf("status:\n%s", st)
	}

	// Clients identify while a helper shard is killed, then restarted.
	victim := config.ShardName("p2", 1)
	answered, failed, failedWhileDown := killUnderLoad(t, cfg, dir, victim, []string{"p1", "p1"}, d.queries[:20], 3, func(i int, r *protocol.IdentifyOK, err error) {
		if err != nil {
			if degrades {
				t.Errorf("query %d failed with a holder's shard down in replicated mode: %v", i, err)
			} else if !strings.Contains(err.Error(), "shard 1") {
				t.Errorf("query %d failed without naming shard 1: %v", i, err)
			}
			return
		}
		var ids []string
		var scores []int
		for _, c := range r.Candidates {
			ids, scores = append(ids, c.ID), append(scores, int(c.Score))
		}
		if !right(i, ids, scores) {
			t.Errorf("query %d answered wrongly: %v %v, plaintext %v", i, ids, scores, wants[i])
		}
	})
	if answered == 0 || failedWhileDown == 0 && !degrades {
		t.Fatalf("%d answered, %d failed while %s was down", answered, failedWhileDown, victim)
	}
	t.Logf("%d answered, %d failed (%s killed for about 8 s)", answered, failed, victim)
	check("p1")

	// Moved to two shards: the same answers; fsck checks a shard's data.
	must(t, "cluster", "down", "--cluster", dir)
	if out := must(t, "shard", "rebalance", "--cluster", dir, "--shards", "2"); !strings.Contains(out, "300 live rows from 3 shards to 2") {
		t.Fatalf("rebalance to 2 shards:\n%s", out)
	}
	if out := must(t, "fsck", "--cluster", dir, "--party", "p1", "--shard", "1"); !strings.Contains(out, "p1#1") || !strings.Contains(out, "intact") {
		t.Fatalf("fsck of a shard:\n%s", out)
	}
	must(t, "cluster", "up", "--cluster", dir)
	check("p2")
	if !degrades {
		return
	}
	// A shard's lost disk is rebuilt from the same shard of the other
	// holders while they serve; then every shard reshares.
	if err := cluster.Kill(cfg, victim); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := idface(t, "cluster", "status", "--cluster", dir); !strings.Contains(st, "answers DEGRADED") {
		t.Fatalf("status with %s down:\n%s", victim, st)
	}
	data := filepath.Join(cluster.HomeDir(dir, "p2"), "data", "shard-1")
	if err := os.Rename(data, data+".lost"); err != nil {
		t.Fatal(err)
	}
	if out := must(t, "party", "rebuild", "--cluster", dir, "--party", "p2", "--shard", "1"); !strings.Contains(out, "rebuilding p2#1") {
		t.Fatalf("rebuild of a shard:\n%s", out)
	}
	// At once: the peers' connections to the killed process still stand,
	// and their first requests draw the restarted shard's stateless resets
	// (the keep-alives are too short to), which the callers take as a
	// restart and send again (network.ErrPeerRestarted).
	must(t, "cluster", "up", "--cluster", dir)
	check("p2")
	if out := must(t, "reshare", "--cluster", dir); !strings.Contains(out, "p3#1: ") || !strings.Contains(out, "p1#0: ") {
		t.Fatalf("reshare of every shard:\n%s", out)
	}
	check("p3")
	// Reshared shards move again: their epochs come along.
	must(t, "cluster", "down", "--cluster", dir)
	if out := must(t, "shard", "rebalance", "--cluster", dir, "--shards", "3"); !strings.Contains(out, "300 live rows from 2 shards to 3") {
		t.Fatalf("rebalance of reshared shards:\n%s", out)
	}
	must(t, "cluster", "up", "--cluster", dir)
	check("p1")
	if st := must(t, "cluster", "status", "--cluster", dir); !strings.Contains(st, "all servers agree") {
		t.Fatalf("status after rebalancing reshared shards:\n%s", st)
	}
}

// TestShardRebalance moves a sharded cluster's rows to more shards, to
// none and back with 'idface shard rebalance': every answer keeps its
// scores (ids where scores are not tied), deleted rows stay deleted, the
// servers agree, enrollment goes on; a running cluster is refused.
func TestShardRebalance(t *testing.T) {
	dir, cfg := newCluster(t, "blind", 2, "--reveal-scores", "--shards", "2")
	d := newDataset(t, t.TempDir(), 200, 47)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "64", "--quiet")
	must(t, "delete", "--cluster", dir, "--id", d.names[3])
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:20])
	rows := transformRows(t, d.gallery, d.names, cfg.Alpha())
	live := append(append([]plainRow{}, rows[:3]...), rows[4:]...)
	check := func(when string) {
		t.Helper()
		for i, r := range parseResults(t, must(t, "identify", "--cluster", dir, "--templates", q, "--top", "3", "--json")) {
			want := plainTop(t, live, d.queries[i], cfg.Alpha(), cfg.Beta(), 4)
			for j, w := range want[:3] {
				tied := j > 0 && want[j-1].score == w.score || want[j+1].score == w.score
				if r.Candidates[j].Score != w.score || !tied && r.Candidates[j].ID != w.id {
					t.Fatalf("%s: query %d candidate %d: %s/%d, plaintext %s/%d", when, i, j, r.Candidates[j].ID, r.Candidates[j].Score, w.id, w.score)
				}
			}
		}
	}
	check("before")
	if _, errs, code := idface(t, "shard", "rebalance", "--cluster", dir, "--shards", "3"); code == 0 || !strings.Contains(errs, "cluster down") {
		t.Fatalf("a rebalance of a running cluster: exit %d, %s", code, errs)
	}
	// A configuration of another shard count over the data: refused, never
	// served with rows on the wrong shards (or none).
	withShards := func(n int) string {
		t.Helper()
		p, err := config.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		lit := p.Literal()
		lit.Shards, lit.Serial = n, lit.Serial+1
		for i := range lit.Parties {
			lit.Parties[i].Shards = nil
			for range n * min(n-1, 1) {
				port, err := cluster.FreePort("udp", "127.0.0.1")
				if err != nil {
					t.Fatal(err)
				}
				lit.Parties[i].Shards = append(lit.Parties[i].Shards, fmt.Sprintf("127.0.0.1:%d", port))
			}
		}
		d := *lit.Decider
		d.Shards = lit.Parties[0].Shards[:0:0]
		for range n * min(n-1, 1) {
			port, _ := cluster.FreePort("udp", "127.0.0.1")
			d.Shards = append(d.Shards, fmt.Sprintf("127.0.0.1:%d", port))
		}
		lit.Decider = &d
		path := filepath.Join(t.TempDir(), config.File)
		if err := config.SaveFile(path, lit); err != nil {
			t.Fatal(err)
		}
		return path
	}
	refused := func(cfgPath, want string, shard ...string) {
		t.Helper()
		_, errs, code := idface(t, append([]string{"serve", "--config", cfgPath, "--home", cluster.HomeDir(dir, "p1")}, shard...)...)
		if code == 0 || !strings.Contains(errs, want) {
			t.Fatalf("serving p1's data under %s: exit %d, %s", cfgPath, code, errs)
		}
	}
	for _, n := range []string{"3", "1", "2"} {
		must(t, "cluster", "down", "--cluster", dir)
		switch n {
		case "3": // shards of 2 under 3: the logs are bound to 2
			refused(withShards(3), "p1#0/2", "--shard", "0")
		case "2": // unsharded rows under 2 shards
			refused(withShards(2), "unsharded", "--shard", "0")
		case "1": // shards under none
			refused(withShards(1), "in shards")
		}
		out := must(t, "shard", "rebalance", "--cluster", dir, "--shards", n)
		if !strings.Contains(out, "199 live rows") {
			t.Fatalf("rebalance to %s:\n%s", n, out)
		}
		must(t, "cluster", "up", "--cluster", dir)
		check("after rebalancing to " + n)
		if st := must(t, "cluster", "status", "--cluster", dir); !strings.Contains(st, "all servers agree") {
			t.Fatalf("status after rebalancing to %s:\n%s", n, st)
		}
	}
	// Across organisations: each holder moves its own data to the next
	// configuration (serial + 1, 3 shards), then all serve it.
	must(t, "cluster", "down", "--cluster", dir)
	prev := filepath.Join(t.TempDir(), "previous.json")
	copyFile(t, filepath.Join(dir, config.File), prev)
	next := withShards(3)
	for _, name := range []string{"p1", "p2", "decider"} {
		out := must(t, "shard", "rebalance", "--config", next, "--previous", prev, "--home", cluster.HomeDir(dir, name))
		if name != "decider" && !strings.Contains(out, "199 live rows from 2 shards to 3") || name == "decider" && !strings.Contains(out, "holds no rows") {
			t.Fatalf("%s's rebalance:\n%s", name, out)
		}
	}
	if _, errs, code := idface(t, "shard", "rebalance", "--config", next, "--previous", prev, "--home", cluster.HomeDir(dir, "p1")); code == 0 {
		t.Fatalf("a second rebalance of moved data: exit 0 (%s)", errs)
	}
	copyFile(t, next, filepath.Join(dir, config.File))
	must(t, "cluster", "up", "--cluster", dir)
	check("after each holder moved its own data to 3 shards")

	// Enrollment goes on over the new shards.
	more := newDataset(t, t.TempDir(), 10, 48)
	ids := filepath.Join(t.TempDir(), "ids.txt")
	var names []string
	for _, n := range more.names {
		names = append(names, "more-"+n)
	}
	if err := os.WriteFile(ids, []byte(strings.Join(names, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, "enroll", "--cluster", dir, "--ids", ids, "--templates", more.enroll, "--quiet")
	mq := filepath.Join(t.TempDir(), "mq.npy")
	writeNpy(t, mq, more.gallery)
	for i, r := range parseResults(t, must(t, "identify", "--cluster", dir, "--templates", mq, "--top", "1", "--json")) {
		if !r.Accepted || r.ID == nil || *r.ID != names[i] {
			t.Fatalf("new row %s: %+v", names[i], r)
		}
	}
	// fsck checks a shard's data; a shard's log opens as no other shard's.
	must(t, "cluster", "down", "--cluster", dir)
	if out := must(t, "fsck", "--cluster", dir, "--party", "p2", "--shard", "1"); !strings.Contains(out, "p2#1") || !strings.Contains(out, "intact") {
		t.Fatalf("fsck of a shard:\n%s", out)
	}
	if out := must(t, "fsck", "--cluster", dir, "--party", "p2"); !strings.Contains(out, "coordinator keeps no data") {
		t.Fatalf("fsck of a coordinator:\n%s", out)
	}
	data := filepath.Join(cluster.HomeDir(dir, "p2"), "data")
	if err := os.Rename(filepath.Join(data, "shard-0"), filepath.Join(data, "shard-x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(data, "shard-1"), filepath.Join(data, "shard-0")); err != nil {
		t.Fatal(err)
	}
	if out, _, code := idface(t, "fsck", "--cluster", dir, "--party", "p2", "--shard", "0"); code == 0 || !strings.Contains(out, "p2#1") {
		t.Fatalf("shard 1's log checked as shard 0's: exit %d\n%s", code, out)
	}
}

// TestReshardAssembly: across organisations a new shard count is agreed
// as any configuration change: each server names its new shard addresses
// ('party shards'), and 'cluster assemble --shards N' refuses another
// count on reassembly unless told --reshard (the data follow the count).
// A sharded configuration needs a shard key ('shard key'), and keeps it.
func TestReshardAssembly(t *testing.T) {
	dir := t.TempDir()
	var pubs []string
	for i, m := range []struct{ name, role string }{{"orga", "share-holder"}, {"orgb", "share-holder"}, {"dec", "decider"}} {
		h := filepath.Join(dir, m.name)
		must(t, "party", "init", "--home", h, "--name", m.name, "--role", m.role, "--listen", fmt.Sprintf("127.0.0.1:%d", 17000+10*i),
			"--shard-addrs", fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", 17001+10*i, 17002+10*i))
		pubs = append(pubs, filepath.Join(h, m.name+".pub.json"))
	}
	must(t, "client", "init", "--home", filepath.Join(dir, "op"), "--name", "op", "--role", "operator")
	pubs = append(pubs, filepath.Join(dir, "op", "op.pub.json"))
	cfg := filepath.Join(dir, "cluster.json")
	if _, errs, code := idface(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind", "--shards", "2"}, pubs...)...); code == 0 || !strings.Contains(errs, "shard key") {
		t.Fatalf("a sharded configuration without a shard key: exit %d, %s", code, errs)
	}
	key, other := filepath.Join(dir, "shard.key"), filepath.Join(dir, "other.key")
	must(t, "shard", "key", "--out", key)
	must(t, "shard", "key", "--out", other)
	must(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind", "--shards", "2", "--shard-key", key}, pubs...)...)
	for i, name := range []string{"orga", "orgb", "dec"} {
		must(t, "party", "shards", "--home", filepath.Join(dir, name), "--shard-addrs",
			fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", 17001+10*i, 17002+10*i, 17003+10*i))
	}
	if _, errs, code := idface(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind", "--shards", "3"}, pubs...)...); code == 0 || !strings.Contains(errs, "shards") {
		t.Fatalf("another shard count on reassembly, without --reshard: exit %d, %s", code, errs)
	}
	if _, errs, code := idface(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind", "--shards", "3", "--reshard", "--shard-key", other}, pubs...)...); code == 0 || !strings.Contains(errs, "keeps its shard key") {
		t.Fatalf("another shard key on reassembly: exit %d, %s", code, errs)
	}
	before, err := config.LoadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	must(t, append([]string{"cluster", "assemble", "--out", cfg, "--mode", "blind", "--shards", "3", "--reshard"}, pubs...)...)
	p, err := config.LoadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if id := p.Literal().ShardKeyID; id == "" || id != before.Literal().ShardKeyID {
		t.Fatalf("the shard key id %q after reassembly, %q before", id, before.Literal().ShardKeyID)
	}
	if m, _ := p.Server("orgb"); p.Shards() != 3 || p.Serial() != 2 || len(m.Shards) != 3 || m.Shards[2] != "127.0.0.1:17013" {
		t.Fatalf("reassembled: %d shards, serial %d, orgb's %v", p.Shards(), p.Serial(), m.Shards)
	}
}

// TestCrashedHelperRestarted: a 2PC helper killed with SIGKILL and started
// again at once (before the entry's connection to it times out) answers
// the very next identify: the entry's query on the old connection draws
// the restarted helper's stateless reset and is sent again on a new one.
func TestCrashedHelperRestarted(t *testing.T) {
	dir, cfg := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 30, 49)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.gallery[:1])
	identify := func() {
		t.Helper()
		r := parseResults(t, must(t, "identify", "--cluster", dir, "--entry", "p1", "--templates", q, "--top", "1", "--json"))
		if !r[0].Accepted || r[0].ID == nil || *r[0].ID != d.names[0] {
			t.Fatalf("identify: %+v", r[0])
		}
	}
	identify()
	if err := cluster.Kill(cfg, "p2"); err != nil {
		t.Fatal(err)
	}
	must(t, "cluster", "up", "--cluster", dir)
	identify()
}

// TestCrashedDeciderRestarted: kill -9 of a blind or replicated cluster's
// decider and a restart within the transport's idle timeout; the entry
// and the helpers still hold connections to the dead process, and the
// next identify, through either entry, is answered (the query runs again
// under a fresh id when the decider's answer is lost to the restart).
func TestCrashedDeciderRestarted(t *testing.T) {
	for _, mode := range []string{"blind", "replicated"} {
		t.Run(mode, func(t *testing.T) {
			mu := 2
			if mode == "replicated" {
				mu = 3
			}
			dir, cfg := newCluster(t, mode, mu)
			d := newDataset(t, t.TempDir(), 30, 51)
			must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
			q := filepath.Join(t.TempDir(), "q.npy")
			writeNpy(t, q, d.gallery[:1])
			identify := func(entry string) {
				t.Helper()
				r := parseResults(t, must(t, "identify", "--cluster", dir, "--entry", entry, "--templates", q, "--top", "1", "--json"))
				if !r[0].Accepted || r[0].ID == nil || *r[0].ID != d.names[0] {
					t.Fatalf("identify through %s: %+v", entry, r[0])
				}
			}
			for round := range 2 {
				identify("p1")
				identify("p2")
				if err := cluster.Kill(cfg, "decider"); err != nil {
					t.Fatal(err)
				}
				must(t, "cluster", "up", "--cluster", dir)
				identify([]string{"p1", "p2"}[round])
			}
		})
	}
}

// TestShardedHECLI: mode he with two local servers and the key server,
// each a coordinator and three shard processes. Answers are the
// plaintext's accepted rows, in order (ids where scores are not tied),
// through either local server; a key server shard killed with kill -9
// under two clients fails queries naming its shard, never answers
// wrongly, and the cluster answers again after 'cluster up'; rebalance
// is refused (the rows are encrypted per shard), fsck checks a shard.
func TestShardedHECLI(t *testing.T) {
	dir, cfg := newCluster(t, "he", 2, "--shards", "3")
	d := newDataset(t, t.TempDir(), 300, 53)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	rows := transformRows(t, d.gallery, d.names, cfg.Alpha())
	q := filepath.Join(t.TempDir(), "q.npy")
	writeNpy(t, q, d.queries[:20])
	const topK = 3
	type best struct {
		id    string
		score int
	}
	wants := make([][]best, 20)
	score := make([]map[string]int, 20)
	for i := range wants {
		score[i] = map[string]int{}
		for _, w := range plainTop(t, rows, d.queries[i], cfg.Alpha(), cfg.Beta(), len(rows)) {
			score[i][w.id] = w.score
			if w.score >= cfg.Threshold() && len(wants[i]) < topK {
				wants[i] = append(wants[i], best{w.id, w.score})
			}
		}
	}
	// right: the answer has the plaintext's accepted top 3 scores in order
	// (the key server never reveals them: looked up by id).
	right := func(i int, ids []string) bool {
		if len(ids) != len(wants[i]) {
			return false
		}
		for j, id := range ids {
			if s, ok := score[i][id]; !ok || s != wants[i][j].score {
				return false
			}
		}
		return true
	}
	accepted := 0
	check := func(entry string) {
		t.Helper()
		for i, r := range parseResults(t, must(t, "identify", "--cluster", dir, "--entry", entry, "--templates", q, "--top", fmt.Sprint(topK), "--json")) {
			var ids []string
			for _, c := range r.Candidates {
				ids = append(ids, c.ID)
			}
			if !right(i, ids) {
				t.Fatalf("query %d through %s: %v, plaintext %v", i, entry, ids, wants[i])
			}
			if len(ids) > 0 {
				accepted++
			}
		}
	}
	check("p1")
	check("p2")
	if accepted == 0 {
		t.Fatal("no query was accepted: the test checks nothing")
	}
	if st := must(t, "cluster", "status", "--cluster", dir); !strings.Contains(st, "coordinator of 3 shards") || !strings.Contains(st, "key#2") {
		t.Fatalf("status:\n%s", st)
	}

	victim := config.ShardName("key", 1)
	answered, failed, failedWhileDown := killUnderLoad(t, cfg, dir, victim, []string{"p1", "p2"}, d.queries[:20], topK, func(i int, r *protocol.IdentifyOK, err error) {
		if err != nil {
			if !strings.Contains(err.Error(), "shard 1") && !strings.Contains(err.Error(), victim) {
				t.Errorf("query %d failed without naming %s: %v", i, victim, err)
			}
			return
		}
		var ids []string
		for _, c := range r.Candidates {
			ids = append(ids, c.ID)
		}
		if !right(i, ids) {
			t.Errorf("query %d answered wrongly: %v, plaintext %v", i, ids, wants[i])
		}
	})
	if answered == 0 || failedWhileDown == 0 {
		t.Fatalf("%d answered, %d failed while %s was down", answered, failedWhileDown, victim)
	}
	t.Logf("%d answered, %d failed (%s killed for about 8 s)", answered, failed, victim)
	check("p2")

	must(t, "cluster", "down", "--cluster", dir)
	if _, errs, code := idface(t, "shard", "rebalance", "--cluster", dir, "--shards", "2"); code == 0 || !strings.Contains(errs, "enroll the gallery") {
		t.Fatalf("rebalance in mode he: exit %d, %s", code, errs)
	}
	for _, name := range []string{"p2", "key"} {
		if out := must(t, "fsck", "--cluster", dir, "--party", name, "--shard", "2"); !strings.Contains(out, "intact") {
			t.Fatalf("fsck of %s's shard 2:\n%s", name, out)
		}
	}
}

// TestShardKeyHeldByHoldersOnly: 'cluster init --shards' places rows
// under a secret shard key that the share holders and the operator hold
// and the decider does not; each shard holds exactly the ids the keyed
// placement gives it; a decider whose home holds the key refuses to
// start, and so does a holder without it.
func TestShardKeyHeldByHoldersOnly(t *testing.T) {
	const S = 3
	dir, cfg := newCluster(t, "blind", 2, "--shards", fmt.Sprint(S))
	keyOf := func(name string) *[32]byte {
		t.Helper()
		k, err := home.ReadShardKey(filepath.Join(cluster.HomeDir(dir, name), config.ShardKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	key := keyOf("p1")
	if key == nil || *keyOf("p2") != *key || *keyOf("client") != *key || keyOf("decider") != nil || keyOf("device") != nil {
		t.Fatal("the shard key is not exactly in the holders' and the operator's homes")
	}
	if !cfg.ShardKeyed() || cfg.Literal().ShardKeyID != config.ShardKeyID(key) {
		t.Fatalf("shard_key_id %q", cfg.Literal().ShardKeyID)
	}
	d := newDataset(t, t.TempDir(), 120, 57)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")
	keyed, public := make([]int, S), make([]int, S)
	for _, id := range d.names {
		keyed[rowmap.ShardOfKeyed(key, id, S)]++
		public[rowmap.ShardOf(cfg.ClusterID(), id, S)]++
	}
	cl, err := cluster.Client(cfg, "client", "p1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for s := range S {
		h, err := cl.Health(context.Background(), config.ShardName("p2", s))
		if err != nil {
			t.Fatal(err)
		}
		if int(h.Live) != keyed[s] {
			t.Fatalf("p2#%d holds %d rows; the keyed placement gives it %d (the public one %d)", s, h.Live, keyed[s], public[s])
		}
	}
	t.Logf("rows per shard: keyed %v, public %v", keyed, public)

	must(t, "cluster", "down", "--cluster", dir)
	b, err := os.ReadFile(filepath.Join(cluster.HomeDir(dir, "p1"), config.ShardKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	decKey := filepath.Join(cluster.HomeDir(dir, "decider"), config.ShardKeyFile)
	if err := os.WriteFile(decKey, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := idface(t, "serve", "--config", filepath.Join(dir, config.File), "--home", cluster.HomeDir(dir, "decider"), "--shard", "0"); code == 0 || !strings.Contains(out+errs, "must never hold the shard key") {
		t.Fatalf("a decider with the shard key: exit %d, %s%s", code, out, errs)
	}
	os.Remove(decKey)
	p2Key := filepath.Join(cluster.HomeDir(dir, "p2"), config.ShardKeyFile)
	os.Remove(p2Key)
	if out, errs, code := idface(t, "serve", "--config", filepath.Join(dir, config.File), "--home", cluster.HomeDir(dir, "p2"), "--shard", "1"); code == 0 || !strings.Contains(out+errs, "has no "+config.ShardKeyFile) {
		t.Fatalf("a holder without the shard key: exit %d, %s%s", code, out, errs)
	}
	if err := os.WriteFile(p2Key, b, 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, "cluster", "up", "--cluster", dir)
	must(t, "identify", "--cluster", dir, "--templates", d.query, "--top", "1")
}

// killUnderLoad runs one client per entry, each identifying queries in
// turn (top topK, each answer or error to check, under a lock), kills
// server victim with SIGKILL after a second, waits 8 s (a killed process
// sends no close: its peers' connections end at the transport's idle
// timeout, 5 s in quicnet, which fails the queries), brings it back with
// 'cluster up' and stops the clients 2 s later. It returns the answered
// and failed queries, and the failures before the restart.
func killUnderLoad(t *testing.T, cfg *config.Params, dir, victim string, entries []string, queries [][]float32, topK int, check func(i int, r *protocol.IdentifyOK, err error)) (answered, failed, failedWhileDown int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c, entry := range entries {
		wg.Go(func() {
			cl, err := cluster.Client(cfg, "device", entry)
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			for i := c; ctx.Err() == nil; i = (i + 1) % len(queries) {
				qctx, qcancel := context.WithTimeout(ctx, 20*time.Second)
				r, err := cl.Identify(qctx, queries[i], topK)
				qcancel()
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					failed++
				} else {
					answered++
				}
				check(i, r, err)
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	if err := cluster.Kill(cfg, victim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second)
	mu.Lock()
	failedWhileDown = failed
	mu.Unlock()
	must(t, "cluster", "up", "--cluster", dir)
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	return answered, failed, failedWhileDown
}
