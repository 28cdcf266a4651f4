package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
)

// heldFor names the parties that an acknowledged change through the
// entry was held for: in a mode that commits an enrollment or a
// deletion without one unreachable party (config.ModeSpec.Outage), the
// entry keeps that party's part and delivers it once the party is back.
// The acknowledgement (EnrollOK, DeleteOK) does not say so, so it is
// asked for: the entry reports unsettled changes (a held part is one),
// and only then are the other parties asked whether they answer, a
// handshake timeout at most. nil: every party has the change.
func heldFor(cl *client.Client, cfg *config.Params) []string {
	if !cfg.Spec().Outage || cfg.Mu() < 3 {
		return nil // the change was acknowledged by every party
	}
	entry := cl.Entry()
	// The servers that hold rows: a sharded member's shards (its
	// coordinator holds no transaction).
	procs := func(member string) []string {
		if cfg.Shards() <= 1 {
			return []string{member}
		}
		var out []string
		for s := range cfg.Shards() {
			out = append(out, config.ShardName(member, s))
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	unsettled := false
	for _, name := range procs(entry) {
		if h, err := cl.Health(ctx, name); err != nil || h.InDoubt > 0 {
			unsettled = true // an entry that does not answer now says nothing: ask the others
		}
	}
	if !unsettled {
		return nil
	}
	var mu sync.Mutex
	down := map[string]bool{}
	var wg sync.WaitGroup
	for _, p := range cfg.Parties() {
		if p.Name == entry {
			continue
		}
		for _, name := range procs(p.Name) {
			wg.Go(func() {
				if _, err := cl.Health(ctx, name); err != nil {
					mu.Lock()
					down[p.Name] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	var out []string
	for _, p := range cfg.Parties() {
		if down[p.Name] {
			out = append(out, p.Name)
		}
	}
	return out
}

// heldAt is where a change is, for "enrolled 20 at p1, p3": "at every
// party", or the parties that have it; note then says which parts are
// held for delivery, and why.
func heldAt(cfg *config.Params, entry string, held []string) (at, note string) {
	if len(held) == 0 {
		return "at every party", ""
	}
	var have []string
	for _, p := range cfg.Parties() {
		if !slices.Contains(held, p.Name) {
			have = append(have, p.Name)
		}
	}
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = h + "'s"
	}
	what, it := "part", "it"
	if len(held) > 1 {
		what, it = "parts", "them"
	}
	names, are := strings.Join(held, ", "), isAre(len(held))
	return "at " + strings.Join(have, ", "), fmt.Sprintf("; %s %s held for delivery (%s %s unreachable: the entry %s keeps %s and delivers %s once %s %s back; idface cluster status shows the outage)",
		strings.Join(parts, " and "), what, names, are, entry, it, it, names, are)
}
