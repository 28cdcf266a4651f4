package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
)

// TestBulkResume: bulk enrollment stops at the first refused batch and
// says exactly which lines were enrolled, refused and not sent; a re-run
// without --resume is refused before anything is sent; --resume skips
// what the journal shows enrolled, refuses an id enrolled with another
// template, and settles batches whose answer was lost; delete --ids
// reports and resumes the same way (issue 20 item 2).
func TestBulkResume(t *testing.T) {
	dir, cfg := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 300, 21)
	work := t.TempDir()
	one := filepath.Join(work, "one.npy")
	writeNpy(t, one, d.queries[159:160])
	// Someone else (another journal) enrolls person-159 first.
	must(t, "enroll", "--cluster", dir, "--id", "person-159", "--template", one, "--journal", filepath.Join(work, "other.jsonl"))
	fail := func(want string, args ...string) string {
		t.Helper()
		out, errs, code := idface(t, args...)
		if code != 1 || !strings.Contains(errs, want) {
			t.Fatalf("idface %s: exit %d\n%s%s\nwant exit 1 and %q", strings.Join(args, " "), code, out, errs, want)
		}
		return errs
	}
	bulk := []string{"enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "50", "--quiet"}
	fail("enrolled 150 of 300 ("+d.ids+" lines 1-150); "+d.ids+" lines 151-200 were refused and rolled back; "+d.ids+" lines 201-300 were not sent: ", bulk...)
	if n := liveRows(t, cfg); n != 151 {
		t.Fatalf("%d live rows, want 151", n)
	}
	fail("nothing was enrolled: 150 ids are already enrolled with these templates", bulk...)
	resume := append(bulk, "--resume")
	fail("enrolled 0 of 150; 150 enrolled before were skipped; "+d.ids+" lines 151-200 were refused", resume...)
	must(t, "delete", "--cluster", dir, "--id", "person-159", "--journal", filepath.Join(work, "other.jsonl"))
	if out := must(t, resume...); !strings.Contains(out, "enrolled 150 at every party") || !strings.Contains(out, "150 enrolled before were skipped") {
		t.Fatalf("resume: %q", out)
	}
	if n := liveRows(t, cfg); n != 300 {
		t.Fatalf("%d live rows, want 300", n)
	}
	// person-3 with another template: refused, with or without --resume.
	fail(`"person-3" (--id) is already enrolled with another template`, "enroll", "--cluster", dir, "--id", "person-3", "--template", one, "--resume")

	// A batch whose answer was lost after it committed (its outcome is
	// cut from the journal), and one lost before it was sent.
	journal := client.JournalPath(filepath.Join(dir, "homes", "client"), cfg.ClusterID())
	lines := readLines(t, journal)
	if last := lines[len(lines)-1]; !strings.Contains(last, `"ok":true`) {
		t.Fatalf("journal ends with %q", last)
	}
	extra := filepath.Join(work, "extra.npy")
	writeNpy(t, extra, d.queries[:2])
	os.WriteFile(filepath.Join(work, "extra.txt"), []byte("extra-0\nextra-1\n"), 0o644)
	lines = lines[:len(lines)-1]
	for i, id := range []string{"extra-0", "extra-1"} {
		h := client.TemplateHash(d.queries[i])
		lines = append(lines, fmt.Sprintf(`{"b":999,"op":"+","id":%q,"h":"%x"}`, id, h[:]))
	}
	os.WriteFile(journal, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	fail("2 ids were sent by an earlier run that got no answer", "enroll", "--cluster", dir, "--ids", filepath.Join(work, "extra.txt"), "--templates", extra)
	if out := must(t, "enroll", "--cluster", dir, "--ids", filepath.Join(work, "extra.txt"), "--templates", extra, "--resume"); !strings.Contains(out, "enrolled 2 at every party") {
		t.Fatalf("settling an unsent batch: %q", out)
	}
	if out := must(t, resume...); !strings.Contains(out, "enrolled 0 at every party") || !strings.Contains(out, "300 enrolled before were skipped") {
		t.Fatalf("settling a committed batch: %q", out)
	}
	if n := liveRows(t, cfg); n != 302 {
		t.Fatalf("%d live rows, want 302", n)
	}

	// delete --ids: stops at an unknown id, resumes past what it deleted.
	del := filepath.Join(work, "del.txt")
	os.WriteFile(del, []byte("person-0\nperson-1\nnobody\nperson-2\nperson-3\n"), 0o644)
	fail(`deleted 2 of 5 (`+del+` lines 1-2); "nobody" (`+del+` line 3) was refused; `+del+` lines 4-5 were not sent: `, "delete", "--cluster", dir, "--ids", del)
	os.WriteFile(del, []byte("person-0\nperson-1\nperson-2\nperson-3\n"), 0o644)
	if out := must(t, "delete", "--cluster", dir, "--ids", del, "--resume"); !strings.Contains(out, "deleted 2 at every party; 2 deleted before were skipped") {
		t.Fatalf("delete --resume: %q", out)
	}
	if n := liveRows(t, cfg); n != 298 {
		t.Fatalf("%d live rows, want 298", n)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// TestBulkResumeSharded: in a sharded cluster a bulk enrollment that stops
// at a refused batch reports and journals exactly what each shard
// committed, and --resume sends only the rest. Before, a batch went to
// every shard at once: the shards without the duplicate committed their
// parts, the whole batch was reported refused and journaled as not
// enrolled, and --resume failed on the ids it re-sent ("the journal does
// not know that id").
func TestBulkResumeSharded(t *testing.T) {
	const S = 3
	dir, cfg := newCluster(t, "2pc", 2, "--shards", fmt.Sprint(S))
	d := newDataset(t, t.TempDir(), 300, 23)
	work := t.TempDir()
	one := filepath.Join(work, "one.npy")
	writeNpy(t, one, d.queries[159:160])
	must(t, "enroll", "--cluster", dir, "--id", "person-159", "--template", one, "--journal", filepath.Join(work, "other.jsonl"))
	live := func() int {
		t.Helper()
		cl, err := cluster.Client(cfg, "client", "p1")
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		n := 0
		for _, p := range []string{"p1", "p2"} {
			m := 0
			for s := range S {
				h, err := cl.Health(context.Background(), config.ShardName(p, s))
				if err != nil {
					t.Fatal(err)
				}
				m += int(h.Live)
			}
			if p != "p1" && m != n {
				t.Fatalf("p1's shards hold %d live rows, p2's %d", n, m)
			}
			n = m
		}
		return n
	}
	bulk := []string{"enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--batch", "20", "--quiet"}
	_, errs, code := idface(t, bulk...)
	if code != 1 || !strings.Contains(errs, "were refused and rolled back") || !strings.Contains(errs, "were not sent") {
		t.Fatalf("bulk enrollment: exit %d\n%s", code, errs)
	}
	acked := ackedCount(t, errs)
	if n := live(); n != acked+1 {
		t.Fatalf("%d live rows; the enrollment said %d of its ids were enrolled (and person-159 was before)\n%s", n, acked, errs)
	}
	must(t, "delete", "--cluster", dir, "--id", "person-159", "--journal", filepath.Join(work, "other.jsonl"))
	out := must(t, append(bulk, "--resume")...)
	if !strings.Contains(out, fmt.Sprintf("enrolled %d at every party", 300-acked)) || !strings.Contains(out, fmt.Sprintf("%d enrolled before were skipped", acked)) {
		t.Fatalf("resume after %d enrolled: %q", acked, out)
	}
	if n := live(); n != 300 {
		t.Fatalf("%d live rows, want 300", n)
	}

	// Settling asks every shard whether earlier changes are settled (a
	// coordinator holds none): a committed batch whose outcome is cut from
	// the journal, and one lost before it was sent.
	journal := client.JournalPath(filepath.Join(dir, "homes", "client"), cfg.ClusterID())
	lines := readLines(t, journal)
	if last := lines[len(lines)-1]; !strings.Contains(last, `"ok":true`) {
		t.Fatalf("journal ends with %q", last)
	}
	lines = lines[:len(lines)-1]
	extra := filepath.Join(work, "extra.npy")
	writeNpy(t, extra, d.queries[:2])
	os.WriteFile(filepath.Join(work, "extra.txt"), []byte("extra-0\nextra-1\n"), 0o644)
	for i, id := range []string{"extra-0", "extra-1"} {
		h := client.TemplateHash(d.queries[i])
		lines = append(lines, fmt.Sprintf(`{"b":999,"op":"+","id":%q,"h":"%x"}`, id, h[:]))
	}
	os.WriteFile(journal, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	if out := must(t, "enroll", "--cluster", dir, "--ids", filepath.Join(work, "extra.txt"), "--templates", extra, "--resume"); !strings.Contains(out, "enrolled 2 at every party") {
		t.Fatalf("settling an unsent batch: %q", out)
	}
	if out := must(t, append(bulk, "--resume")...); !strings.Contains(out, "enrolled 0 at every party") || !strings.Contains(out, "300 enrolled before were skipped") {
		t.Fatalf("settling a committed batch: %q", out)
	}
	if n := live(); n != 302 {
		t.Fatalf("%d live rows, want 302", n)
	}
}
