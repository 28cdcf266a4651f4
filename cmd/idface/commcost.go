package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/idface/idface/experiments"
)

func init() {
	register("commcost", "communication per enrollment and identification (paper tables)", cmdCommCost)
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a list of integers", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func cmdCommCost(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("commcost", "idface commcost [--ids 1000000] [--dim 512] [--alpha 341] [--beta 63,127,341] [--mu 2,3,6,11,21] [--json] [--measure]\n\n"+
		"Prints the analytic bits exchanged between servers per enrollment and per\n"+
		"identification for 2PCFace, MPCFace, IDFace with the paper's CKKS and\n"+
		"Paillier parameters, IDFace with this project's BGV parameters, and blind\n"+
		"mode and replicated mode. With --measure it also runs local clusters of\n"+
		"--ids rows (2pc, mpc for each mu > 2 up to 6, he, blind for mu <= 3,\n"+
		"replicated) and prints the bytes\n"+
		"actually moved.", stderr)
	ids := fs.Int("ids", 1_000_000, "database size D")
	dim := fs.Int("dim", 512, "template dimension d")
	alpha := fs.Int("alpha", 341, "enrollment weight")
	betas := fs.String("beta", "63,127,341", "query weights")
	mus := fs.String("mu", "2,3,6,11,21", "numbers of servers for MPCFace")
	asJSON := fs.Bool("json", false, "print JSON")
	measure := fs.Bool("measure", false, "also measure real clusters (use a small --ids)")
	if err := parse(fs, args); err != nil {
		return err
	}
	bl, err := intList(*betas)
	if err != nil {
		return err
	}
	ml, err := intList(*mus)
	if err != nil {
		return err
	}
	rows, err := experiments.CommCost(*ids, *dim, *alpha, bl, ml)
	if err != nil {
		return err
	}
	if *measure {
		if *ids > 200_000 {
			return fmt.Errorf("--measure starts real clusters: use --ids 200000 or less")
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		for i := range rows {
			r := &rows[i]
			if r.Cluster == nil { // a row its mode does not measure
				continue
			}
			o := *r.Cluster
			o.Exe, o.Dim, o.Alpha, o.Beta, o.IDs, o.Queries, o.Seed = exe, *dim, *alpha, r.Beta, *ids, 3, 1
			fmt.Fprintf(stderr, "measuring %s, mu = %d, beta = %d on %d rows...\n", o.Mode, o.Parties, r.Beta, *ids)
			res, err := experiments.RunClusterBench(context.Background(), o)
			if err != nil {
				return err
			}
			b := int64(res.BytesPerIdent)
			r.Measured = &b
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"rows": rows})
	}
	fmt.Fprintf(stdout, "D = %d, d = %d, alpha = %d (MiB = 2^20 bytes, MB = 10^6 bytes)\n", *ids, *dim, *alpha)
	fmt.Fprintf(stdout, "%-22s %-9s %4s %5s %16s %10s %12s %12s %14s\n", "protocol", "phase", "mu", "beta", "bits", "KB", "MiB", "MB", "measured")
	for _, r := range rows {
		m := ""
		if r.Measured != nil {
			m = fmt.Sprintf("%d B (%+.2f%%)", *r.Measured, 100*(float64(*r.Measured)*8/r.Bits-1))
		}
		fmt.Fprintf(stdout, "%-22s %-9s %4d %5d %16.0f %10.2f %12.2f %12.2f %14s\n", r.Protocol, r.Phase, r.Mu, r.Beta, r.Bits, r.Bits/8000, r.MiB, r.MB, m)
	}
	return nil
}
