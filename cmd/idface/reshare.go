package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

func init() {
	register("reshare", "refresh every share of a replicated cluster with a zero-sharing (a new epoch)", cmdReshare)
}

func cmdReshare(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reshare", "idface reshare --cluster DIR [--client NAME]\nidface reshare --config cluster.json --home DIR\n\n"+
		"Asks every share holder in turn, as an operator, to reshare its segment:\n"+
		"every row's shares at every holder refreshed with a zero-sharing under a\n"+
		"fresh key that only the holders see and none writes down; the old shares\n"+
		"are erased from their logs, answers do not change. Shares of two epochs\n"+
		"never combine: a thief of one holder's old disk and another's new one has\n"+
		"nothing. Run it on a schedule (docs/DEPLOY.md) and after 'party rebuild'.\n"+
		"Every holder must be up; queries go on meanwhile (a query across holders\n"+
		"of different epochs is refused and can be retried).", stderr)
	cf := addClientFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, cl, err := cf.open()
	if err != nil {
		return err
	}
	defer cl.Close()
	if !cfg.Spec().Reshare {
		return fmt.Errorf("mode %s does not reshare (its shares are not replicated)", cfg.Mode())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	done := 0 // holders reshared so far
	for _, m := range cfg.Parties() {
		names := []string{m.Name}
		if cfg.Shards() > 1 { // each shard reshares its rows
			names = names[:0]
			for s := range cfg.Shards() {
				names = append(names, config.ShardName(m.Name, s))
			}
		}
		for _, name := range names {
			ok, err := cl.Reshare(rpc.Patient(ctx, *cf.timeout), name)
			var re *client.RoleError
			switch {
			case errors.As(err, &re): // said before sending: reshare needs an operator's identity
				return fmt.Errorf("nothing was reshared: %w", err)
			case err != nil && client.RoleRefused(err): // refused again however often it runs
				return fmt.Errorf("%s refused the reshare: %w\nreshare needs an operator's identity: run it with an operator's --home (or --client NAME of an operator in a local cluster); running it again as this member is refused alike", name, err)
			case err != nil && done == 0:
				return fmt.Errorf("reshare of %s's rows: %w (no holder reshared yet; run it again)", name, err)
			case err != nil:
				return fmt.Errorf("reshare of %s's rows: %w (the %d holders before it are done; run it again)", name, err, done)
			}
			done++
			fmt.Fprintln(stdout, reshareReport(name, ok))
		}
	}
	return nil
}

// reshareReport says what a holder's reshare did. A holder reshares the
// rows enrolled through it (its segment), which may be none: then
// nothing changed and its epoch stays, which is no failure.
func reshareReport(name string, ok *protocol.ReshareOK) string {
	if ok.Rows == 0 {
		return fmt.Sprintf("%s: no rows of its own to reshare (its segment is empty: rows are reshared by the holder they were enrolled through); epoch stays %d", name, ok.Epoch)
	}
	rows := "rows"
	if ok.Rows == 1 {
		rows = "row"
	}
	return fmt.Sprintf("%s: the %d %s of its segment reshared at every holder (deleted ones included); now epoch %d", name, ok.Rows, rows, ok.Epoch)
}
