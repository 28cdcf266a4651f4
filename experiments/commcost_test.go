package experiments

import (
	"fmt"
	"testing"
)

// The paper's tables to their printed precision (paper Table comp_res).
func TestCommCostReproducesPaper(t *testing.T) {
	rows, err := CommCost(1_000_000, 512, 341, []int{341, 127, 63}, []int{3, 6, 11, 21})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		key := fmt.Sprintf("%s/%s/mu=%d/beta=%d", r.Protocol, r.Phase, r.Mu, r.Beta)
		switch r.Protocol {
		case "2pcface", "mpcface":
			got[key] = fmt.Sprintf("%.2f", r.MiB)
		default:
			got[key] = fmt.Sprintf("%.2f", r.MB)
		}
	}
	for key, want := range map[string]string{
		"2pcface/identify/mu=2/beta=341":               "81.30",
		"2pcface/identify/mu=2/beta=127":               "30.28",
		"2pcface/identify/mu=2/beta=63":                "15.02",
		"mpcface/identify/mu=3/beta=341":               "162.60",
		"mpcface/identify/mu=6/beta=341":               "406.50",
		"mpcface/identify/mu=11/beta=341":              "813.01",
		"mpcface/identify/mu=21/beta=341":              "1626.02",
		"idface-ckks-paper/identify/mu=1/beta=341":     "12.94",
		"idface-ckks-paper/identify/mu=1/beta=127":     "9.24",
		"idface-ckks-paper/identify/mu=1/beta=63":      "8.18",
		"idface-paillier-paper/identify/mu=1/beta=341": "4.41",
		"idface-paillier-paper/identify/mu=1/beta=127": "3.43",
		"idface-paillier-paper/identify/mu=1/beta=63":  "2.93",
		// Ours over Paillier packs as the paper (same m), but a ciphertext
		// modulo n^2 is 512 bytes where the paper counts S_ct = 0.5 KB =
		// 500 bytes: 2.4% more.
		"idface-paillier/identify/mu=1/beta=341": "4.51",
		"idface-paillier/identify/mu=1/beta=127": "3.51",
		"idface-paillier/identify/mu=1/beta=63":  "3.00",
	} {
		if got[key] != want {
			t.Errorf("%s: %s, paper %s", key, got[key], want)
		}
	}
	for _, r := range rows {
		if r.Protocol == "mpcface" && r.Phase == "enroll" && r.Bits/8/1000/float64(r.Mu-1) != 0.128 {
			t.Errorf("MPCFace enrollment per peer: %v KB, paper 0.13", r.Bits/8/1000/float64(r.Mu-1))
		}
	}
}
