package abis

import (
	"os"
	"path/filepath"
	"strings"
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
