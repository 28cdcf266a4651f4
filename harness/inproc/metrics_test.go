package inproc_test

import (
	"fmt"
	"io/fs"
	"maps"
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

// family is one metric name as the servers expose it.
type family struct {
	text, kind string // the first help text seen, the type
	labels     map[string]bool
	where      []string            // "mode/server"
	helps      map[string][]string // each help text: where
	labelSets  map[string][]string // each set of label names: where
}

var (
	helpLine   = regexp.MustCompile(`^# HELP (\S+) (.*)$`)
	typeLine   = regexp.MustCompile(`^# TYPE (\S+) (\S+)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$`)
	labelName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
	docName    = regexp.MustCompile("`(idface_[a-z0-9_]+)(?:\\{([a-z_,]*)\\})?`")
)

// parseMetrics reads the idface_* families of a /metrics page: their help,
// type and label names (a histogram's le and a summary's quantile left
// out: they are the type's own).
func parseMetrics(t *testing.T, page string) map[string]*family {
	t.Helper()
	out := map[string]*family{}
	get := func(name string) *family {
		if out[name] == nil {
			out[name] = &family{labels: map[string]bool{}}
		}
		return out[name]
	}
	for line := range strings.Lines(page) {
		line = strings.TrimSuffix(line, "\n")
		if m := helpLine.FindStringSubmatch(line); m != nil {
			if strings.HasPrefix(m[1], "idface_") {
				get(m[1]).text = m[2]
			}
			continue
		}
		if m := typeLine.FindStringSubmatch(line); m != nil {
			if strings.HasPrefix(m[1], "idface_") {
				get(m[1]).kind = m[2]
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("a /metrics line that is no sample: %q", line)
		}
		name := m[1]
		if !strings.HasPrefix(name, "idface_") {
			continue
		}
		f := out[name]
		if f == nil { // a histogram's or summary's series
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && out[base] != nil {
					f = out[base]
				}
			}
		}
		if f == nil {
			t.Fatalf("sample %q of no family announced before it", line)
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if (f.kind == "histogram" && l[1] == "le") || (f.kind == "summary" && l[1] == "quantile") {
				continue
			}
			f.labels[l[1]] = true
		}
	}
	return out
}

// moduleRoot is the module's root seen from this package's directory
// (harness/inproc); moduleFile checks that it is, so that a
// move of the package cannot shrink the walk of sourceNames unseen.
const moduleRoot = "../.."

func moduleFile(t *testing.T, name ...string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(moduleRoot, "go.mod")); err != nil {
		t.Fatalf("%s is not the module's root: %v", moduleRoot, err)
	}
	return filepath.Join(append([]string{moduleRoot}, name...)...)
}

