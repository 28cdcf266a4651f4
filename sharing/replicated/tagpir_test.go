package replicated_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/idface/idface/sharing/replicated"
)

// TestTagOnDemand fetches every position's tag of vectors of several
// lengths through two helpers' answers, and checks each selection alone
// against the grid (the pair differs in one row's bit) and each recovered
// row against the list of row digests (an altered byte fails).
func TestTagOnDemand(t *testing.T) {
	for _, n := range []int{1, 2, 31, 32, 33, 100, 1000, 4099} {
		vec := make([]uint16, n)
		for i := range vec {
			vec[i] = uint16(i * 7919)
		}
		var key [32]byte
		rand.Read(key[:])
		tags := make([]byte, 4*n)
		if err := replicated.Tags(tags, vec, &key); err != nil {
			t.Fatal(err)
		}
		cols, rows := replicated.TagGrid(n)
		if cols*rows < n || cols*(rows-1) >= n {
			t.Fatalf("n=%d: grid %d x %d", n, rows, cols)
		}
		qid := [16]byte{byte(n)}
		list := replicated.TagRowDigests(tags, cols, qid)
		if len(list) != rows*replicated.TagRowDigestSize {
			t.Fatalf("n=%d: %d bytes of row digests for %d rows", n, len(list), rows)
		}
		for p := range n {
			s0, s1, err := replicated.TagSelect(rand.Reader, rows, p/cols)
			if err != nil {
				t.Fatal(err)
			}
			diff := 0
			for i := range s0 {
				for x := s0[i] ^ s1[i]; x != 0; x &= x - 1 {
					diff++
				}
			}
			if diff != 1 || len(s0) != replicated.TagSelectBytes(rows) {
				t.Fatalf("n=%d p=%d: selections differ in %d bits", n, p, diff)
			}
			a0, a1 := make([]byte, 4*cols), make([]byte, 4*cols)
			if err := replicated.TagAnswer(a0, tags, cols, s0); err != nil {
				t.Fatal(err)
			}
			if err := replicated.TagAnswer(a1, tags, cols, s1); err != nil {
				t.Fatal(err)
			}
			row := make([]byte, 4*cols)
			for i := range row {
				row[i] = a0[i] ^ a1[i]
			}
			if !replicated.TagRowCheck(row, list, cols, n, p/cols, qid) {
				t.Fatalf("n=%d p=%d: the recovered row fails its digest", n, p)
			}
			bad := bytes.Clone(row)
			bad[len(bad)-1] ^= 1 // a byte of the row, or of its padding
			if replicated.TagRowCheck(bad, list, cols, n, p/cols, qid) {
				t.Fatalf("n=%d p=%d: an altered row passes its digest", n, p)
			}
			got := binary.LittleEndian.Uint32(row[4*(p%cols):])
			want, _ := replicated.Tag(&key, p, uint64(vec[p]))
			if got != want || got != binary.LittleEndian.Uint32(tags[4*p:]) {
				t.Fatalf("n=%d p=%d: tag %d, want %d", n, p, got, want)
			}
		}
	}
}

// TestTagAnswerRefuses: a selection of the wrong size, or naming a row
// past the grid, and an answer buffer of the wrong size are refused.
func TestTagAnswerRefuses(t *testing.T) {
	tags := make([]byte, 4*1000)
	cols, rows := replicated.TagGrid(1000)
	sel := make([]byte, replicated.TagSelectBytes(rows))
	if err := replicated.TagAnswer(make([]byte, 4*cols), tags, cols, sel); err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{make([]byte, len(sel)+1), make([]byte, len(sel)-1)}
	if rows%8 != 0 {
		past := bytes.Clone(sel)
		past[len(past)-1] = 0x80
		bad = append(bad, past)
	}
	for _, s := range bad {
		if err := replicated.TagAnswer(make([]byte, 4*cols), tags, cols, s); err == nil {
			t.Fatalf("selection %x accepted", s)
		}
	}
	if err := replicated.TagAnswer(make([]byte, 4*cols+4), tags, cols, sel); err == nil {
		t.Fatal("an answer of the wrong size accepted")
	}
	if err := replicated.TagAnswer(make([]byte, 4*(cols+1)), tags, cols+1, sel); err == nil {
		t.Fatal("a grid of the wrong width accepted")
	}
	if _, _, err := replicated.TagSelect(rand.Reader, rows, rows); err == nil {
		t.Fatal("a row past the grid selected")
	}
}
