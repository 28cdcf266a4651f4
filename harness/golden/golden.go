// Package golden compares encodings with known-answer files in testdata/:
// a change of an encoding must change a golden file, on purpose and
// visibly in review. Run the tests with -update to rewrite them.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Check compares text with testdata/name (or rewrites it with -update).
// The first line of the file says how it was produced.
func Check(t *testing.T, name, producedBy, text string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	want := "# produced by " + producedBy + " (go test -run " + t.Name() + " -update)\n" + text
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != want {
		t.Errorf("%s changed: if the new encoding is intended, raise its format version when old data can no longer be read, and run with -update", path)
	}
}
