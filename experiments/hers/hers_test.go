package hers

import (
	"testing"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/heidface"
)

// TestIdentifyFindsTheRow: over encrypted columns of 5,000 random
// templates (two groups of 4,096), every probe that is an enrolled
// template comes back as its own row, and Run reports a full result.
func TestIdentifyFindsTheRow(t *testing.T) {
	const n, d = 5000, 512
	p, err := heidface.NewParams(d, 341, 63)
	if err != nil {
		t.Fatal(err)
	}
	sk, pk := heidface.GenKeys(p)
	h, key := heidface.NewHERS(p, pk), heidface.NewKey(p, sk)
	data := experiments.RandomTemplates(n, d, 3)
	var db []*heidface.HERSGroup
	for lo := 0; lo < n; lo += p.N() {
		var rows [][]int64
		for i := lo; i < min(n, lo+p.N()); i++ {
			rows = append(rows, h.Quantize(data[i*d:(i+1)*d]))
		}
		g, err := h.Encrypt(rows)
		if err != nil {
			t.Fatal(err)
		}
		db = append(db, g)
	}
	for _, row := range []int{0, 17, 4095, 4096, n - 1} {
		got, err := hersIdentify(p, h, key, db, n, h.Quantize(data[row*d:(row+1)*d]))
		if err != nil || got != row {
			t.Fatalf("probe row %d: best %d (%v)", row, got, err)
		}
	}
	res, err := Run(experiments.BenchOptions{IDs: 300, Queries: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "hers" || res.GroupRows != p.N() || res.IdentifyP50 <= 0 || res.BytesPerIdent != float64(p.CiphertextBytes()) || res.ShareMB <= 0 {
		t.Fatalf("result %+v", res)
	}
}
