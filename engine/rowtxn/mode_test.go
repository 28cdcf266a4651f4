package rowtxn

import "github.com/idface/idface/config"

// testMode is the configuration of the core's own tests: share holders
// and no helper, like mode mpc, whose package (engine/mpcface) imports
// this one and so cannot register it here.
const testMode config.Mode = "rowtxn-test"

func init() {
	config.RegisterMode(config.ModeSpec{Name: testMode, Summary: "the row core's tests", Trust: "tests only",
		Layout: config.Layout{PartyRole: config.RoleShareHolder, PartyNoun: "parties", MinParties: 2, MaxParties: config.MaxParties, DefaultParties: 2}})
}
