package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
)

// TestOutageReports (issue 38 item 3): a replicated cluster of real
// processes reports outages as they are. A reshare says, of a holder with
// no rows of its own, that there was nothing to reshare (it printed "p2: 0
// rows reshared, epoch 0"). With p2 killed, enroll and delete name where
// the change is and that p2's part is held for delivery (they printed
// "at every party"), in text and JSON; identify --json counts its degraded
// answers in its summary (it counted none).
func TestOutageReports(t *testing.T) {
	dir, cfg := newCluster(t, "replicated", 3, "--dim", "64")
	work := t.TempDir()
	d := newDatasetDim(t, work, 12, 64, 5)
	if out := must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet"); !strings.Contains(out, "enrolled 12 at every party") {
		t.Errorf("enroll with every holder up: %s", out)
	}
	out := must(t, "reshare", "--cluster", dir)
	for _, want := range []string{
		"p1: the 12 rows of its segment reshared at every holder (deleted ones included); now epoch 1",
		"p2: no rows of its own to reshare (its segment is empty: rows are reshared by the holder they were enrolled through); epoch stays 0",
		"p3: no rows of its own to reshare",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("reshare does not say %q:\n%s", want, out)
		}
	}

	if err := cluster.Kill(cfg, "p2"); err != nil {
		t.Fatal(err)
	}
	// Templates no probe matches (the queries negated), under new ids.
	late := make([][]float32, 3)
	var ids []string
	for i := range late {
		late[i] = slices.Clone(d.queries[i])
		for j := range late[i] {
			late[i][j] = -late[i][j]
		}
		ids = append(ids, fmt.Sprintf("late-%d", i))
	}
	lateNpy, lateIDs := filepath.Join(work, "late.npy"), filepath.Join(work, "late.txt")
	writeNpy(t, lateNpy, late[:2])
	if err := os.WriteFile(lateIDs, []byte(strings.Join(ids[:2], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	held := "p2's part held for delivery (p2 is unreachable: the entry p1 keeps it and delivers it once p2 is back"
	out = must(t, "enroll", "--cluster", dir, "--ids", lateIDs, "--templates", lateNpy, "--quiet")
	if !strings.Contains(out, "enrolled 2 at p1, p3 in ") || !strings.Contains(out, held) || strings.Contains(out, "every party") {
		t.Errorf("enroll with p2 down says:\n%s", out)
	}
	one := filepath.Join(work, "one.npy")
	writeNpy(t, one, late[2:])
	var js struct {
		Enrolled int      `json:"enrolled"`
		HeldFor  []string `json:"held_for"`
	}
	out = must(t, "enroll", "--cluster", dir, "--id", ids[2], "--template", one, "--json")
	if err := json.Unmarshal([]byte(out), &js); err != nil || js.Enrolled != 1 || !slices.Equal(js.HeldFor, []string{"p2"}) {
		t.Errorf("enroll --json with p2 down: %v\n%s", err, out)
	}
	if out := must(t, "delete", "--cluster", dir, "--id", ids[0]); !strings.HasPrefix(out, "deleted late-0 at p1, p3; "+held) {
		t.Errorf("delete with p2 down says:\n%s", out)
	}

	// Degraded answers are counted in --json's summary as in the table's.
	degradedLine := regexp.MustCompile(`"degraded":true`)
	counted := regexp.MustCompile(`(\d+) answered degraded`)
	for deadline := time.Now().Add(60 * time.Second); ; {
		out, errs, code := idface(t, "identify", "--cluster", dir, "--client", "device", "--templates", d.query, "--json")
		n := len(degradedLine.FindAllString(out, -1))
		if code == 0 && n > 0 {
			if m := counted.FindStringSubmatch(errs); m == nil || m[1] != fmt.Sprint(n) {
				t.Errorf("identify --json: %d answers degraded, its summary says:\n%s", n, errs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("identify --json with p2 down for a minute: exit %d, no degraded answer\n%s%s", code, out, errs)
		}
		time.Sleep(time.Second)
	}
}
