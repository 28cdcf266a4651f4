package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
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
		icode, _, ierrs := idface(append([]string{"cluster", "init", "--cluster", t.TempDir(), "--parties", "2"}, bad...)...)
		if code != 1 || icode != 1 || errLine(errs) == "" || errLine(errs) != errLine(ierrs) {
			t.Fatalf("%v: assemble exit %d %q, init exit %d %q: want the same refusal", bad, code, errs, icode, ierrs)
		}
	}
	if p, err := config.LoadFile(out); err != nil || p.Serial() != 2 {
		t.Fatalf("a refused assembly replaced the configuration: %v", err)
	}
}

// statusOf runs 'cluster status' against an in-process cluster as member
// name, and fails unless it exits 0.
func statusOf(t *testing.T, c *inproc.Cluster, name string) string {
	t.Helper()
	out, code := statusExit(t, c, name, false)
	if code != 0 {
		t.Fatalf("status as %s: exit %d\n%s", name, code, out)
	}
	return out
}

// statusExit runs 'cluster status' as member name and returns its output
// and the exit code run would give.
func statusExit(t *testing.T, c *inproc.Cluster, name string, asJSON bool) (string, int) {
	t.Helper()
	var out bytes.Buffer
	m, _ := c.P.Client(name)
	err := clusterStatus(c.P, c.Client(name, ""), false, m.Role == config.RoleOperator, asJSON, &out)
	var ee *exitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), exitCode(err)
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
	st, code := statusExit(t, c, "client", false)
	t.Logf("with p3 down:\n%s", st)
	if code != exitUnreachable {
		t.Errorf("status with p3 down: exit %d, want %d", code, exitUnreachable)
	}
	for _, want := range []string{"p3 unreachable", "p3 is unreachable: identification is refused until every server answers"} {
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

// decodeOne decodes out as exactly one JSON object into v, refusing
// fields v does not have.
func decodeOne(t *testing.T, what, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		t.Fatalf("%s: want one JSON object (%v):\n%s", what, err, out)
	}
}

// decodeStatus decodes 'cluster status --json'.
func decodeStatus(t *testing.T, out string) statusReport {
	t.Helper()
	var r statusReport
	decodeOne(t, "status --json", out, &r)
	return r
}

// TestStatusJSONAndExit (issue 20, item 3): 'cluster status --json' is one
// object a script can read, and the exit status says what is wrong: 0 all
// well, 3 a server unreachable, 4 servers that answer but disagree (a
// restored party that misses an enrollment; a configuration the servers do
// not run).
func TestStatusJSONAndExit(t *testing.T) {
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeMPC, Dim: 64, Beta: 16, Timeout: config.Duration(2 * time.Second)}, 3))
	op := c.Client("client", "p1")
	if err := op.Enroll(inproc.Ctx(t, 10*time.Second), inproc.Items(inproc.Templates(5, 64, 1), "a")); err != nil {
		t.Fatal(err)
	}
	out, code := statusExit(t, c, "client", true)
	r := decodeStatus(t, out)
	hash := c.P.Hash()
	if code != 0 || r.Exit != 0 || !r.AllReachable || !r.SameConfig || r.Agreement != "agree" || r.Mode != "mpc" ||
		r.ConfigHash != fmt.Sprintf("%x", hash[:8]) || r.Trust != trustLine(config.ModeMPC) || len(r.Servers) != 3 {
		t.Fatalf("status of a healthy cluster: exit %d\n%s", code, out)
	}
	for _, s := range r.Servers {
		if !s.Reachable || s.Role != config.RoleShareHolder || !s.HoldsRows || s.Agrees == nil || !*s.Agrees ||
			s.Unsettled == nil || !s.ConfigMatches || len(s.Peers) != 2 || s.Peers[0].State != "agrees" || s.Addr != "mem:"+s.Name {
			t.Errorf("server %+v", s)
		}
	}
	out, code = statusExit(t, c, "device", true)
	if r := decodeStatus(t, out); code != 0 || r.Agreement != "unknown" || r.Servers[0].Agrees != nil || r.Servers[0].Unsettled != nil || r.Servers[0].Peers != nil {
		t.Errorf("device's status: exit %d\n%s", code, out)
	}

	// A configuration the servers do not run: exit 4.
	lit := c.P.Literal()
	lit.Serial++
	other, err := config.New(lit, c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = clusterStatus(other, op, false, true, true, &buf)
	if r := decodeStatus(t, buf.String()); exitCode(err) != exitDisagree || r.SameConfig || r.Servers[0].ConfigMatches || r.Exit != exitDisagree {
		t.Errorf("status against another configuration: %v\n%s", err, buf.String())
	}

	// p3 restored from a copy that misses an enrollment: exit 4, and
	// human output that says so.
	c.RestoreBehind("p3", func() {
		if err := op.Enroll(inproc.Ctx(t, 10*time.Second), inproc.Items(inproc.Templates(2, 64, 2), "b")); err != nil {
			t.Fatal(err)
		}
	})
	out, code = statusExit(t, c, "client", true)
	if r := decodeStatus(t, out); code != exitDisagree || r.Agreement != "disagree" || !r.AllReachable || r.Exit != exitDisagree {
		t.Errorf("status with p3 behind: exit %d\n%s", code, out)
	}
	out, code = statusExit(t, c, "client", false)
	if code != exitDisagree || !strings.Contains(out, "DISAGREE") || !strings.Contains(out, "p3 DIFFERS") {
		t.Errorf("human status with p3 behind: exit %d\n%s", code, out)
	}

	// p3 down: exit 3, whatever else.
	c.Stop("p3")
	out, code = statusExit(t, c, "client", true)
	r = decodeStatus(t, out)
	if code != exitUnreachable || r.Exit != exitUnreachable || r.AllReachable || r.Servers[2].Reachable || r.Servers[2].Error == "" || r.Servers[2].ConfigSerial != nil {
		t.Errorf("status with p3 down: exit %d\n%s", code, out)
	}
	// An unreachable server's row map is not compared: unknown, not a
	// disagreement (issue 38 item 3).
	if r.Agreement != "unknown" || r.Service != "down" {
		t.Errorf("status with p3 down: agreement %q, service %q; want unknown, down", r.Agreement, r.Service)
	}
}

