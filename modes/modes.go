// Package modes is the list of the engines of this build's modes, an
// explicit value (List): a program that runs servers, or asks a mode's
// traffic and storage, looks a mode's engine up here. What every mode is
// (config.ModeSpec) is data in config, which a program that only enrolls
// and identifies reads without linking any engine. Adding a mode is its
// declaration in config, its package, one line here, its device part in
// package device if its client makes shares, and its row in the README's
// table of modes (docs/ARCHITECTURE.md "Adding a mode"). Outside these
// packages no program compares a mode's name (TestNoModeNameCompared).
package modes

import (
	"fmt"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/modes/blind"
	"github.com/idface/idface/modes/hemode"
	"github.com/idface/idface/modes/mpcface"
	"github.com/idface/idface/modes/replicated"
)

// List is the engines of this build's modes, one for each of
// config.Modes (TestEveryModeHasAnEngine).
var List = []*engine.Mode{
	&mpcface.Mode2PC, // 2PCFace (2pc)
	&mpcface.ModeMPC, // (mu,nu)-MPCFace (mpc)
	&hemode.Mode,     // IDFace (he)
	&blind.Mode,      // blind mode
	&replicated.Mode, // replicated blind mode
}

// Lookup returns the engine of the mode called name.
func Lookup(name config.Mode) (*engine.Mode, error) {
	if _, err := config.Spec(name); err != nil {
		return nil, err
	}
	for _, m := range List {
		if m.Name == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("mode %s has no engine in this build (modes.List)", name)
}

// Of returns the engine of a checked configuration's mode.
func Of(p *config.Params) (*engine.Mode, error) { return Lookup(p.Mode()) }

// ServerOf returns what the named server of p is.
func ServerOf(p *config.Params, name string) (engine.Server, error) {
	m, err := Of(p)
	if err != nil {
		return engine.Server{}, err
	}
	if _, ok := p.Server(name); !ok {
		return engine.Server{}, fmt.Errorf("%s is not a server of this cluster", name)
	}
	return m.Server(p, name), nil
}
