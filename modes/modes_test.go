package modes_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes"
)

// TestEveryModeConforms runs the same life of a cluster in every
// registered mode, in process over memnet with the real engines and logs:
// enroll, identify a genuine and a stranger's probe, delete, restart every
// server from its log, identify again, and fsck every stopped server. A
// mode added to the registry gets this test without writing it.
func TestEveryModeConforms(t *testing.T) {
	if len(config.Modes()) < 4 {
		t.Fatalf("registered modes %v: want at least 2pc, mpc, he and blind", config.Modes())
	}
	for _, m := range config.Modes() {
		t.Run(string(m), func(t *testing.T) {
			spec, err := config.Spec(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := modes.Lookup(m); err != nil {
				t.Fatal(err)
			}
			const dim = 64
			tau := 0.5 // a random probe passes no row; an enrolled template passes its own
			c := inproc.Start(t, inproc.Literal(config.Literal{Mode: m, Dim: dim, Beta: 16, Tau: &tau,
				Timeout: config.Duration(15 * time.Second)}, spec.DefaultParties))
			ctx := inproc.Ctx(t, 2*time.Minute)
			xs := inproc.Templates(12, dim, 7)
			cl := c.Client("client", "")
			if err := cl.Enroll(ctx, inproc.Items(xs, "person")); err != nil {
				t.Fatal(err)
			}
			identify := func(x []float32, want string) {
				t.Helper()
				r, err := c.Client("device", "").Identify(ctx, x, 1)
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				if r.Accepted && len(r.Candidates) > 0 {
					got = r.Candidates[0].ID
				}
				if got != want {
					t.Fatalf("identify: got %q (accepted %v), want %q", got, r.Accepted, want)
				}
			}
			identify(xs[3], "person-3")
			identify(inproc.Templates(1, dim, 99)[0], "")
			if err := cl.Delete(ctx, "person-3"); err != nil {
				t.Fatal(err)
			}
			identify(xs[3], "")
			c.WaitSettled()
			c.StopAll()
			for _, s := range c.P.Servers() { // helpers first: local servers fetch the key server's key
				if err := c.TryRestart(s.Name); err != nil {
					t.Fatal(err)
				}
			}
			c.WaitSettled()
			identify(xs[5], "person-5")
			identify(xs[3], "")
			c.StopAll()
			for _, s := range c.P.Servers() {
				srv, err := modes.ServerOf(c.P, s.Name)
				if err != nil {
					t.Fatal(err)
				}
				if srv.Role == "" || srv.Open == nil {
					t.Fatalf("%s: role %q, open %v", s.Name, srv.Role, srv.Open != nil)
				}
				if srv.Fsck == nil {
					continue
				}
				env := engine.Env{Params: c.P, Self: s.Name, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(error) {}}
				var out bytes.Buffer
				problems, err := srv.Fsck(env, c.DataDir(s.Name), engine.FsckOptions{}, &out)
				if err != nil || len(problems) > 0 {
					t.Fatalf("fsck of %s (%s): %v %v\n%s", s.Name, srv.Role, err, problems, out.String())
				}
			}
		})
	}
}

// TestUnknownModeRefusedEverywhere: a mode that is not registered is an
// error in configuration and in every lookup, never a fallback to another
// mode's engine.
func TestUnknownModeRefusedEverywhere(t *testing.T) {
	lit := inproc.Literal(config.Literal{Mode: "quantum"}, 2)
	if _, err := config.New(lit, t.TempDir()); err == nil {
		t.Fatal("config accepted mode quantum")
	} else if want := "want one of"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("config: %v, want it to list the modes", err)
	}
	if _, err := config.ParseMode("quantum"); err == nil {
		t.Fatal("ParseMode accepted quantum")
	}
	if _, err := modes.Lookup("quantum"); err == nil {
		t.Fatal("LookupMode found quantum")
	}
}

// TestRegistrationsAreComplete: every registered mode declares what the
// programs look up, and its summary and trust line for help and status.
func TestRegistrationsAreComplete(t *testing.T) {
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		md, err := modes.Lookup(m)
		if err != nil {
			t.Fatal(err)
		}
		if s.Summary == "" || s.Trust == "" || md.Server == nil || md.IdentifyFormula == nil || md.Storage == nil {
			t.Errorf("mode %s: an incomplete registration", m)
		}
	}
}

// TestMembersAndRoles: the servers a layout names (cluster init, inproc,
// wan) are the configuration's, in its order, each with the role
// Params.Role gives it (status, deploy labels).
func TestMembersAndRoles(t *testing.T) {
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		p, err := config.New(inproc.Literal(config.Literal{Mode: m}, s.DefaultParties), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		slots, servers := s.Members(s.DefaultParties), p.Servers()
		if len(slots) != len(servers) {
			t.Fatalf("mode %s: layout %v, servers %v", m, slots, servers)
		}
		for i, slot := range slots {
			if servers[i].Name != slot.Name || p.Role(slot.Name) != slot.Role || !config.ServerRole(slot.Role) {
				t.Errorf("mode %s: server %d is %s (role %q), the layout's %v", m, i, servers[i].Name, p.Role(servers[i].Name), slot)
			}
		}
		if p.Role("device") != config.RoleDevice || p.Role("client") != config.RoleOperator || p.Role("nobody") != "" || p.Role("") != "" {
			t.Errorf("mode %s: clients' roles %q %q, a stranger's %q %q", m, p.Role("device"), p.Role("client"), p.Role("nobody"), p.Role(""))
		}
	}
}

