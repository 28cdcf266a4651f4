package experiments

import (
	"fmt"
	"slices"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/template"
)

// CommRow is one line of the communication tables (paper Tables
// "comm_cost" and "comm_cost_multi"): the bits servers exchange per
// enrollment or per identification.
type CommRow struct {
	Protocol string  `json:"protocol"`
	Phase    string  `json:"phase"`
	Mu       int     `json:"mu"`
	Alpha    int     `json:"alpha"`
	Beta     int     `json:"beta"`
	IDs      int     `json:"ids"`
	Bits     float64 `json:"bits"`
	MiB      float64 `json:"mib"`
	MB       float64 `json:"mb"`
	Measured *int64  `json:"measured_bytes,omitempty"`
	// Cluster, when set, is the local cluster on which 'commcost
	// --measure' measures the row (its mode, parties and options; the
	// caller adds the rest).
	Cluster *BenchOptions `json:"-"`
}

func row(proto, phase string, mu, alpha, beta, ids int, bits float64) CommRow {
	return CommRow{Protocol: proto, Phase: phase, Mu: mu, Alpha: alpha, Beta: beta, IDs: ids,
		Bits: bits, MiB: bits / 8 / (1 << 20), MB: bits / 8 / 1e6}
}

// CommCost returns the analytic rows for every (beta, mu) asked, each
// mode's as it declares them (engine.Mode.CommCost). Enrollment rows
// count server-to-server bits.
func CommCost(ids, d, alpha int, betas, mus []int) ([]CommRow, error) {
	if ids < 1 || d < 1 || d > template.MaxDim || alpha < 1 || alpha > d {
		return nil, fmt.Errorf("experiments: ids = %d, d = %d, alpha = %d", ids, d, alpha)
	}
	type table struct {
		mode config.Mode
		engine.CommTable
	}
	var tables []table
	for _, name := range config.Modes() {
		m, err := modes.Lookup(name)
		if err != nil {
			return nil, err
		}
		for _, t := range m.CommCost {
			tables = append(tables, table{name, t})
		}
	}
	slices.SortStableFunc(tables, func(a, b table) int { return a.Place - b.Place })
	var rows []CommRow
	for _, beta := range betas {
		if beta < 1 || beta > d {
			return nil, fmt.Errorf("experiments: beta = %d outside 1..%d", beta, d)
		}
		for _, mu := range mus {
			if mu < 2 {
				return nil, fmt.Errorf("experiments: mu = %d, want >= 2", mu)
			}
		}
		for _, t := range tables {
			got, err := t.Rows(engine.CommSetting{IDs: ids, Dim: d, Alpha: alpha, Beta: beta, Mus: mus})
			if err != nil {
				return nil, err
			}
			for _, r := range got {
				cr := row(r.Protocol, r.Phase, r.Mu, alpha, beta, ids, r.Bits)
				if r.Run != nil {
					cr.Cluster = &BenchOptions{Mode: string(t.mode), Parties: r.Mu, Scheme: r.Run.Scheme, HideProbes: r.Run.HideProbes}
				}
				rows = append(rows, cr)
			}
		}
	}
	return rows, nil
}

// IdentifyFormula is the bytes one identification over rows rows moves
// between the servers of cluster p, by its mode's formula
// (engine.Mode.IdentifyFormula), and the formula's name.
func IdentifyFormula(p *config.Params, rows int) (string, float64) {
	m, err := modes.Of(p)
	if err != nil { // p was checked, so its mode is registered
		panic(err)
	}
	return m.IdentifyFormula(p, rows)
}
