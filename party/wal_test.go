package party

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/idface/idface/protocol"
)

func TestWALReplayAndTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shares.wal")
	w, cut, err := openWAL(path, func([]byte) error { t.Fatal("empty log replayed"); return nil })
	if err != nil || cut != 0 {
		t.Fatal(err, cut)
	}
	recs := [][]byte{
		protocol.Marshal(&protocol.Prepare{Txn: protocol.TxnID{1}, Dim: 64, Ops: []protocol.Op{{Kind: protocol.OpPut, ID: "a", Plus: []uint64{5}, Minus: []uint64{6}}}}),
		protocol.Marshal(&protocol.Decide{Txn: protocol.TxnID{1}, Commit: true}),
	}
	if err := w.append(recs...); err != nil {
		t.Fatal(err)
	}
	w.close()
	good, _ := os.Stat(path)

	for name, tail := range map[string][]byte{
		"torn header":  {0, 0},
		"torn payload": {0, 0, 0, 50, 1, 2, 3, 4, 9, 9},
		"bad checksum": {0, 0, 0, 2, 0, 0, 0, 0, 1, 2},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.Write(tail)
			f.Close()
			var got [][]byte
			w, cut, err := openWAL(path, func(b []byte) error { got = append(got, slices.Clone(b)); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if cut != int64(len(tail)) || len(got) != 2 || !slices.Equal(got[0], recs[0]) || !slices.Equal(got[1], recs[1]) {
				t.Fatalf("cut %d, replayed %d records", cut, len(got))
			}
			// Appends after a cut continue a valid log.
			if err := w.append(recs[1]); err != nil {
				t.Fatal(err)
			}
			w.close()
			n := 0
			w, _, _ = openWAL(path, func([]byte) error { n++; return nil })
			w.close()
			if n != 3 {
				t.Fatalf("%d records after append, want 3", n)
			}
			os.Truncate(path, good.Size())
		})
	}
}

func TestValidateRefusesDivergence(t *testing.T) {
	st, _ := newState(64, 2)
	put := func(seq uint32, id string) protocol.Op {
		return protocol.Op{Kind: protocol.OpPut, Seq: seq, ID: id, Plus: []uint64{1}, Minus: []uint64{2}}
	}
	p := &protocol.Prepare{Txn: protocol.TxnID{1}, Origin: 1, Dim: 64, Base: 0, Ops: []protocol.Op{put(0, "a"), put(1, "b")}}
	if e := st.validate(p); e != nil {
		t.Fatal(e)
	}
	if err := st.apply(p); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		p    *protocol.Prepare
		code protocol.Code
	}{
		"stale base":   {&protocol.Prepare{Origin: 1, Dim: 64, Base: 1, Ops: []protocol.Op{put(1, "c")}}, protocol.CodeInconsistent},
		"gap":          {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(3, "c")}}, protocol.CodeInconsistent},
		"duplicate":    {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{put(2, "a")}}, protocol.CodeDuplicate},
		"wrong delete": {&protocol.Prepare{Origin: 0, Dim: 64, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 0, ID: "a"}}}, protocol.CodeUnknownID},
		"dimension":    {&protocol.Prepare{Origin: 1, Dim: 65, Base: 2}, protocol.CodeBadRequest},
		"origin":       {&protocol.Prepare{Origin: 7, Dim: 64}, protocol.CodeBadRequest},
		"bad share":    {&protocol.Prepare{Origin: 1, Dim: 64, Base: 2, Ops: []protocol.Op{{Kind: protocol.OpPut, Seq: 2, ID: "c", Plus: []uint64{1, 2}}}}, protocol.CodeBadRequest},
	} {
		if e := st.validate(c.p); e == nil || e.Code != c.code {
			t.Errorf("%s: got %v, want code %v", name, e, c.code)
		}
	}
	g1 := st.digest()
	st.apply(&protocol.Prepare{Origin: 1, Dim: 64, Ops: []protocol.Op{{Kind: protocol.OpDelete, Seq: 0, ID: "a"}}})
	if g2 := st.digest(); g1.Equal(g2) || g2[1].Live != 1 || g2[1].Rows != 2 {
		t.Fatalf("delete did not change the digest: %v -> %v", g1, g2)
	}
}
