package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/idface/idface/experiments"
)

func init() {
	register("plan", "machines, memory, cores and network per party for a target, from a measured run", cmdPlan)
}

func cmdPlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", "idface plan --bench RUN.json --qps R [--rows 1e6,1e7,1e8,1e9] [--machine-cores 32] [--machine-gb 256] [--machine-gbit 25] [--json]\n\n"+
		"Scales one measured run to a target: for each number of rows, the cores\n"+
		"each server is busy with at R identifications a second, each party's\n"+
		"memory, each server's network, and the machines a party needs (shards).\n"+
		"A linear model, not a measurement: an identify's work and bytes grow with\n"+
		"the rows, and the run's servers were saturated. RUN.json is the output of\n"+
		"  idface bench --mode M --ids 1000000 --clients 8 --json > RUN.json\n"+
		"(the line with clients and the most rows is used). A party that needs\n"+
		"more than one machine runs that many shards (cluster init --shards S);\n"+
		"the model leaves out the coordinators' and merges' own cost.\n"+
		"docs/RESULTS.md, \"Capacity model\", has the model and an example.", stderr)
	bench := fs.String("bench", "", "a file of idface bench --json lines (- for standard input)")
	qps := fs.Float64("qps", 0, "identifications a second to sustain")
	rows := fs.String("rows", "1e6,1e7,1e8,1e9", "enrolled identities, comma-separated (1e8 and 100000000 alike)")
	cores := fs.Int("machine-cores", 32, "cores of one machine")
	gb := fs.Float64("machine-gb", 256, "memory of one machine, GB")
	gbit := fs.Float64("machine-gbit", 25, "network of one machine, Gbit/s (0: no limit)")
	asJSON := fs.Bool("json", false, "one JSON object per size")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *bench == "" || *qps <= 0 {
		return fmt.Errorf("give --bench RUN.json (from idface bench --clients 8 --json) and --qps R")
	}
	sizes, err := rowList(*rows)
	if err != nil {
		return err
	}
	run, err := readRun(*bench)
	if err != nil {
		return err
	}
	var plans []experiments.Plan
	for _, n := range sizes {
		p, err := experiments.PlanFrom(run, experiments.PlanTarget{Rows: n, QPS: *qps, MachineCores: *cores, MachineGB: *gb, MachineGbit: *gbit})
		if err != nil {
			return err
		}
		plans = append(plans, p)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, p := range plans {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(stdout, "model from: %s (%s)\n", plans[0].Basis, run.Host)
	fmt.Fprintf(stdout, "target: %g identifications/s on machines of %d cores, %g GB and %g Gbit/s\n\n", *qps, *cores, *gb, *gbit)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rows\tcores per server\tmemory per party (GB)\tnetwork per server (Gbit/s)\tmachines per party\tidentify p50 (ms, model)\t")
	for _, p := range plans {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.2f\t%d\t%.0f\t\n", p.Rows, p.CoresPerServer, p.MemGBPerParty, p.NetGbitPerServe, p.MachinesPerParty, p.IdentifyMsP50)
	}
	return tw.Flush()
}

// rowList parses "1e6,1e7,100000000".
func rowList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 1 || v > 1e12 || v != float64(int(v)) {
			return nil, fmt.Errorf("--rows %q: want whole numbers of rows, 1 to 1e12, comma-separated", s)
		}
		out = append(out, int(v))
	}
	return out, nil
}

// readRun picks from bench --json lines the run with concurrent clients
// and the most rows.
func readRun(path string) (experiments.BenchResult, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return experiments.BenchResult{}, err
		}
		defer f.Close()
		r = f
	}
	var best experiments.BenchResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(t, "{") {
			continue // bench's other output
		}
		var b experiments.BenchResult
		if err := json.Unmarshal([]byte(t), &b); err != nil {
			return best, fmt.Errorf("%s line %d: %v (want idface bench --json output)", path, line, err)
		}
		if b.Clients > 1 && b.IDs > best.IDs {
			best = b
		}
	}
	if err := sc.Err(); err != nil {
		return best, fmt.Errorf("%s: %v", path, err)
	}
	if best.IDs == 0 {
		return best, fmt.Errorf("%s has no run with concurrent clients: measure with idface bench --mode M --ids 1000000 --clients 8 --json", path)
	}
	return best, nil
}
