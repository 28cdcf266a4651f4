// Package modes is the list of the modes this build of idface offers:
// importing it registers each one (engine.Register, called by the mode's
// own package). A program that loads a configuration imports it; adding
// a mode is its package, one line here and its row in the README's table
// of modes (docs/ARCHITECTURE.md "Adding a mode"). Outside these packages
// no program compares a mode's name (TestNoModeNameCompared).
package modes

import (
	_ "github.com/idface/idface/engine/blind"      // blind mode
	_ "github.com/idface/idface/engine/hemode"     // IDFace (he)
	_ "github.com/idface/idface/engine/mpcface"    // 2PCFace (2pc) and (mu,nu)-MPCFace (mpc)
	_ "github.com/idface/idface/engine/replicated" // replicated blind mode
)
