package abis

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func req(op, rq, ref, url string) *Request {
	q := &Request{ID: op, RequestID: rq}
	if ref != "" {
		q.ReferenceID = &ref
	}
	if url != "" {
		q.ReferenceURL = &url
	}
	return q
}

func TestJournalReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	ins := req(OpInsert, "r1", "A", "https://x/a")
	if err := j.Begin(ins); err != nil {
		t.Fatal(err)
	}
	if err := j.Done(ins, true, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	del := req(OpDelete, "r2", "A", "")
	j.Begin(del)
	j.Close()

	j, err = OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := j.Answered("r1"); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("answer of r1: %q %v", b, err)
	}
	if b, _ := j.Answered("r2"); b != nil {
		t.Fatalf("r2 answered: %q", b)
	}
	if !j.Begun("r2") || j.Begun("r1") {
		t.Fatal("begun changes not replayed")
	}
	if r := j.Ref("A"); r == nil || r.URL != "https://x/a" || r.Deleted {
		t.Fatalf("ref A: %+v", r)
	}
	j.Done(del, true, []byte(`{"b":2}`))
	j.Close()

	// A torn last line is cut; what came before stays.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`0000abcd {"t":"done","rq":"r3"`)
	f.Close()
	j, err = OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := j.Ref("A"); r == nil || !r.Deleted {
		t.Fatalf("ref A after delete: %+v", r)
	}
	if b, _ := j.Answered("r2"); string(b) != `{"b":2}` {
		t.Fatalf("answer of r2: %q", b)
	}
	j.Close()

	// Damage followed by an intact line refuses the open.
	raw, _ := os.ReadFile(path)
	i := strings.Index(string(raw), `"r1"`)
	raw[i+2] = '9'
	os.WriteFile(path, raw, 0o600)
	if _, err := OpenJournal(path); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged journal opened: %v", err)
	}
}