// TestNoModeNameCompared: outside modes/ and the mode packages (those
// modes.go imports), no program file compares a mode's name, as a
// literal ("blind") or as a mode's constant (config.ModeBlind): it asks
// the registry what the mode can do (engine.Mode, config.ModeSpec), so a
// new mode touches modes.go and nothing else.
func TestNoModeNameCompared(t *testing.T) {
	const module = "github.com/idface/idface/"
	f, err := parser.ParseFile(token.NewFileSet(), "modes.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{"modes": true} // directories, from the module's root
	for _, imp := range f.Imports {
		// The mode packages: what modes.go imports under modes/.
		if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, module+"modes/") {
			own[strings.TrimPrefix(p, module)] = true
		}
	}
	if len(own) < 5 {
		t.Fatalf("mode packages %v: modes.go imports fewer than four", own)
	}
	names := map[string]bool{}
	for _, m := range config.Modes() {
		names[string(m)] = true
	}
	var files []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, ".."+string(filepath.Separator)))
		if d.IsDir() && path != ".." && (own[rel] || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found %d program files under ..: is the test running in modes/?", len(files))
	}
	// The constants that name modes: config's, the mode packages' and any
	// other package's (a constant declared beside its comparison).
	consts := modeConsts(t, names, append(append(glob(t, "../config/*.go"), modePackageFiles(t, own)...), files...))
	for _, path := range files {
		for _, at := range modeComparisons(t, path, nil, names, consts) {
			t.Errorf("%s: compares a mode name: ask the mode's declaration for its capability instead (config.ModeSpec, engine.Mode, device.Part), or add one there", at)
		}
	}
	// The check finds what it looks for.
	const sample = `package p
func f(m, s string) bool {
	switch s {
	case "mpc":
	}
	return m == "blind" || config.ModeHE != config.Mode(s)
}`
	if got := modeComparisons(t, "sample.go", sample, names, map[string]bool{"config.ModeHE": true}); len(got) != 3 {
		t.Fatalf("the sample's comparisons: %v, want 3", got)
	}
}

func glob(t *testing.T, pattern string) []string {
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// modePackageFiles lists the mode packages' program files.
func modePackageFiles(t *testing.T, own map[string]bool) []string {
	var files []string
	for dir := range own {
		files = append(files, glob(t, filepath.Join("..", dir, "*.go"))...)
	}
	return files
}

// modeConsts finds the constants of files whose value is a mode's name,
// as "pkg.Name".
func modeConsts(t *testing.T, names map[string]bool, files []string) map[string]bool {
	out := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if v, ok := n.(*ast.ValueSpec); ok {
				for i, name := range v.Names {
					if i < len(v.Values) && literalName(v.Values[i], names) {
						out[f.Name.Name+"."+name.Name] = true
					}
				}
			}
			return true
		})
	}
	return out
}

// modeComparisons lists where the file at path (or src) compares a mode
// name: == or != with a mode's name or constant, or a case of one.
func modeComparisons(t *testing.T, path string, src any, names, consts map[string]bool) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var isName func(e ast.Expr) bool
	isName = func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.ParenExpr:
			return isName(e.X)
		case *ast.CallExpr: // a conversion: config.Mode("blind"), string(config.ModeHE)
			return len(e.Args) == 1 && isName(e.Args[0])
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			return ok && consts[x.Name+"."+e.Sel.Name]
		case *ast.Ident: // a constant of the file's own package
			return consts[f.Name.Name+"."+e.Name]
		}
		return literalName(e, names)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
				out = append(out, fset.Position(n.Pos()).String())
			}
		case *ast.CaseClause:
			for _, e := range n.List {
				if isName(e) {
					out = append(out, fset.Position(e.Pos()).String())
				}
			}
		}
		return true
	})
	return out
}

// literalName says whether e is a string literal that names a mode.
func literalName(e ast.Expr, names map[string]bool) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && names[s]
}

// TestEveryModeHasAnEngine: modes.List holds one engine for each mode
// config declares, with that mode's declaration, and nothing else.
func TestEveryModeHasAnEngine(t *testing.T) {
	if len(modes.List) != len(config.Modes()) {
		t.Fatalf("%d engines for %d modes", len(modes.List), len(config.Modes()))
	}
	for i, m := range config.Modes() {
		s, _ := config.Spec(m)
		if e := modes.List[i]; e.Name != m || e.Summary != s.Summary || e.Trust != s.Trust {
			t.Errorf("engine %d is mode %s's, want %s's declaration", i, e.Name, m)
		}
	}
}
