package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func records(n int) []Record {
	var rs []Record
	for i := range n {
		r := Record{Type: uint8(i%3 + 1), Sealed: bytes.Repeat([]byte{byte(i)}, 10+i)}
		if i%2 == 0 {
			r.Tail = bytes.Repeat([]byte{0xA0 | byte(i)}, 8*i+1)
		}
		rs = append(rs, r)
	}
	return rs
}

func collect(path string, kind Kind) ([]Entry, *Log, Report, error) {
	var got []Entry
	l, rep, err := Open(path, bnd(kind), func(e Entry) error { got = append(got, e); return nil })
	return got, l, rep, err
}

func writeLog(t *testing.T, path string, rs []Record) []Pos {
	t.Helper()
	l, _, err := Open(path, bnd(KindShares), func(Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var pos []Pos
	for _, r := range rs { // one append per record, like the engines
		p, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p...)
	}
	return pos
}

func TestAppendReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	rs := records(7)
	pos := writeLog(t, path, rs)
	got, l, rep, err := collect(path, KindShares)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(got) != len(rs) || rep.Records != len(rs) || rep.TornBytes != 0 {
		t.Fatalf("replayed %d of %d records (%+v)", len(got), len(rs), rep)
	}
	for i, e := range got {
		if e.Type != rs[i].Type || !bytes.Equal(e.Sealed, rs[i].Sealed) || !bytes.Equal(e.Tail, rs[i].Tail) || !e.TailIntact {
			t.Fatalf("record %d differs", i)
		}
		if e.Offset != pos[i].Offset || e.TailOffset != pos[i].TailOffset || e.Last != (i == len(rs)-1) {
			t.Fatalf("record %d at %d/%d last=%v, appended at %+v", i, e.Offset, e.TailOffset, e.Last, pos[i])
		}
	}
}

// TestTornTail cuts the log at every byte of its last record: every
// earlier record replays, the torn bytes are kept aside, and appending
// continues.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.log")
	rs := records(4)
	pos := writeLog(t, full, rs)
	b, _ := os.ReadFile(full)
	for cut := pos[3].Offset; cut < int64(len(b)); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut%d.log", cut))
		os.WriteFile(path, b[:cut], 0o600)
		got, l, rep, err := collect(path, KindShares)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if len(got) != 3 || rep.TornBytes != cut-pos[3].Offset {
			t.Fatalf("cut at %d: %d records, %d torn bytes", cut, len(got), rep.TornBytes)
		}
		if rep.TornBytes > 0 {
			if kept, _ := os.ReadFile(rep.TornFile); !bytes.Equal(kept, b[pos[3].Offset:cut]) {
				t.Fatalf("cut at %d: torn bytes not kept", cut)
			}
		}
		if _, err := l.Append(rs[3]); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if got, l, _, err := collect(path, KindShares); err != nil || len(got) != 4 {
			t.Fatalf("after re-append: %d records, %v", len(got), err)
		} else {
			l.Close()
		}
	}
	// A torn file header of a new log.
	path := filepath.Join(dir, "new.log")
	os.WriteFile(path, mustHeader(KindShares)[:5], 0o600)
	if _, l, _, err := collect(path, KindShares); err != nil {
		t.Fatal(err)
	} else {
		l.Close()
	}
}

// TestDamageInTheMiddle flips a bit in every record but the last: the log
// refuses to open and names the offset; nothing is cut.
func TestDamageInTheMiddle(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.log")
	rs := records(5)
	pos := writeLog(t, full, rs)
	b, _ := os.ReadFile(full)
	for i := range 4 {
		for _, at := range []int64{pos[i].Offset + 1, pos[i].Offset + 7, pos[i].Offset + recHeaderLen + 2} {
			bad := bytes.Clone(b)
			bad[at] ^= 0x10
			path := filepath.Join(dir, "bad.log")
			os.WriteFile(path, bad, 0o600)
			_, _, _, err := collect(path, KindShares)
			var de *DamageError
			if !errors.As(err, &de) || de.Offset != pos[i].Offset {
				t.Fatalf("bit flipped at %d (record %d): %v", at, i, err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, bad) {
				t.Fatal("a damaged log was changed")
			}
		}
	}
	// A flipped tail byte leaves the sealed part intact: the engine is told.
	bad := bytes.Clone(b)
	bad[pos[2].TailOffset] ^= 1
	path := filepath.Join(dir, "tail.log")
	os.WriteFile(path, bad, 0o600)
	got, l, _, err := collect(path, KindShares)
	if err != nil || got[2].TailIntact || !got[0].TailIntact {
		t.Fatalf("tail damage: %v", err)
	}
	l.Close()
}

func TestFormatErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	writeLog(t, path, records(2))
	var fe *FormatError
	var be *BindingError
	if _, _, _, err := collect(path, KindHERows); !errors.As(err, &be) {
		t.Fatalf("kind mismatch: %v", err)
	}
	legacy := filepath.Join(dir, "legacy.wal")
	os.WriteFile(legacy, []byte{0, 0, 0, 40, 1, 2, 3, 4, 1, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9}, 0o600)
	if _, _, _, err := collect(legacy, KindShares); !errors.As(err, &fe) {
		t.Fatalf("legacy log: %v", err)
	}
	b, _ := os.ReadFile(path)
	b[9] = 9 // format 9
	os.WriteFile(path, b, 0o600)
	if _, _, _, err := collect(path, KindShares); err == nil {
		t.Fatal("format 9 accepted")
	}
}

func TestErrTornOnlyAtTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	writeLog(t, path, records(3))
	n := 0
	_, _, err := Open(path, bnd(KindShares), func(e Entry) error {
		n++
		if n == 2 {
			return ErrTorn
		}
		return nil
	})
	if err == nil {
		t.Fatal("ErrTorn accepted for a record in the middle")
	}
	l, rep, err := Open(path, bnd(KindShares), func(e Entry) error {
		if e.Last {
			return ErrTorn
		}
		return nil
	})
	if err != nil || rep.Records != 2 || rep.TornBytes == 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	l.Close()
}

func TestOverwrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	rs := records(3)
	pos := writeLog(t, path, rs)
	l, _, err := Open(path, bnd(KindShares), func(Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Overwrite(pos[2].TailOffset, make([]byte, len(rs[2].Tail))); err != nil {
		t.Fatal(err)
	}
	if err := l.Overwrite(l.Size()-1, []byte{1, 2}); err == nil {
		t.Fatal("overwrite past the end accepted")
	}
	l.Close()
	got, l, _, err := collect(path, KindShares)
	if err != nil || got[2].TailIntact || !bytes.Equal(got[2].Tail, make([]byte, len(rs[2].Tail))) {
		t.Fatalf("after erasure: %v", err)
	}
	l.Close()
}

// FuzzScan feeds arbitrary bytes after a valid file header: no panic, and
// whatever is accepted is a prefix of intact records.
func FuzzScan(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.log")
	l, _, _ := Open(path, bnd(KindShares), func(Entry) error { return nil })
	l.Append(records(3)...)
	l.Close()
	seed, _ := os.ReadFile(path)
	f.Add(seed[testHeaderLen:])
	f.Add([]byte{0x1d, 0xfa, 1, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		p := filepath.Join(t.TempDir(), "f.log")
		os.WriteFile(p, append(mustHeader(KindShares), body...), 0o600)
		n := 0
		rep, err := Scan(p, bnd(KindShares), func(e Entry) error {
			if len(e.Sealed)+len(e.Tail) > MaxRecord {
				t.Fatal("oversized record accepted")
			}
			n++
			return nil
		})
		if err == nil && (rep.Records != n || rep.Bytes+rep.TornBytes != int64(testHeaderLen+len(body))) {
			t.Fatalf("report %+v for %d records of %d bytes", rep, n, len(body))
		}
	})
}

// TestScanAll reports every damaged span and replays the records around
// them.
func TestScanAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	pos := writeLog(t, path, records(6))
	b, _ := os.ReadFile(path)
	b[pos[1].Offset+3] ^= 1
	b[pos[4].Offset+recHeaderLen] ^= 1
	os.WriteFile(path, b, 0o600)
	n := 0
	rep, err := ScanAll(path, bnd(KindShares), func(Entry) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Damaged) != 2 || rep.Damaged[0].Offset != pos[1].Offset || rep.Damaged[0].Next != pos[2].Offset ||
		rep.Damaged[1].Offset != pos[4].Offset || rep.Damaged[1].Next != pos[5].Offset || n != 4 || rep.Records != 4 {
		t.Fatalf("%+v, %d replayed", rep, n)
	}
}

// bnd is the binding of the test logs.
func bnd(k Kind) Binding {
	return Binding{Kind: k, Cluster: [16]byte{1, 2, 3}, Member: "p1", Mode: "2pc"}
}

// mustHeader is a new test log's file header.
func mustHeader(k Kind) []byte {
	h, err := fileHeader(withGeneration(bnd(k)))
	if err != nil {
		panic(err)
	}
	return h
}

// testHeaderLen is the length of the test logs' file header.
var testHeaderLen = len(mustHeader(KindShares))
