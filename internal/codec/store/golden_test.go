package store

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/idface/idface/harness/golden"
)

// TestFileGolden pins the log's file and record framing.
func TestFileGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.log")
	l, _, err := Open(path, bnd(KindHERows), func(Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	l.Append(Record{Type: 1, Sealed: []byte("sealed")}, Record{Type: 2, Sealed: []byte{0}, Tail: []byte{1, 2, 3, 4}})
	l.Close()
	b, _ := os.ReadFile(path)
	golden.Check(t, "log.hex", "TestFileGolden: a log of kind 2 with two records", hex.EncodeToString(b)+"\n")
}