// TestStatusAllDown (issue 38 item 3): with every server down, status said
// the servers DISAGREE while its JSON said "agree". Both now say that
// nothing answers (agreement unknown, service down, exit 3), and a local
// cluster's says nothing runs and how to start it.
func TestStatusAllDown(t *testing.T) {
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.ModeMPC, Dim: 64, Beta: 16, Timeout: config.Duration(2 * time.Second)}, 3))
	for _, p := range []string{"p1", "p2", "p3"} {
		c.Stop(p)
	}
	out, code := statusExit(t, c, "client", true)
	if r := decodeStatus(t, out); code != exitUnreachable || r.Agreement != "unknown" || r.Service != "down" || r.AllReachable {
		t.Errorf("JSON status with every server down: exit %d\n%s", code, out)
	}
	out, code = statusExit(t, c, "client", false)
	if code != exitUnreachable || strings.Contains(out, "DISAGREE") || !strings.Contains(out, "no server answers") {
		t.Errorf("status with every server down: exit %d\n%s", code, out)
	}
	var buf bytes.Buffer
	err := clusterStatus(c.P, c.Client("client", ""), true, true, false, &buf) // as a local cluster, none of whose processes runs
	if want := "nothing runs: no server of this cluster is running, so nothing answers; start them: idface cluster up --cluster " + c.P.Dir(); exitCode(err) != exitUnreachable || !strings.Contains(buf.String(), want) {
		t.Errorf("local status with nothing running: %v\n%s\nwant %q", err, buf.String(), want)
	}
}

// exitCode is the exit status run gives for a command's error.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// TestGroupHelp (issue 20, item 7): 'cluster', 'party' and 'client' list
// their subcommands, one line each, on --help (exit 0); without one, or
// with an unknown one, they list them as an error (exit 2) that names the
// subcommands there are.
func TestGroupHelp(t *testing.T) {
	for _, g := range []struct {
		name string
		subs []string
	}{
		{"cluster", []string{"init", "up", "down", "stop", "start", "status", "assemble", "recalibrate"}},
		{"party", []string{"init", "rotate"}},
		{"client", []string{"init"}},
	} {
		for _, help := range []string{"--help", "-h", "help"} {
			code, out, errs := idface(g.name, help)
			if code != 0 || errs != "" {
				t.Errorf("%s %s: exit %d, stderr %q", g.name, help, code, errs)
			}
			listed := 0
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(l, "  ") && slices.Contains(g.subs, f[0]) {
					listed++
				}
			}
			if listed != len(g.subs) {
				t.Errorf("%s %s lists %d of %v:\n%s", g.name, help, listed, g.subs, out)
			}
		}
		if code, _, errs := idface(g.name); code != 2 || !strings.Contains(errs, g.subs[0]) {
			t.Errorf("%s alone: exit %d\n%s", g.name, code, errs)
		}
		code, _, errs := idface(g.name, "frobnicate")
		if code != 2 || !strings.Contains(errs, `unknown subcommand "frobnicate"`) || !strings.Contains(errs, strings.Join(g.subs, ", ")) {
			t.Errorf("%s frobnicate: exit %d\n%s", g.name, code, errs)
		}
	}
}

