package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

type deleteJSON struct {
	Deleted int    `json:"deleted"`
	Skipped int    `json:"skipped"`
	Entry   string `json:"entry"`
	Journal string `json:"journal"`
	Error   string `json:"error"`
}

type fsckJSON struct {
	Server   string   `json:"server"`
	Mode     string   `json:"mode"`
	Data     string   `json:"data"`
	Intact   bool     `json:"intact"`
	Problems []string `json:"problems"`
	Segments []struct {
		Origin string `json:"origin"`
		Rows   int    `json:"rows"`
		Live   int    `json:"live"`
	} `json:"segments"`
	Rows []struct {
		Origin string `json:"origin"`
		Row    int    `json:"row"`
		ID     string `json:"id"`
		Live   bool   `json:"live"`
	} `json:"rows"`
	Report []string `json:"report"`
	Error  string   `json:"error"`
}

// TestDeleteAndFsckJSON (issue 20, item 7): 'delete --json' and 'fsck
// --json' print one object a script can read, a failure included, with
// the counts the human output gives.
func TestDeleteAndFsckJSON(t *testing.T) {
	dir, _ := newCluster(t, "2pc", 2, "--dim", "64", "--beta", "16")
	d := newDatasetDim(t, t.TempDir(), 12, 64, 21)
	must(t, "enroll", "--cluster", dir, "--ids", d.ids, "--templates", d.enroll, "--quiet")

	var del deleteJSON
	decodeOne(t, "delete --id --json", must(t, "delete", "--cluster", dir, "--id", d.names[0], "--json"), &del)
	if del.Deleted != 1 || del.Skipped != 0 || del.Error != "" || del.Entry != "p1" || !strings.HasPrefix(del.Journal, dir) {
		t.Fatalf("delete --json: %+v", del)
	}
	// The second id is unknown: the first is deleted, the run fails, and
	// the object says so.
	ids := filepath.Join(t.TempDir(), "ids.txt")
	os.WriteFile(ids, []byte(d.names[1]+"\nnobody\n"+d.names[2]+"\n"), 0o644)
	out, errs, code := idface(t, "delete", "--cluster", dir, "--ids", ids, "--json")
	del = deleteJSON{}
	decodeOne(t, "failed delete --json", out, &del)
	if code != 1 || del.Deleted != 1 || !strings.Contains(del.Error, `"nobody"`) || !strings.Contains(errs, `"nobody"`) {
		t.Fatalf("failed delete --json: exit %d %+v\n%s", code, del, errs)
	}

	must(t, "cluster", "down", "--cluster", dir)
	var fs fsckJSON
	decodeOne(t, "fsck --json", must(t, "fsck", "--cluster", dir, "--party", "p2", "--rows", "p1:0-3", "--json"), &fs)
	if !fs.Intact || fs.Server != "p2" || fs.Mode != "2pc" || len(fs.Problems) != 0 || fs.Error != "" || len(fs.Segments) != 2 || len(fs.Rows) != 3 {
		t.Fatalf("fsck --json: %+v", fs)
	}
	rows, live := 0, 0
	for _, s := range fs.Segments {
		rows, live = rows+s.Rows, live+s.Live
	}
	if rows != 12 || live != 10 || fs.Rows[0].ID != d.names[0] || fs.Rows[0].Live || !fs.Rows[2].Live || fs.Report[len(fs.Report)-1] != "intact" {
		t.Fatalf("fsck --json: %d rows, %d live (want 12, 10): %+v", rows, live, fs)
	}
	// A damaged log: not intact, the problem named, exit 1.
	log := filepath.Join(dir, "homes", "p2", "data", "shares.log")
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 9, 1}) // a torn tail
	f.Close()
	out, _, code = idface(t, "fsck", "--cluster", dir, "--party", "p2", "--json")
	fs = fsckJSON{}
	decodeOne(t, "fsck --json of a torn log", out, &fs)
	if code != 1 || fs.Intact || len(fs.Problems) != 1 || !strings.Contains(fs.Problems[0], "torn tail") {
		t.Fatalf("fsck --json of a torn log: exit %d %+v", code, fs)
	}
	// fsck that cannot check at all: error.
	out, _, code = idface(t, "fsck", "--cluster", dir, "--party", "nobody", "--json")
	fs = fsckJSON{}
	decodeOne(t, "fsck --json of no server", out, &fs)
	if code != 1 || fs.Intact || fs.Error == "" {
		t.Fatalf("fsck --json of no server: exit %d %+v", code, fs)
	}
}

// TestDemoJSON (issue 20, item 7): 'demo --json' prints its summary as one
// object on stdout, the progress on stderr.
func TestDemoJSON(t *testing.T) {
	out, errs, code := idface(t, "demo", "--people", "30", "--samples", "2", "--seed", "4", "--json")
	var r struct {
		Mode             string  `json:"mode"`
		Servers          int     `json:"servers"`
		Dim              int     `json:"dim"`
		Alpha            int     `json:"alpha"`
		Beta             int     `json:"beta"`
		Tau              float64 `json:"tau"`
		Threshold        int     `json:"threshold"`
		Seed             uint64  `json:"seed"`
		Enrolled         int     `json:"enrolled"`
		EnrollSeconds    float64 `json:"enroll_seconds"`
		Genuine          int     `json:"genuine"`
		Correct          int     `json:"correct"`
		Wrong            int     `json:"wrong"`
		Rejected         int     `json:"rejected"`
		Impostor         int     `json:"impostor"`
		ImpostorAccepted int     `json:"impostor_accepted"`
		P50Ms            float64 `json:"p50_ms"`
		P90Ms            float64 `json:"p90_ms"`
		BytesPerQuery    uint64  `json:"bytes_per_query"`
		Formula          string  `json:"formula"`
		FormulaBytes     float64 `json:"formula_bytes"`
	}
	if code != 0 {
		t.Fatalf("demo --json: exit %d\n%s", code, errs)
	}
	decodeOne(t, "demo --json", out, &r)
	// 30 people, 24 enrolled: 24 genuine queries (sample 1), 6 impostors
	// with 2 samples each.
	if r.Mode != "2pc" || r.Servers != 2 || r.Seed != 4 || r.Enrolled != 24 || r.Genuine != 24 || r.Impostor != 12 ||
		r.Correct+r.Wrong+r.Rejected != r.Genuine || r.Correct < 22 || r.P50Ms <= 0 || r.BytesPerQuery == 0 || r.Formula == "" {
		t.Fatalf("demo --json: %+v", r)
	}
	if !strings.Contains(errs, "cluster stopped and removed") || !strings.Contains(errs, "enrolled 24 people") {
		t.Fatalf("demo --json: progress not on stderr:\n%s", errs)
	}
}
