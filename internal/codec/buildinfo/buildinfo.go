// Package buildinfo says what the running binary was built from, for
// 'idface version' and every server's idface_build_info metric: the same
// values in both, so that a scrape can be matched to a binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is the build of the running binary.
type Info struct {
	Module string `json:"module"`
	// Version is the main module's version: a tag or pseudo-version that
	// the go command stamps from the repository, or "devel" when it could
	// not (debug.BuildInfo's "(devel)", without the parentheses so that it
	// can be a metric label).
	Version string `json:"version"`
	// Revision, Time and Modified are the repository's commit, its time
	// and whether the work tree had changes; empty when built without VCS
	// information (-buildvcs=false, or outside a repository).
	Revision  string `json:"revision"`
	Time      string `json:"time"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
}

// version and revision, set with -ldflags '-X
// github.com/idface/idface/internal/codec/buildinfo.revision=COMMIT' (and
// .version=TAG), stand in for what the go command stamps when it cannot:
// a build without VCS information (-buildvcs=false, a source tree without
// .git such as a Docker build context or a tarball).
var version, revision string

// Read returns the running binary's build.
func Read() (in Info) {
	in = Info{Version: "devel", GoVersion: runtime.Version()}
	defer func() {
		if in.Version == "devel" && version != "" {
			in.Version = version
		}
		if in.Revision == "" {
			in.Revision = revision
		}
	}()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.Module = bi.Main.Path
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		in.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one-line form: module version (revision, time, modified)
// and Go version.
func (in Info) String() string {
	var b strings.Builder
	b.WriteString(in.Version)
	if in.Revision != "" {
		b.WriteString(" (" + in.Revision)
		if in.Time != "" {
			b.WriteString(", " + in.Time)
		}
		if in.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	} else {
		// A binary that cannot say what it was built from says why, and how
		// to build one that can.
		b.WriteString(" (no commit recorded: built with -buildvcs=false or outside a git work tree; see idface version --help)")
	}
	b.WriteString(", built with " + in.GoVersion)
	return b.String()
}