// TestJournalCompaction: once the journal reaches its compaction size it
// is rewritten with the state of every referenceId, the changes begun and
// not answered, and the last keepAnswers answers: those read back as
// written, older ones are gone, a referenceId inserted then deleted stays
// deleted (its insert's answer is kept, and comes before its state), and
// the same holds after a reopen. A compaction file left by a crash before
// its rename is removed at open, the journal intact.
func TestJournalCompaction(t *testing.T) {
	compactSmall(t, 16<<10, 100)
	path := filepath.Join(t.TempDir(), "j")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 1000
	answer := func(i int) string { return fmt.Sprintf(`{"returnValue":"1","requestId":"r%d"}`, i) }
	for i := range n {
		q := req(OpInsert, fmt.Sprintf("r%d", i), fmt.Sprintf("ref-%d", i), fmt.Sprintf("https://x/%d", i))
		if err := j.Done(q, true, []byte(answer(i))); err != nil {
			t.Fatal(err)
		}
	}
	last := req(OpDelete, "del", fmt.Sprintf("ref-%d", n-1), "")
	if err := j.Done(last, true, []byte(`{"d":1}`)); err != nil {
		t.Fatal(err)
	}
	open := req(OpDelete, "open", "ref-3", "")
	if err := j.Begin(open); err != nil {
		t.Fatal(err)
	}
	check := func(j *Journal, when string) {
		t.Helper()
		if b, err := j.Answered("r0"); err != nil || b != nil {
			t.Fatalf("%s: the oldest answer is still kept: %q %v", when, b, err)
		}
		for _, i := range []int{n - keepAnswers + 1, n - 2, n - 1} {
			if b, err := j.Answered(fmt.Sprintf("r%d", i)); err != nil || string(b) != answer(i) {
				t.Fatalf("%s: answer of r%d: %q %v", when, i, b, err)
			}
		}
		if b, err := j.Answered("del"); err != nil || string(b) != `{"d":1}` {
			t.Fatalf("%s: answer of the deletion: %q %v", when, b, err)
		}
		if r := j.Ref("ref-0"); r == nil || r.URL != "https://x/0" || r.Deleted {
			t.Fatalf("%s: ref-0 (answer dropped, state kept): %+v", when, r)
		}
		if r := j.Ref(fmt.Sprintf("ref-%d", n-1)); r == nil || !r.Deleted {
			t.Fatalf("%s: the last ref, deleted after its insert: %+v", when, r)
		}
		if !j.Begun("open") {
			t.Fatalf("%s: the change begun and not answered was lost", when)
		}
	}
	// Compacted on the way (the journal grew past 16 KiB many times over):
	// the oldest answers are gone.
	check(j, "compacted")
	j.Close()
	if err := os.WriteFile(compactPath(path), []byte("half a compaction"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err = OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := os.Stat(compactPath(path)); !os.IsNotExist(err) {
		t.Fatalf("the compaction file left by a crash is still there: %v", err)
	}
	check(j, "reopened")
}

// TestJournalCompactionConcurrent: answers written by many requests at
// once, with compactions among them, are all there afterwards and after
// a reopen (a line written while another request compacted used to be
// applied after the compaction, with an offset into the old file).
func TestJournalCompactionConcurrent(t *testing.T) {
	compactSmall(t, 8<<10, 10000)
	path := filepath.Join(t.TempDir(), "j")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				rq := fmt.Sprintf("w%d-%d", w, i)
				if err := j.Done(req(OpInsert, rq, rq, "https://x/"+rq), true, []byte(`{"rq":"`+rq+`"}`)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, reopen := range []bool{false, true} {
		if reopen {
			j.Close()
			if j, err = OpenJournal(path); err != nil {
				t.Fatal(err)
			}
		}
		for w := range workers {
			for i := range each {
				rq := fmt.Sprintf("w%d-%d", w, i)
				if b, err := j.Answered(rq); err != nil || string(b) != `{"rq":"`+rq+`"}` {
					t.Fatalf("reopened %v: answer of %s: %q %v", reopen, rq, b, err)
				}
				if r := j.Ref(rq); r == nil || r.URL != "https://x/"+rq {
					t.Fatalf("reopened %v: ref %s: %+v", reopen, rq, r)
				}
			}
		}
	}
	j.Close()
}

// TestJournalCompactionFails: a compaction that cannot be written (here
// its file's name is taken by a directory) is said once and tried again
// only when the journal has doubled; every append still succeeds (before,
// each append after the first failure rewrote the journal and returned
// the failure, though its own line was durable, so no change was ever
// answered again; found by review). A compacted journal ends with a
// marker line that a build before compaction reads as intact, so that it
// refuses the journal rather than cut a last ref line as torn.
func TestJournalCompactionFails(t *testing.T) {
	compactSmall(t, 4<<10, 10)
	path := filepath.Join(t.TempDir(), "j")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	j.Warn = func(msg string, args ...any) { warned = append(warned, fmt.Sprint(msg, args)) }
	if err := os.Mkdir(compactPath(path), 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		q := req(OpInsert, fmt.Sprintf("r%d", i), fmt.Sprintf("ref-%d", i), "https://x/y")
		if err := j.Done(q, true, []byte(`{"ok":1}`)); err != nil {
			t.Fatalf("append %d with compactions failing: %v", i, err)
		}
	}
	if len(warned) == 0 || len(warned) > 6 {
		t.Fatalf("%d warnings of a failing compaction over 200 appends (want a few: one each time the journal doubled): %v", len(warned), warned)
	}
	if err := os.Remove(compactPath(path)); err != nil {
		t.Fatal(err)
	}
	for i := 200; i < 2000; i++ {
		q := req(OpInsert, fmt.Sprintf("r%d", i), fmt.Sprintf("ref-%d", i), "https://x/y")
		if err := j.Done(q, true, []byte(`{"ok":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := j.Answered("r0"); b != nil {
		t.Fatal("no compaction once its file could be written")
	}
	j.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	sawRef, marker := false, false
	for _, l := range lines {
		e, ok := parseLine([]byte(l + "\n"))
		if !ok {
			t.Fatalf("a line of the journal does not parse: %q", l)
		}
		switch {
		case e.T == "ref":
			sawRef = true
		case e.T == "compacted" && sawRef:
			marker = e.Req != "" // a build before compaction takes a line with a requestId as intact
		}
	}
	if !sawRef || !marker {
		t.Fatalf("no ref line followed by a compaction marker with a requestId (refs %v, marker %v)", sawRef, marker)
	}
	// A failed journal refuses to write or answer until it is reopened.
	j, err = OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.mu.Lock()
	j.failLocked(errors.New("fsync: input/output error"))
	j.mu.Unlock()
	if err := j.Done(req(OpInsert, "after", "after", "u"), true, nil); err == nil || !strings.Contains(err.Error(), "restart the adapter") {
		t.Fatalf("an append to a failed journal: %v", err)
	}
	if _, err := j.Answered("r1999"); err == nil {
		t.Fatal("a failed journal answered a redelivery from memory")
	}
}

// compactSmall sets the compaction's size and kept answers for one test.
func compactSmall(t *testing.T, min int64, keep int) {
	m, k := compactMin, keepAnswers
	t.Cleanup(func() { compactMin, keepAnswers = m, k })
	compactMin, keepAnswers = min, keep
}
