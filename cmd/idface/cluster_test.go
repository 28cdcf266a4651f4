package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/inproc"
)

// idface runs the CLI in process: exit code, stdout, stderr.
func idface(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// helpOf returns a command's synopsis (the text before "Flags:") and the
// help line of one of its flags.
func helpOf(t *testing.T, flagName string, args ...string) (synopsis, flagHelp string) {
	t.Helper()
	code, _, errs := idface(append(args, "--help")...)
	if code != 0 {
		t.Fatalf("%s --help: exit %d\n%s", strings.Join(args, " "), code, errs)
	}
	synopsis, flags, ok := strings.Cut(errs, "\nFlags:\n")
	if !ok {
		t.Fatalf("%s --help: no flags\n%s", strings.Join(args, " "), errs)
	}
	lines := strings.Split(flags, "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "-"+flagName && i+1 < len(lines) {
			return synopsis, strings.TrimSpace(lines[i+1])
		}
	}
	t.Fatalf("%s --help: no --%s\n%s", strings.Join(args, " "), flagName, errs)
	return "", ""
}

func mentions(text, word string) bool {
	return regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(word) + `($|[^a-z0-9-])`).MatchString(text)
}

// TestHelpListsEveryMode: every --mode flag's help and its command's
// synopsis name every mode of config.Modes, and 'party init' names every
// server role, so a mode or role added later shows up in the help.
func TestHelpListsEveryMode(t *testing.T) {
	for _, cmd := range [][]string{{"cluster", "init"}, {"cluster", "assemble"}, {"demo"}, {"bench"}} {
		syn, help := helpOf(t, "mode", cmd...)
		for _, m := range config.Modes() {
			if !mentions(help, string(m)) || !mentions(syn, string(m)) {
				t.Errorf("idface %s: mode %s missing from the synopsis or from --mode %q", strings.Join(cmd, " "), m, help)
			}
		}
	}
	syn, help := helpOf(t, "role", "party", "init")
	for _, r := range []string{config.RoleShareHolder, config.RoleLocalServer, config.RoleKeyServer, config.RoleDecider} {
		if !config.ServerRole(r) {
			t.Fatalf("%s is not a server role", r)
		}
		if !mentions(help, r) || !mentions(syn, r) {
			t.Errorf("idface party init: role %s missing from the synopsis or from --role %q", r, help)
		}
	}
	// The error for a wrong role lists them too.
	code, _, errs := idface("party", "init", "--home", t.TempDir(), "--name", "x", "--role", "judge", "--listen", "127.0.0.1:1")
	if code == 0 || !mentions(errs, config.RoleDecider) {
		t.Errorf("party init --role judge: exit %d, %s", code, errs)
	}
}

// TestAssembleLevels: 'cluster assemble' takes blind mode's --gallery-levels
// and --query-levels like 'cluster init --mode blind', through the same
// checks (config.Assemble): the same errors for bad levels and for levels
// outside mode blind.
func TestAssembleLevels(t *testing.T) {
	root := t.TempDir()
	var pubs []string
	for _, m := range []struct{ name, role string }{{"h1", config.RoleShareHolder}, {"h2", config.RoleShareHolder}, {"k", config.RoleDecider}} {
		h := filepath.Join(root, m.name)
		if code, _, errs := idface("party", "init", "--home", h, "--name", m.name, "--role", m.role, "--listen", "127.0.0.1:1"); code != 0 {
			t.Fatalf("party init %s: %s", m.name, errs)
		}
		pubs = append(pubs, filepath.Join(h, m.name+".pub.json"))
	}
	h := filepath.Join(root, "ops")
	if code, _, errs := idface("client", "init", "--home", h, "--name", "ops", "--role", "operator"); code != 0 {
		t.Fatal(errs)
	}
	pubs = append(pubs, filepath.Join(h, "ops.pub.json"))

	out := filepath.Join(root, "cluster.json")
	assembleTo := func(out string, flags ...string) (int, string) {
		code, _, errs := idface(append(append([]string{"cluster", "assemble", "--out", out}, flags...), pubs...)...)
		return code, errs
	}
	assemble := func(flags ...string) (int, string) { return assembleTo(out, flags...) }
	lv := struct{ gallery, query string }{"4:2,6,19,58", "1:16"}
	// A new version (serial 2) carries the levels over when they are left out.
	for serial, flags := range [][]string{{"--gallery-levels", lv.gallery, "--query-levels", lv.query}, {"--tau", "0.25"}} {
		if code, errs := assemble(append([]string{"--mode", "blind", "--dim", "128"}, flags...)...); code != 0 {
			t.Fatalf("assemble %v: exit %d\n%s", flags, code, errs)
		}
		p, err := config.LoadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		g, q := p.GalleryLevels(), p.QueryLevels()
		if g.String() != lv.gallery || q.String() != lv.query || p.Alpha() != g.Support() || p.Beta() != q.Support() || p.Serial() != serial+1 {
			t.Fatalf("assembled gallery %s query %s (alpha %d, beta %d, serial %d), want %s and %s",
				g, q, p.Alpha(), p.Beta(), p.Serial(), lv.gallery, lv.query)
		}
		if p.DeciderName() != "k" || p.Mu() != 2 {
			t.Fatalf("decider %q, mu %d", p.DeciderName(), p.Mu())
		}
	}

	if p, _ := config.LoadFile(out); p.Tau() != 0.25 {
		t.Fatalf("--tau 0.25 not taken: %v", p.Tau())
	}
	// Other levels for the same cluster would change the servers' data:
	// refused, the configuration untouched.
	if code, errs := assemble("--mode", "blind", "--dim", "128", "--gallery-levels", "2:21,64"); code == 0 || !strings.Contains(errs, "differs") {
		t.Fatalf("assemble with other levels: exit %d %q", code, errs)
	}

	// Refusals of bad settings: the same as cluster init's, since both go
	// through config.Assemble.
	errLine := func(errs string) string {
		_, msg, _ := strings.Cut(strings.TrimSpace(errs), ": ")
		return msg
	}
	for _, bad := range [][]string{
		{"--mode", "blind", "--dim", "128", "--gallery-levels", "2:100,100"}, // support above d
		{"--mode", "blind", "--dim", "128", "--query-levels", "1"},           // not L:a1,...
		{"--mode", "2pc", "--dim", "128", "--gallery-levels", "1:85"},        // levels outside mode blind
	} {
		code, errs := assembleTo(filepath.Join(t.TempDir(), "cluster.json"), bad...)
		icode, _, ierrs := idface(append([]string{"cluster", "init", "--dir", t.TempDir(), "--parties", "2"}, bad...)...)
		if code != 1 || icode != 1 || errLine(errs) == "" || errLine(errs) != errLine(ierrs) {
			t.Fatalf("%v: assemble exit %d %q, init exit %d %q: want the same refusal", bad, code, errs, icode, ierrs)
		}
	}
	if p, err := config.LoadFile(out); err != nil || p.Serial() != 2 {
		t.Fatalf("a refused assembly replaced the configuration: %v", err)
	}
}