// monitorTable is the first column of docs/DEPLOY.md's "What to monitor"
// table: each idface_* name with the labels it lists (none where it
// lists none).
func monitorTable(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(moduleFile(t, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## What to monitor\n")
	if !ok {
		t.Fatal(`docs/DEPLOY.md has no "## What to monitor" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	table := map[string]map[string]bool{}
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, m := range docName.FindAllStringSubmatch(cells[1], -1) {
			if table[m[1]] != nil {
				t.Errorf("DEPLOY.md lists %s twice", m[1])
			}
			labels := map[string]bool{}
			for l := range strings.SplitSeq(m[2], ",") {
				if l != "" {
					labels[l] = true
				}
			}
			table[m[1]] = labels
		}
	}
	if len(table) == 0 {
		t.Fatal(`docs/DEPLOY.md's "What to monitor" table names no idface_ metric`)
	}
	return table
}

// sourceNames are the metric names written as string literals in the
// module's non-test Go files that make metrics: also those of labelled
// metrics that show only once they count something (a refusal, an
// outage), which no run here shows.
func sourceNames(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(idface_[a-z0-9_]+)"`)
	names := map[string]bool{}
	root := moduleFile(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root:
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), "prometheus.") {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// pendingMeaning are names that still have two help texts or sets of
// labels, each waiting for a package this test's author could not edit
// (issue 37) to make its metric with the engine's one definition; the
// test logs them instead of failing. Remove an entry once they agree.
var pendingMeaning = map[string]string{}

// digits are the parameters a help text may carry (a window's size, the
// threshold): the same meaning in every cluster.
var digits = regexp.MustCompile(`[0-9]+`)

// TestMetricsCatalog (issue 37 item 5): docs/DEPLOY.md's "What to
// monitor" table is the catalog of idface's metrics. An in-process
// cluster of every mode enrolls and identifies, and every idface_* name
// any of its servers (coordinators and shards included) exposes must be
// in the table with the labels it has, and so must every name the code
// makes (a labelled metric shows only once it counts, and some count only
// rare events); every name in the table must be exposed here or made in
// the code; and a name means one thing: one help text and one set of
// labels on every server of every mode (the mode, where it matters, is a
// label).
func TestMetricsCatalog(t *testing.T) {
	const dim = 64
	tau := 0.25
	all := map[string]*family{}
	for _, tc := range []struct {
		name string
		lit  config.Literal
		mu   int
	}{
		{"2pc", config.Literal{Mode: config.Mode2PC}, 2},
		{"mpc", config.Literal{Mode: config.ModeMPC}, 3},
		{"blind", config.Literal{Mode: config.ModeBlind}, 2},
		{"replicated", config.Literal{Mode: config.ModeReplicated}, 3},
		{"replicated-hidden", config.Literal{Mode: config.ModeReplicated, HideProbes: true}, 3},
		{"he", config.Literal{Mode: config.ModeHE, Beta: 16}, 2},
		{"2pc-sharded", config.Literal{Mode: config.Mode2PC, Shards: 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lit := tc.lit
			lit.Dim, lit.Tau, lit.Timeout = dim, &tau, config.Duration(time.Minute)
			c := inproc.Start(t, inproc.Literal(lit, tc.mu))
			xs := inproc.Templates(8, dim, 37)
			if err := c.Client("client", "p1").Enroll(inproc.Ctx(t, 2*time.Minute), inproc.Items(xs, "m")); err != nil {
				t.Fatal(err)
			}
			// An identify at every entry, so that every server's
			// per-query counters show (a labelled one shows once counted).
			for _, m := range c.P.Parties() {
				if _, err := c.Client("device", m.Name).Identify(inproc.Ctx(t, 2*time.Minute), xs[0], 1); err != nil {
					t.Fatalf("identify at %s: %v", m.Name, err)
				}
			}
			for _, m := range c.P.Servers() {
				for _, name := range c.ServerNames(m.Name) {
					page := c.Metrics(name)
					if page == "" {
						t.Fatalf("%s serves no metrics", name)
					}
					gather(t, all, tc.name+"/"+name, page)
				}
			}
		})
	}
	if t.Failed() {
		return
	}
	table := monitorTable(t)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		f := all[name]
		doc, ok := table[name]
		switch {
		case !ok:
			t.Errorf("%s (%s, at %s) is not in docs/DEPLOY.md's \"What to monitor\" table: add a row (what to watch for)", name, f.text, f.where[0])
		case !maps.Equal(doc, f.labels):
			t.Errorf("docs/DEPLOY.md lists %s with labels {%s}; the servers expose {%s}", name,
				strings.Join(slices.Sorted(maps.Keys(doc)), ","), strings.Join(slices.Sorted(maps.Keys(f.labels)), ","))
		}
		for what, seen := range map[string]map[string][]string{"help texts": f.helps, "sets of labels": f.labelSets} {
			if len(seen) < 2 {
				continue
			}
			var texts []string
			for _, h := range slices.Sorted(maps.Keys(seen)) {
				texts = append(texts, fmt.Sprintf("%q at %s", h, strings.Join(seen[h], ", ")))
			}
			if why, ok := pendingMeaning[name]; ok {
				t.Logf("%s has %d %s (pending: %s):\n\t%s", name, len(texts), what, why, strings.Join(texts, "\n\t"))
				continue
			}
			t.Errorf("%s has %d %s: one name means one thing; give each its own name, or one help text and the mode as a label:\n\t%s", name, len(texts), what, strings.Join(texts, "\n\t"))
		}
	}
	code := sourceNames(t)
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if _, ok := table[name]; !ok && all[name] == nil {
			t.Errorf("%s, made in the code, is not in docs/DEPLOY.md's \"What to monitor\" table: add a row (what to watch for)", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(table)) {
		if all[name] == nil && !code[name] {
			t.Errorf("docs/DEPLOY.md lists %s, which no server exposes and no code makes", name)
		}
	}
}

// gather adds the families of page, served by where, to all.
func gather(t *testing.T, all map[string]*family, where, page string) {
	t.Helper()
	for name, f := range parseMetrics(t, page) {
		g := all[name]
		if g == nil {
			g = &family{text: f.text, labels: map[string]bool{}, helps: map[string][]string{}, labelSets: map[string][]string{}}
			all[name] = g
		}
		maps.Copy(g.labels, f.labels)
		set := "{" + strings.Join(slices.Sorted(maps.Keys(f.labels)), ",") + "}"
		g.labelSets[set] = append(g.labelSets[set], where)
		g.where = append(g.where, where)
		h := digits.ReplaceAllString(f.text, "N")
		g.helps[h] = append(g.helps[h], where)
	}
}
