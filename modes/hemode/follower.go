package hemode

import (
	"context"
	"sync/atomic"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// follower is how far a server that applies the sequencer's numbered
// changes (a participant local server, the key server) is behind: it
// answers nothing that depends on them until it has caught up.
type follower struct {
	target   atomic.Uint64 // the sequencer's change number at its last sync
	caughtUp atomic.Bool   // every change the sequencer announced is applied
}

// caughtUpTo records the sequencer's last change and whether this server,
// at change seq, has applied it.
func (f *follower) caughtUpTo(target, seq uint64) {
	f.target.Store(target)
	if seq >= target {
		f.caughtUp.Store(true)
	}
}

// applied notes that change seq is applied.
func (f *follower) applied(seq uint64) {
	if seq >= f.target.Load() {
		f.caughtUp.Store(true)
	}
}

// inOrder checks that the sequencer's change m (HEDecide or HEDelete) is
// the next after have, the last applied by who: nil to apply it, else the
// answer (already applied: acknowledged again; a gap: refused, and the
// sequencer sends the missing ones first).
func inOrder(m protocol.Msg, have uint64, who string) protocol.Msg {
	var seq uint64
	switch m := m.(type) {
	case *protocol.HEDecide:
		seq = m.Seq
	case *protocol.HEDelete:
		seq = m.Seq
	}
	switch {
	case seq <= have:
		return &protocol.DecideOK{}
	case seq != have+1:
		return protocol.Errorf(protocol.CodeInconsistent, "%s has applied changes up to %d; change %d is next, not %d", who, have, have+1, seq)
	}
	return nil
}

// askSync asks the sequencer for its last change (the sequencer then
// sends the ones this server misses); seq reads this server's.
func (f *follower) askSync(ctx context.Context, env engine.Env, seq func() uint64) {
	cctx, cancel := context.WithTimeout(ctx, env.Params.Timeouts().OutboxSend)
	defer cancel()
	resp, err := rpc.Call(cctx, env.Net, env.Params.Party(0).Name, &protocol.HESync{Seq: seq()})
	if err != nil {
		env.Log.Debug("the sequencer did not answer a sync", "err", err)
		return
	}
	if ok, isOK := resp.(*protocol.HESyncOK); isOK {
		f.caughtUpTo(ok.Seq, seq())
	}
}