// TestClusterFlagEverywhere (issue 20, item 7): the local cluster
// directory is --cluster for every command; --dir, its old name in the
// cluster commands, still works with a warning and is not in any help.
func TestClusterFlagEverywhere(t *testing.T) {
	for _, cmd := range [][]string{{"cluster", "init"}, {"cluster", "up"}, {"cluster", "down"}, {"cluster", "status"},
		{"cluster", "stop"}, {"cluster", "start"}, {"enroll"}, {"identify"}, {"delete"}, {"serve"}, {"fsck"}, {"count"}, {"ids"}, {"exists"}} {
		_, help := helpOf(t, "cluster", cmd...)
		if !strings.Contains(help, "cluster directory") {
			t.Errorf("%v --cluster: %q", cmd, help)
		}
		_, _, errs := idface(append(cmd, "--help")...)
		if strings.Contains(errs, "-dir") {
			t.Errorf("%v --help shows --dir:\n%s", cmd, errs)
		}
	}
	dir := filepath.Join(t.TempDir(), "c")
	code, _, errs := idface("cluster", "init", "--dir", dir, "--mode", "2pc", "--dim", "64", "--beta", "16")
	if code != 0 || !strings.Contains(errs, "--dir is deprecated: use --cluster") {
		t.Fatalf("init --dir: exit %d %q", code, errs)
	}
	if _, err := config.Load(dir); err != nil {
		t.Fatalf("init --dir made no cluster: %v", err)
	}
	if code, _, errs := idface("cluster", "up"); code != 2 || !strings.Contains(errs, "--cluster is required") {
		t.Errorf("up without a directory: exit %d %q", code, errs)
	}
}

// TestInitJSON: 'cluster init --json' is one object with the settings
// and every server.
func TestInitJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	code, out, errs := idface("cluster", "init", "--cluster", dir, "--mode", "he", "--dim", "64", "--beta", "16", "--metrics", "--json")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	var r initResult
	decodeOne(t, "init --json", out, &r)
	p, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cluster != dir || r.Mode != "he" || r.Dim != 64 || r.Beta != 16 || r.Alpha != p.Alpha() || r.Threshold != p.Threshold() || r.Parties != 1 || len(r.Servers) != 2 {
		t.Fatalf("init --json %+v", r)
	}
	for i, s := range p.Servers() {
		want := initServer{Name: s.Name, Role: []string{config.RoleLocalServer, config.RoleKeyServer}[i], Addr: s.Addr, Metrics: s.Metrics, Pin: s.Pin}
		if r.Servers[i] != want || s.Metrics == "" {
			t.Errorf("server %d: %+v, want %+v", i, r.Servers[i], want)
		}
	}
}

// TestSynthJSON: 'synth --json' is one object naming what it wrote.
func TestSynthJSON(t *testing.T) {
	dir := t.TempDir()
	out, ids := filepath.Join(dir, "x.npy"), filepath.Join(dir, "ids.txt")
	code, stdout, errs := idface("synth", "--people", "5", "--samples", "3", "--sample", "1", "--dim", "32", "--seed", "9", "--out", out, "--ids", ids, "--json")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	var r synthResult
	decodeOne(t, "synth --json", stdout, &r)
	want := synthResult{Templates: 5, Dim: 32, People: 5, Samples: 3, Seed: 9, Out: out, IDs: ids}
	if r != want {
		t.Fatalf("synth --json %+v, want %+v", r, want)
	}
	if b, err := os.ReadFile(ids); err != nil || strings.Count(string(b), "\n") != 5 {
		t.Fatalf("ids written: %q %v", b, err)
	}
}

