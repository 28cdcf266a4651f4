package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/idface/idface/internal/codec/buildinfo"
)

func init() {
	register("version", "print the version, commit and Go version this binary was built from", cmdVersion)
}

func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "idface version [--json]\n\n"+
		"Prints the module version, the commit it was built from (its time, and\n"+
		"whether the work tree was modified) and the Go version; every server's\n"+
		"/metrics has the same as idface_build_info{version,revision,goversion}.\n"+
		"With --json one object: module, version, revision, time, modified,\n"+
		"go_version.\n\n"+
		"The go command records the commit when it builds in a git work tree\n"+
		"(not with -buildvcs=false, nor from a tree without .git: a tarball, a\n"+
		"Docker context that leaves .git out). There, give it at build time:\n"+
		"  go build -ldflags \"-X github.com/idface/idface/internal/codec/buildinfo.revision=$(git rev-parse HEAD)\" ./cmd/idface\n"+
		"(and ...buildinfo.version=TAG); without either the version says that no\n"+
		"commit was recorded.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	in := buildinfo.Read()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(in)
	}
	fmt.Fprintf(stdout, "idface %s\n", in)
	return nil
}
