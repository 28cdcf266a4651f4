package protocol

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/harness/golden"
)

// TestGolden pins the encoding of every message type: testdata/NN-Type.hex
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
		name := fmt.Sprintf("%02d-%v.hex", uint8(typ), typ)
		golden.Check(t, name, "TestGolden from samples() of type "+typ.String(), strings.Join(lines, "\n")+"\n")
		// The golden bytes decode and re-encode to themselves.
		got, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(got)), "\n")[1:] {
			b, err := hex.DecodeString(line)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if hex.EncodeToString(Marshal(m)) != line {
				t.Fatalf("%s: not canonical", name)
			}
		}
	}
}
