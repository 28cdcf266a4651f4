package buildinfo

import (
	"strings"
	"testing"
)

// TestWithoutVCS (issue 38 item 5): a build without VCS information says
// so and how to record the commit, instead of a bare "devel"; a commit
// given with -ldflags -X stands in for the stamp.
func TestWithoutVCS(t *testing.T) {
	in := Info{Version: "devel", GoVersion: "go1.26"}
	if s := in.String(); !strings.Contains(s, "no commit recorded") || !strings.Contains(s, "idface version --help") {
		t.Errorf("without a revision: %q", s)
	}
	in.Revision = "abc"
	if s := in.String(); s != "devel (abc), built with go1.26" {
		t.Errorf("with a revision: %q", s)
	}
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v9.9.9", "0123abcd"
	if in := Read(); in.Revision == "" || in.Version == "devel" {
		t.Errorf("with -ldflags -X: %+v", in)
	}
}
