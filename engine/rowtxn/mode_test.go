package rowtxn

import "github.com/idface/idface/config"

// testMode is the configuration of the core's own tests: share holders
// and no helper, mode mpc's declaration (config's, which needs no engine:
// modes/mpcface imports this package).
const testMode = config.ModeMPC
