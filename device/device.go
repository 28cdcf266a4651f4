// Package device is what a mode asks of a client that holds templates in
// the clear (the device at a gate, the operator's enrolling client): the
// shares of a sealed enrollment (Sealer) and of a hidden probe
// (ProbeHider), made from template, sharing and the cluster's
// configuration alone. A program that enrolls and identifies links these
// parts and config's declarations of the modes, never a server engine
// (TestClientLinksNoEngine).
package device

import (
	"github.com/idface/idface/config"
	"github.com/idface/idface/device/blind"
	"github.com/idface/idface/device/replicated"
	"github.com/idface/idface/protocol"
)

// Sealer makes, at the operator's client, every party's plaintext part of
// a sealed enrollment of items (party order; entry is the party that
// relays them): a flag byte (1: seeds of rowtxn's seed size, 0: full
// shares) and one unit per item. Every mode whose declaration says Sealed
// has one.
type Sealer interface {
	SealedShares(p *config.Params, entry int, items []protocol.Item) ([][]byte, error)
}

// ProbeHider makes, at the device's client, every party's plaintext part
// of a hidden-probe identify of tmpl (party order), which the client
// seals to each party, and the key under which the decider seals its
// verdict to the device (protocol.VerdictKey), whose components the parts
// carry. Every mode whose declaration says HideProbes has one.
type ProbeHider interface {
	HiddenProbe(p *config.Params, tmpl []float32) (parts [][]byte, verdictKey [32]byte, err error)
}

// Part is a mode's device part: what its client makes, nil where it sends
// templates and probes as they are.
type Part struct {
	Mode config.Mode
	Seal Sealer
	Hide ProbeHider
}

// Parts is the list of the device parts of this build's modes.
var Parts = []Part{
	{Mode: config.ModeBlind, Seal: blind.Part{}},
	{Mode: config.ModeReplicated, Seal: replicated.Part{}, Hide: replicated.Part{}},
}

// Of returns mode m's device part (the zero Part for a mode without one).
func Of(m config.Mode) Part {
	for _, p := range Parts {
		if p.Mode == m {
			return p
		}
	}
	return Part{}
}