// statusOf runs 'cluster status' against an in-process cluster as member
// name.
func statusOf(t *testing.T, c *inproc.Cluster, name string) string {
	t.Helper()
	var out bytes.Buffer
	m, _ := c.P.Client(name)
	if err := clusterStatus(c.P, c.Client(name, ""), false, m.Role == config.RoleOperator, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestStatusWithoutRowMaps (review 17, item 6): 'cluster status' showed
// every server's row counts and digest, which clients no longer get. It
// now shows, for an operator, each server's own comparison with its
// peers; for a device, liveness and configurations only.
func TestStatusWithoutRowMaps(t *testing.T) {
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeMPC, Dim: 64, Beta: 16, Timeout: config.Duration(2 * time.Second)}, 3))
	if err := c.Client("client", "").Enroll(inproc.Ctx(t, 10*time.Second), inproc.Items(inproc.Templates(12, 64, 1), "a")); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, c, "client")
	for _, want := range []string{"agrees with p2, p3", "agrees with p1, p3", "agrees with p1, p2", "all servers agree"} {
		if !strings.Contains(st, want) {
			t.Errorf("operator's status lacks %q:\n%s", want, st)
		}
	}
	header := strings.Fields(strings.SplitN(st, "\n", 2)[0])
	if strings.Join(header, " ") != "server addr pid unsettled config row map" {
		t.Errorf("status columns %q", header)
	}
	for _, line := range strings.Split(st, "\n") {
		for _, f := range strings.Fields(line) {
			if f == "12" { // the rows enrolled
				t.Errorf("status shows a row count: %q", line)
			}
		}
	}
	dev := statusOf(t, c, "device")
	if !strings.Contains(dev, "(operators only)") || strings.Contains(dev, "agrees") || strings.Contains(dev, "all servers agree") {
		t.Errorf("device's status:\n%s", dev)
	}
	c.Stop("p3")
	st = statusOf(t, c, "client")
	t.Logf("with p3 down:\n%s", st)
	for _, want := range []string{"p3 unreachable", "DISAGREE or are unreachable"} {
		if !strings.Contains(st, want) {
			t.Errorf("status with p3 down lacks %q:\n%s", want, st)
		}
	}
}

// TestStatusStatesTrust (review 17, item 4): the share-holding modes
// protect templates against servers that follow the protocol only; one
// that deviates can change answers (a blind entry can even learn the exact
// scores of rows it chooses). 'cluster status' says so for every mode, to
// operators and devices alike, and for mode he names its own assumption.
func TestStatusStatesTrust(t *testing.T) {
	for _, c := range []struct {
		mode config.Mode
		mu   int
		want []string
	}{
		{config.Mode2PC, 2, []string{"semi-honest: one deviating share holder can change answers"}},
		{config.ModeMPC, 3, []string{"semi-honest: one deviating share holder can change answers"}},
		{config.ModeBlind, 2, []string{"semi-honest: one deviating share holder can change answers", "learn the exact scores of rows it chooses"}},
		{config.ModeHE, 1, []string{"the key server and the local servers must not collude", "a deviating server can change answers"}},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			cl := inproc.Start(t, inproc.Literal(config.Literal{Mode: c.mode, Dim: 64, Beta: 16, Timeout: config.Duration(5 * time.Second)}, c.mu))
			for _, who := range []string{"client", "device"} {
				st := statusOf(t, cl, who)
				for _, w := range c.want {
					if !strings.Contains(st, w) {
						t.Errorf("%s's status does not say %q:\n%s", who, w, st)
					}
				}
			}
		})
	}
}
