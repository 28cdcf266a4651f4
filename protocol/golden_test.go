package protocol

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden pins the encoding of every message type: testdata/<Type>.hex
// holds the bytes of the samples of that type (one hex line each), written
// by `go test ./protocol -run Golden -update`. A change of encoding changes
// a golden file, on purpose and visibly in review; a wire change that is
// not meant must fail here.
func TestGolden(t *testing.T) {
	byType := map[Type][]string{}
	for _, m := range samples() {
		byType[m.Type()] = append(byType[m.Type()], hex.EncodeToString(Marshal(m)))
	}
	for _, typ := range Types() {
		lines := byType[typ]
		if len(lines) == 0 {
			t.Errorf("no sample of %v: add one to samples()", typ)
			continue
		}
		path := filepath.Join("testdata", fmt.Sprintf("%02d-%v.hex", uint8(typ), typ))
		want := "# " + typ.String() + ": produced by TestGolden from samples() (go test ./protocol -run Golden -update)\n" + strings.Join(lines, "\n") + "\n"
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if string(got) != want {
			t.Errorf("%s: the encoding of %v changed; if that is intended, raise protocol.Version when old peers can no longer read it, and run with -update", path, typ)
		}
		// The golden bytes decode and re-encode to themselves.
		for _, line := range strings.Split(strings.TrimSpace(string(got)), "\n")[1:] {
			b, err := hex.DecodeString(line)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(b)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if hex.EncodeToString(Marshal(m)) != line {
				t.Fatalf("%s: not canonical", path)
			}
		}
	}
}
