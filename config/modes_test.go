package config

import (
	"strings"
	"testing"
)

// TestModeListIsWellFormed: the declarations are consistent, as the old
// registration's panics made them: one name each, roles and party counts
// in range, a scheme list only with a key server, the log's bound only
// with levels (it needs the ring).
func TestModeListIsWellFormed(t *testing.T) {
	seen := map[Mode]bool{}
	for _, s := range modeList {
		switch {
		case s.Name == "" || strings.ContainsAny(string(s.Name), " \t\n") || seen[s.Name]:
			t.Errorf("mode name %q: empty, with blanks or declared twice", s.Name)
		case s.PartyRole != RoleShareHolder && s.PartyRole != RoleLocalServer:
			t.Errorf("mode %s: party role %q", s.Name, s.PartyRole)
		case s.Helper != "" && s.Helper != RoleKeyServer && s.Helper != RoleDecider:
			t.Errorf("mode %s: helper role %q", s.Name, s.Helper)
		case s.MinParties < 1 || s.MaxParties > MaxParties || s.MinParties > s.MaxParties ||
			s.DefaultParties < s.MinParties || s.DefaultParties > s.MaxParties:
			t.Errorf("mode %s: parties %d..%d, default %d", s.Name, s.MinParties, s.MaxParties, s.DefaultParties)
		case (len(s.Schemes) > 0) != (s.Helper == RoleKeyServer) || (s.EnrollGroups > 0) != (len(s.Schemes) > 0):
			t.Errorf("mode %s: schemes %v, enroll groups %d, helper %q", s.Name, s.Schemes, s.EnrollGroups, s.Helper)
		case (s.LogShares > 0 || s.LogExtra > 0) && !s.Levels, (s.Sealed || s.HideProbes) && !s.Levels:
			t.Errorf("mode %s: shares over a ring (log bound, sealed shares, hidden probes) without levels", s.Name)
		case s.Summary == "" || s.Trust == "":
			t.Errorf("mode %s: no summary or trust line", s.Name)
		}
		seen[s.Name] = true
	}
}
