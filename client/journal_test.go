package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJournalReplay: what a journal says of each id after committed,
// refused and unanswered changes, across a reopen, a torn last line, and
// refusals of another cluster's journal, a damaged line and a second user.
func TestJournalReplay(t *testing.T) {
	cluster := [16]byte{1, 2, 3}
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, err := OpenJournal(path, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenJournal(path, cluster); err == nil || !strings.Contains(err.Error(), "in use by another idface command") {
		t.Fatalf("second open: %v", err)
	}
	ha, hb := TemplateHash([]float32{1, 2}), TemplateHash([]float32{2, 1})
	b1, _ := j.Begin('+', []string{"a", "b"}, [][16]byte{ha, hb})
	j.End(b1, true)
	b2, _ := j.Begin('+', []string{"c"}, [][16]byte{ha})
	j.End(b2, false)
	b3, _ := j.Begin('-', []string{"b"}, nil)
	j.End(b3, true)
	b4, _ := j.Begin('+', []string{"d", "b"}, [][16]byte{hb, ha})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of writing an outcome.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"b":4,"o`)
	f.Close()
	for range 2 { // the reopen cuts the torn line; the next one reads the same
		j, err = OpenJournal(path, cluster)
		if err != nil {
			t.Fatal(err)
		}
		check := func(id string, want Entry) {
			t.Helper()
			if got := j.Lookup(id); got != want {
				t.Errorf("%s: %+v, want %+v", id, got, want)
			}
		}
		check("a", Entry{State: Enrolled, Op: '+', Hash: ha, Batch: b1})
		check("b", Entry{State: InDoubt, Op: '+', Hash: ha, Batch: b4})
		check("c", Entry{})
		check("d", Entry{State: InDoubt, Op: '+', Hash: hb, Batch: b4})
		if u := j.Unanswered(); len(u) != 1 || len(u[b4]) != 2 {
			t.Errorf("unanswered %v", u)
		}
		j.Close()
	}
	j, _ = OpenJournal(path, cluster)
	if b5, _ := j.Begin('+', []string{"e"}, [][16]byte{ha}); b5 != b4+1 {
		t.Errorf("batch numbers go on at %d, want %d", b5, b4+1)
	}
	j.End(b4, false)
	if e := j.Lookup("b"); e.State != Deleted {
		t.Errorf("b after its enrollment was refused: %+v", e)
	}
	j.Close()
	if _, err := OpenJournal(path, [16]byte{9}); err == nil || !strings.Contains(err.Error(), "not of this cluster") {
		t.Errorf("another cluster's journal: %v", err)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, append(b, "garbage\n{\"b\":1,\"ok\":true}\n"...), 0o600)
	if _, err := OpenJournal(path, cluster); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Errorf("damaged journal: %v", err)
	}
}

// TestJournalRefuseUnanswered: the unanswered enrollments are recorded as
// refused, across a reopen; an unanswered deletion stays.
func TestJournalRefuseUnanswered(t *testing.T) {
	cluster := [16]byte{1}
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, err := OpenJournal(path, cluster)
	if err != nil {
		t.Fatal(err)
	}
	h := TemplateHash([]float32{1, 2})
	j.Begin('+', []string{"a", "b"}, [][16]byte{h, h})
	j.Begin('+', []string{"c"}, [][16]byte{h})
	del, _ := j.Begin('-', []string{"d"}, nil)
	if n, err := j.RefuseUnanswered('+'); n != 3 || err != nil {
		t.Fatalf("refused %d ids: %v; want 3", n, err)
	}
	j.Close()
	j, err = OpenJournal(path, cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, id := range []string{"a", "b", "c"} {
		if e := j.Lookup(id); e.State != Unknown {
			t.Errorf("%s: %+v, want unknown (refused)", id, e)
		}
	}
	if u := j.Unanswered(); len(u) != 1 || len(u[del]) != 1 {
		t.Errorf("unanswered %v; want the deletion", u)
	}
}
