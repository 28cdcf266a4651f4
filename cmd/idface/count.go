package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/idface/idface/config"
)

func init() {
	register("count", "the number of ids enrolled (an operator's)", cmdCount)
}

func cmdCount(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("count", "idface count --cluster DIR [--client NAME] [--json]\nidface count --config cluster.json --home DIR [--json]\n\n"+
		"Prints the number of ids enrolled, as the entry server counts its live\n"+
		"rows (in a sharded cluster, its shards' added up); the gateway's GET\n"+
		"/v1/count answers the same. Only an operator is told: a device is told no\n"+
		"count, nor which ids are enrolled.\n\n"+
		"With --json one object: count, entry.", stderr)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, me, cl, err := cf.openHome()
	if err != nil {
		return err
	}
	defer cl.Close()
	if me.Self.Role != config.RoleOperator {
		return fmt.Errorf("%s (%s) is told no count: only an operator's identity is (its --home, or --client NAME of an operator in a local cluster)", me.Self.Name, me.Self.Role)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	h, err := cl.Health(ctx, cl.Entry())
	if err != nil {
		return err
	}
	n, err := liveRows(ctx, cl, cfg, cl.Entry(), h)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"count": n, "entry": cl.Entry()})
	}
	ids := "ids"
	if n == 1 {
		ids = "id"
	}
	fmt.Fprintf(stdout, "%d %s enrolled (counted at %s)\n", n, ids, cl.Entry())
	return nil
}
