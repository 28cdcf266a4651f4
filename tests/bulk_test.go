package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/client"
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
