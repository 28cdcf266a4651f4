package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReplay damages a valid log (flipped bytes, a cut end) and replays
// it: the log is refused (a damaged or foreign file), or what it replays
// is exactly a prefix of the appended records, each at its place, and a
// record's tail is reported intact exactly when it is. Never a record that
// was not appended, never one out of place, never a silently changed one;
// and no intact record before the first changed byte is lost.
//
// edits is a list of (offset u16, xor byte) triples applied to the valid
// log (offsets modulo its length); keep, when not zero, cuts the file to
// that many bytes.
func FuzzReplay(f *testing.F) {
	rs := records(6)
	path := filepath.Join(f.TempDir(), "valid.log")
	l, _, err := Open(path, bnd(KindShares), func(Entry) error { return nil })
	if err != nil {
		f.Fatal(err)
	}
	var pos []Pos
	for _, r := range rs {
		p, err := l.Append(r)
		if err != nil {
			f.Fatal(err)
		}
		pos = append(pos, p...)
	}
	l.Close()
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if len(valid) > 1<<16 {
		f.Fatalf("the valid log has %d bytes: more than a 16-bit offset reaches", len(valid))
	}
	end := func(j int) int64 { // where record j ends
		if j+1 < len(pos) {
			return pos[j+1].Offset
		}
		return int64(len(valid))
	}
	flip := func(off int64, x byte) []byte { return []byte{byte(off >> 8), byte(off), x} }

	f.Add([]byte(nil), uint32(0)) // the valid log itself
	// The file header.
	for _, off := range []int64{0, 7, 8, 9, 11, 12, 15} {
		f.Add(flip(off, 1), uint32(0))
	}
	for j, p := range pos {
		// Every field of the record header, the sealed part, the tail.
		for _, d := range []int64{0, 1, 2, 3, 4, 7, 8, 11, 12, 15, 16, 19, recHeaderLen, recHeaderLen + 1} {
			f.Add(flip(p.Offset+d, 0x01), uint32(0))
			f.Add(flip(p.Offset+d, 0x80), uint32(0))
		}
		f.Add(flip(p.TailOffset-1, 0x10), uint32(0)) // the last sealed byte
		if len(rs[j].Tail) > 0 {
			f.Add(flip(p.TailOffset, 0x01), uint32(0))
			f.Add(flip(end(j)-1, 0xff), uint32(0))
		}
		// A record that claims other lengths than it holds.
		f.Add(flip(p.Offset+7, 0x01), uint32(0))
		f.Add(flip(p.Offset+11, 0x03), uint32(0))
		// Cuts at, just before and just after the record's start, and
		// inside its header.
		for _, k := range []int64{p.Offset - 1, p.Offset, p.Offset + 1, p.Offset + 10, p.TailOffset} {
			f.Add([]byte(nil), uint32(k))
		}
		// Damage in this record and a cut in the next one.
		f.Add(flip(p.Offset+recHeaderLen, 0x04), uint32(end(j)+3))
		// Two flips in one record.
		f.Add(append(flip(p.Offset+recHeaderLen, 0x01), flip(p.Offset+recHeaderLen+1, 0x01)...), uint32(0))
	}
	for _, k := range []int64{1, 5, int64(testHeaderLen) - 1, int64(testHeaderLen), int64(len(valid)) - 1} {
		f.Add([]byte(nil), uint32(k))
	}
	// A record's tail erased in place (as after a deletion): still replayed,
	// reported as not intact.
	var zero []byte
	for i := range len(rs[2].Tail) {
		zero = append(zero, flip(pos[2].TailOffset+int64(i), rs[2].Tail[i])...)
	}
	f.Add(zero, uint32(0))

	f.Fuzz(func(t *testing.T, edits []byte, keep uint32) {
		b := append([]byte(nil), valid...)
		for i := 0; i+3 <= len(edits); i += 3 {
			b[int(binary.BigEndian.Uint16(edits[i:]))%len(b)] ^= edits[i+2]
		}
		if keep > 0 && int(keep) < len(b) {
			b = b[:keep]
		}
		// first is the first byte that differs from the valid log (a cut
		// counts as a difference at its place).
		first := int64(len(b))
		for i := range b {
			if b[i] != valid[i] {
				first = int64(i)
				break
			}
		}
		if len(b) == len(valid) && first == int64(len(b)) {
			first = int64(len(valid)) + 1 // unchanged
		}
		intact := 0 // records before the first change
		if first >= int64(testHeaderLen) {
			for intact < len(pos) && end(intact) <= first {
				intact++
			}
		}
		p := filepath.Join(t.TempDir(), "damaged.log")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var got []Entry
		rep, err := Scan(p, bnd(KindShares), func(e Entry) error {
			got = append(got, e)
			return nil
		})
		var de *DamageError
		var fe *FormatError
		if err != nil && !errors.As(err, &de) && !errors.As(err, &fe) {
			t.Fatalf("refused with %T %v, want damage or a format error", err, err)
		}
		if len(got) > len(rs) {
			t.Fatalf("%d records replayed, %d appended", len(got), len(rs))
		}
		for j, e := range got {
			r := rs[j]
			if e.Offset != pos[j].Offset || e.TailOffset != pos[j].TailOffset {
				t.Fatalf("record %d replayed at %d/%d, appended at %+v", j, e.Offset, e.TailOffset, pos[j])
			}
			if e.Type != r.Type || !bytes.Equal(e.Sealed, r.Sealed) || len(e.Tail) != len(r.Tail) {
				t.Fatalf("record %d replayed as type %d, %x | %d tail bytes; appended type %d, %x | %d", j, e.Type, e.Sealed, len(e.Tail), r.Type, r.Sealed, len(r.Tail))
			}
			if same := bytes.Equal(e.Tail, r.Tail); e.TailIntact != same {
				t.Fatalf("record %d: tail intact = %v, but the tail is%s as appended", j, e.TailIntact, map[bool]string{false: " not", true: ""}[same])
			}
		}
		if len(got) < intact {
			t.Fatalf("%d records replayed; the first %d are untouched (first change at byte %d)", len(got), intact, first)
		}
		if err != nil {
			return
		}
		if first > int64(len(valid)) && len(got) != len(rs) {
			t.Fatalf("the valid log replayed %d of %d records", len(got), len(rs))
		}
		if rep.Records != len(got) {
			t.Fatalf("report of %d records, %d replayed", rep.Records, len(got))
		}
		if len(got) > 0 && rep.Bytes != end(len(got)-1) {
			t.Fatalf("intact bytes %d, the replayed records end at %d", rep.Bytes, end(len(got)-1))
		}
		if rep.Bytes > 0 && rep.Bytes+rep.TornBytes != int64(len(b)) {
			t.Fatalf("report %+v for a file of %d bytes", rep, len(b))
		}
		// Opening cuts what was not replayed; the cut log replays the same
		// records and nothing more.
		ol, orep, err := Open(p, bnd(KindShares), func(Entry) error { return nil })
		if err != nil {
			t.Fatalf("scanned, but does not open: %v", err)
		}
		ol.Close()
		if orep.Records != len(got) {
			t.Fatalf("opened with %d records, scanned %d", orep.Records, len(got))
		}
		n := 0
		again, err := Scan(p, bnd(KindShares), func(e Entry) error {
			if e.Offset != got[n].Offset || !bytes.Equal(e.Sealed, got[n].Sealed) {
				t.Fatalf("after the cut, record %d differs", n)
			}
			n++
			return nil
		})
		if err != nil || n != len(got) || again.TornBytes != 0 {
			t.Fatalf("after the cut: %d records, %+v, %v", n, again, err)
		}
	})
}
