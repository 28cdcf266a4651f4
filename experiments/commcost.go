package experiments

import (
	"fmt"
	"math"
	"slices"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blind"
	"github.com/idface/idface/engine/replicated"
	"github.com/idface/idface/heidface"
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
}

func row(proto, phase string, mu, alpha, beta, ids int, bits float64) CommRow {
	return CommRow{Protocol: proto, Phase: phase, Mu: mu, Alpha: alpha, Beta: beta, IDs: ids,
		Bits: bits, MiB: bits / 8 / (1 << 20), MB: bits / 8 / 1e6}
}

// Paper parameters of IDFace (paper Sec. 4.2 and 5.1, Table comp_res):
// CKKS with N_s = 4096 slots, 50 usable bits and S_ct = 132 KB; Paillier with one 2048-bit plaintext
// per ciphertext and S_ct = 0.5 KB (1 KB = 1000 bytes, as the paper).
const (
	ckksSlots    = 4096
	ckksBits     = 50
	ckksCtBytes  = 132_000
	paillierBits = 2048
	paillierCt   = 500
)

// idfaceBits is the paper's identification cost: 2*ceil(D/(N_s*m))*S_ct
// plus log2 D bits for the returned index.
func idfaceBits(ids, slots, m, ctBytes int) float64 {
	groups := (ids + slots*m - 1) / (slots * m)
	return float64(2*groups*ctBytes*8) + math.Ceil(math.Log2(float64(ids)))
}

// CommCost returns the analytic rows for every (beta, mu) asked. Enrollment
// rows count server-to-server bits: GenShare sends 2d bits to each other
// party; in (mu,nu)-IDFace the entry forwards the float32 template (32d bits)
// to each other local server (0 for one local server).
func CommCost(ids, d, alpha int, betas, mus []int) ([]CommRow, error) {
	if ids < 1 || d < 1 || d > template.MaxDim || alpha < 1 || alpha > d {
		return nil, fmt.Errorf("experiments: ids = %d, d = %d, alpha = %d", ids, d, alpha)
	}
	var rows []CommRow
	for _, beta := range betas {
		if beta < 1 || beta > d {
			return nil, fmt.Errorf("experiments: beta = %d outside 1..%d", beta, d)
		}
		ident := float64(2*ids*beta + 2*d)
		rows = append(rows, row("2pcface", "enroll", 2, alpha, beta, ids, float64(2*d)),
			row("2pcface", "identify", 2, alpha, beta, ids, ident))
		for _, mu := range mus {
			if mu < 2 {
				return nil, fmt.Errorf("experiments: mu = %d, want >= 2", mu)
			}
			rows = append(rows, row("mpcface", "enroll", mu, alpha, beta, ids, float64((mu-1)*2*d)),
				row("mpcface", "identify", mu, alpha, beta, ids, float64(mu-1)*ident))
		}
		rows = append(rows,
			row("idface-ckks-paper", "identify", 1, alpha, beta, ids, idfaceBits(ids, ckksSlots, template.PackingFactor(alpha, beta, ckksBits), ckksCtBytes)),
			row("idface-paillier-paper", "identify", 1, alpha, beta, ids, idfaceBits(ids, 1, template.PackingFactor(alpha, beta, paillierBits), paillierCt)))
		k := blindRingBits(alpha, beta)
		for _, mu := range slices.Compact(slices.Sorted(slices.Values(append([]int{2}, mus...)))) {
			rows = append(rows, row("blind", "enroll", mu, alpha, beta, ids, blind.EnrollBits(mu)),
				row("blind", "identify", mu, alpha, beta, ids, blind.IdentifyBits(ids, beta, mu, k)))
		}
		// Replicated: the entry sends each other holder its pair of d k-bit
		// shares (sealed enrollment will send all three pairs through it).
		rows = append(rows, row("replicated", "enroll", 3, alpha, beta, ids, float64(2*2*d*k)),
			row("replicated", "identify", 3, alpha, beta, ids, replicated.IdentifyBits(ids, beta, k)),
			// Hidden probes (--hide-probes --beta beta): the T_beta query,
			// sealed, its cost independent of beta but for the ring.
			row("replicated-hidden", "identify", 3, alpha, beta, ids, replicated.HiddenIdentifyBits(ids, d, k)))
		hp, err := heidface.NewParams(d, alpha, beta)
		if err != nil {
			return nil, err
		}
		pp, err := heidface.NewPaillier(d, alpha, beta)
		if err != nil {
			return nil, err
		}
		rows = append(rows,
			row("idface-he", "enroll", 1, alpha, beta, ids, 0),
			row("idface-he", "identify", 1, alpha, beta, ids, idfaceBits(ids, hp.N(), hp.Enc.M, hp.CiphertextBytes())),
			row("idface-paillier", "identify", 1, alpha, beta, ids, idfaceBits(ids, 1, pp.Enc.M, pp.CiphertextBytes())))
	}
	return rows, nil
}

// blindRingBits is blind mode's k for the ternary gallery and query: the
// smallest ring that holds every score min(alpha, beta) as a signed value.
func blindRingBits(alpha, beta int) int {
	if min(alpha, beta) <= 127 {
		return 8
	}
	return 16
}

// IdentifyFormula is the bytes one identification over rows rows moves
// between the servers of cluster p, by its mode's formula
// (engine.Mode.IdentifyFormula), and the formula's name.
func IdentifyFormula(p *config.Params, rows int) (string, float64) {
	m, err := engine.ModeOf(p)
	if err != nil { // p was checked, so its mode is registered
		panic(err)
	}
	return m.IdentifyFormula(p, rows)
}
