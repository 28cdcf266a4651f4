package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/idface/idface/protocol"
)

func init() {
	register("ids", "list the enrolled ids, a page at a time (an operator's)", cmdIDs)
}

func cmdIDs(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ids", "idface ids --cluster DIR [--after ID] [--limit N] [--client NAME] [--json]\nidface ids --config cluster.json --home DIR [--after ID] [--limit N] [--json]\n\n"+
		"Prints the enrolled ids, one a line, in increasing byte order: the first\n"+
		"--limit after --after (from the first id without it). When more follow,\n"+
		"a line on stderr gives the command for the next page (the same with\n"+
		"--after the last id printed), so stdout holds ids only. The entry server\n"+
		"answers from its row map (in a sharded cluster, its shards, merged); the\n"+
		"gateway's GET /v1/ids answers the same. Ids are personal data: only an\n"+
		"operator is told; a device is refused.\n\n"+
		"With --json one object: ids, more, and after (the last id, for the next\n"+
		"page) when more follow.", stderr)
	cf := addClientFlags(fs)
	after := fs.String("after", "", "list the ids after this one (the last id of the previous page)")
	limit := fs.Int("limit", 1000, fmt.Sprintf("ids on the page (1..%d)", protocol.MaxListIDs))
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > protocol.MaxListIDs {
		fmt.Fprintf(stderr, "idface ids: --limit %d: give 1..%d\n", *limit, protocol.MaxListIDs)
		fs.Usage()
		return errUsage
	}
	_, cl, err := cf.open()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
	defer cancel()
	ids, more, err := cl.IDs(ctx, *after, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		out := map[string]any{"ids": ids, "more": more}
		if ids == nil {
			out["ids"] = []string{}
		}
		if more {
			out["after"] = ids[len(ids)-1]
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	for _, id := range ids {
		fmt.Fprintln(stdout, id)
	}
	if more {
		fmt.Fprintf(stderr, "more ids follow: for the next page, run this command again with --after %s\n", shellWord(ids[len(ids)-1]))
	}
	return nil
}

// shellWord writes s as one word of a POSIX shell: as it is when it has
// only characters no shell treats apart, else in single quotes.
func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/_.-+:@%,=", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
