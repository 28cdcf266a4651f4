package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

func init() {
	register("exists", "whether an id is enrolled: exit 0 yes, 1 no (an operator's)", cmdExists)
}

func cmdExists(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("exists", "idface exists --cluster DIR --id ID [--client NAME] [--json]\nidface exists --config cluster.json --home DIR --id ID [--json]\n\n"+
		"Says whether the id is enrolled, as the entry server's row map holds it\n"+
		"(in a sharded cluster, any of its shards); the gateway's GET\n"+
		"/v1/exists?id=ID answers the same. Ids are personal data: only an\n"+
		"operator is told; a device is refused.\n\n"+
		"Exit status: 0 the id is enrolled, 1 it is not, 2 a usage error or a\n"+
		"failure (nothing was learnt), as grep's.\n\n"+
		"With --json one object: id, enrolled.", stderr)
	cf := addClientFlags(fs)
	id := fs.String("id", "", "the id to look for (as enrolled: ids are never trimmed)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *id == "" {
		fmt.Fprintln(stderr, "idface exists: give --id ID")
		fs.Usage()
		return errUsage
	}
	_, cl, err := cf.open()
	if err != nil {
		return &exitError{2, err}
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	ok, err := cl.Exists(ctx, *id)
	if err != nil {
		return &exitError{2, err}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(map[string]any{"id": *id, "enrolled": ok}); err != nil {
			return &exitError{2, err}
		}
	} else if ok {
		fmt.Fprintf(stdout, "%s is enrolled\n", *id)
	} else {
		fmt.Fprintf(stdout, "%s is not enrolled\n", *id)
	}
	if !ok {
		return &exitError{code: 1} // said on stdout
	}
	return nil
}