// TestFsckJSONNoData: fsck --json of a server that never started is one
// object with the problem, and exit 1.
func TestFsckJSONNoData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	if code, _, errs := idface("cluster", "init", "--cluster", dir, "--mode", "mpc", "--parties", "3", "--dim", "64", "--beta", "16"); code != 0 {
		t.Fatal(errs)
	}
	code, out, _ := idface("fsck", "--cluster", dir, "--party", "p3", "--json")
	var r fsckResult
	decodeOne(t, "fsck --json", out, &r)
	if code != 1 || r.Server != "p3" || r.Mode != "mpc" || r.Intact || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "no log") || r.Error != "" {
		t.Fatalf("fsck --json: exit %d %+v", code, r)
	}
	// --repair and --adopt write, but never make a data directory that is
	// not there: a mistyped --data is said, not created.
	for _, flag := range []string{"--repair", "--adopt"} {
		code, _, errs := idface("fsck", "--cluster", dir, "--party", "p3", flag)
		if code == 0 || !strings.Contains(errs, "no data directory") {
			t.Fatalf("fsck %s without data: exit %d: %s", flag, code, errs)
		}
		if _, err := os.Stat(r.Data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("fsck %s made %s: %v", flag, r.Data, err)
		}
	}
}

// TestClusterShowAndMetrics: 'party init --metrics-addr' puts a loopback
// metrics address in the descriptor and 'cluster assemble' carries it into
// cluster.json; a public one is refused. 'cluster show' prints every
// member's role, address, metrics address and pin, equal to the pins the
// members printed, for the config, a descriptor and a home (and --json).
func TestClusterShowAndMetrics(t *testing.T) {
	root := t.TempDir()
	if code, _, errs := idface("party", "init", "--home", filepath.Join(root, "bad"), "--name", "bad", "--role", config.RoleShareHolder, "--listen", "127.0.0.1:1", "--metrics-addr", "0.0.0.0:9464"); code == 0 || !strings.Contains(errs, "loopback") {
		t.Fatalf("a public metrics address: exit %d: %s", code, errs)
	}
	pins := map[string]string{}
	var pubs []string
	for _, m := range []struct{ name, role, metrics string }{{"h1", config.RoleShareHolder, "127.0.0.1:9464"}, {"h2", config.RoleShareHolder, ""}, {"k", config.RoleDecider, ""}} {
		h := filepath.Join(root, m.name)
		args := []string{"party", "init", "--home", h, "--name", m.name, "--role", m.role, "--listen", "127.0.0.1:1"}
		if m.metrics != "" {
			args = append(args, "--metrics-addr", m.metrics)
		}
		code, out, errs := idface(args...)
		if code != 0 {
			t.Fatalf("party init %s: %s", m.name, errs)
		}
		_, pin, _ := strings.Cut(out, "pin ")
		pins[m.name] = strings.Fields(pin)[0]
		pubs = append(pubs, filepath.Join(h, m.name+".pub.json"))
	}
	out := filepath.Join(root, "cluster.json")
	if code, _, errs := idface(append([]string{"cluster", "assemble", "--out", out, "--mode", "blind"}, pubs...)...); code != 0 {
		t.Fatalf("assemble: %s", errs)
	}
	cfg, err := config.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := cfg.Server("h1"); m.Metrics != "127.0.0.1:9464" {
		t.Fatalf("h1's metrics address in cluster.json: %q", m.Metrics)
	}
	code, shown, errs := idface("cluster", "show", out)
	if code != 0 {
		t.Fatalf("cluster show: %s", errs)
	}
	for name, pin := range pins {
		if !strings.Contains(shown, pin) || !strings.Contains(shown, name) {
			t.Fatalf("cluster show lacks %s's pin %s:\n%s", name, pin, shown)
		}
	}
	if !strings.Contains(shown, "127.0.0.1:9464") || !strings.Contains(shown, config.RoleDecider) {
		t.Fatalf("cluster show:\n%s", shown)
	}
	code, js, errs := idface("cluster", "show", "--json", out, pubs[1], filepath.Join(root, "k"))
	if code != 0 {
		t.Fatalf("cluster show --json: %s", errs)
	}
	dec := json.NewDecoder(strings.NewReader(js))
	for i, want := range []string{"config", "descriptor", "descriptor"} {
		var s struct {
			Kind    string
			Members []struct{ Name, Role, Pin string }
		}
		if err := dec.Decode(&s); err != nil || s.Kind != want {
			t.Fatalf("object %d: %v %+v", i, err, s)
		}
		for _, m := range s.Members {
			if pins[m.Name] != "" && pins[m.Name] != m.Pin {
				t.Fatalf("object %d: %s's pin %s, it printed %s", i, m.Name, m.Pin, pins[m.Name])
			}
		}
	}
	if code, _, _ := idface("cluster", "show", filepath.Join(root, "nothing")); code == 0 {
		t.Fatal("cluster show of a missing file")
	}
}
