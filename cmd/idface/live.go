package main

import (
	"context"
	"fmt"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
)

// liveRows is the number of ids enrolled as member's answer h says, for
// an operator (a device is told no count). A sharded member's
// coordinator holds no rows: its shards are asked and add up.
func liveRows(ctx context.Context, cl *client.Client, cfg *config.Params, member string, h *protocol.HealthOK) (int, error) {
	if cfg.Shards() <= 1 {
		return int(h.Live), nil
	}
	n := 0
	for s := range cfg.Shards() {
		sh, err := cl.Health(ctx, config.ShardName(member, s))
		if err != nil {
			return 0, fmt.Errorf("counting the ids enrolled at %s: %w", config.ShardName(member, s), err)
		}
		n += int(sh.Live)
	}
	return n, nil
}

// calibrationNow is what the threshold means with live ids enrolled:
// thresholdMeaning, and the FPIR to expect now when more ids are
// enrolled than it was calibrated for (live < 0: unknown, a device's).
func calibrationNow(cfg *config.Params, live int) string {
	s := thresholdMeaning(cfg)
	if c, ok := cfg.Calibration(); ok && live > c.PlannedRows() {
		s += fmt.Sprintf("; with the %d ids enrolled now, expect FPIR about %.2g", live, c.ExpectedFPIR(live))
	}
	return s
}
