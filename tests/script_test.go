package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the CLI scripts in testdata/script (testscript, as
// filippo.io/age tests its CLI): each is a sequence of `idface` commands
// against the real binary with the output it must print, the errors of a
// new operator's first hour among them. A script's local cluster (in
// $WORK/c) is stopped when the script ends, whatever happened.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(idfaceBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("LONGID", strings.Repeat("x", 300)) // an id over the 256-byte limit
			work := env.WorkDir
			env.Defer(func() {
				if _, err := os.Stat(filepath.Join(work, "c", "cluster.json")); err == nil {
					exec.Command(idfaceBin, "cluster", "down", "--cluster", filepath.Join(work, "c")).Run()
				}
			})
			return nil
		},
	})
}
