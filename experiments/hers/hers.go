// Package hers is the paper's HERS baseline as a benchmark mode (idface
// bench --mode hers), in this process.
package hers

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/heidface"
)

// Run measures the paper's HERS baseline (section 3.1) in this
// process, on the same scheme as our IDFace (Lattigo BGV, N = 4096, 8-bit
// quantised templates): the N x d matrix encrypted column by column, one
// ciphertext per position for every 4096 identities, and an
// identification of d scalar multiplications and d-1 additions per 4096
// identities plus the decryption of one ciphertext and the search for the
// best score. Both stages run on all cores. The paper's HERS uses CKKS; the
// shape of the work (d ciphertext operations per N identities) is the
// same. Storage and the bytes of one identify (the score ciphertexts to
// the key holder) follow from the number of ciphertexts.
func Run(o experiments.BenchOptions) (*experiments.BenchResult, error) {
	d, alpha, beta, err := config.Weights(o.Dim, o.Alpha, o.Beta)
	if err != nil {
		return nil, err
	}
	if o.Queries == 0 {
		o.Queries = 5
	}
	p, err := heidface.NewParams(d, alpha, beta)
	if err != nil {
		return nil, err
	}
	n := p.N()
	groups := (o.IDs + n - 1) / n
	data := experiments.RandomTemplates(o.IDs+o.Queries, d, o.Seed)
	sk, pk := heidface.GenKeys(p)
	hers, key := heidface.NewHERS(p, pk), heidface.NewKey(p, sk)
	quant := func(i int) []int64 { return hers.Quantize(data[i*d : (i+1)*d]) }

	res := &experiments.BenchResult{Mode: "hers", Scheme: "bgv", GroupRows: n, Parties: 1, IDs: o.IDs, Alpha: alpha, Beta: beta}
	db := make([]*heidface.HERSGroup, groups)
	workers := runtime.GOMAXPROCS(0)
	start := time.Now()
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		h := hers.Copy()
		wg.Go(func() {
			for g := w; g < groups; g += workers {
				rows := make([][]int64, min(n, o.IDs-g*n))
				for i := range rows {
					rows[i] = quant(g*n + i)
				}
				if db[g], errs[w] = h.Encrypt(rows); errs[w] != nil {
					return
				}
				if o.Progress != nil && w == 0 {
					o.Progress(min(o.IDs, (g+1)*n), o.IDs)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("hers: encrypting: %w", err)
		}
	}
	res.EnrollS = time.Since(start).Seconds()

	var lat []float64
	for q := range o.Queries {
		y := quant(o.IDs + q)
		t0 := time.Now()
		if _, err := hersIdentify(p, hers, key, db, o.IDs, y); err != nil {
			return nil, err
		}
		lat = append(lat, experiments.Millis(time.Since(t0)))
	}
	res.SetLatencies(lat)
	ctb := p.CiphertextBytes()
	res.ShareMB = float64(groups*d*ctb) / 1e6
	res.BytesPerIdent = float64(groups * ctb) // one score ciphertext per group to the key holder
	res.FormulaBytes = res.BytesPerIdent
	res.RSSMBPerParty = experiments.RSSMB(os.Getpid()) // the database lives in this process
	res.PlainFloatP50, err = experiments.FloatReference(d, data, o.IDs, o.Queries)
	return res, err
}

// hersIdentify computes every group's encrypted scores, decrypts them and
// returns the best row, on all cores.
func hersIdentify(p *heidface.BGVScheme, hers *heidface.HERS, key *heidface.Key, db []*heidface.HERSGroup, rows int, y []int64) (int, error) {
	workers := runtime.GOMAXPROCS(0)
	best, bestScore := make([]int, workers), make([]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		k := key.ShallowCopy()
		wg.Go(func() {
			best[w], bestScore[w] = -1, -1<<62
			out := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
			scores := make([]int64, p.N())
			for g := w; g < len(db); g += workers {
				if errs[w] = hers.IP(db[g], y, out); errs[w] != nil {
					return
				}
				if errs[w] = k.HERSScores(out, db[g].Rows, scores); errs[w] != nil {
					return
				}
				for i, s := range scores[:db[g].Rows] {
					if s > bestScore[w] {
						best[w], bestScore[w] = g*p.N()+i, s
					}
				}
			}
		})
	}
	wg.Wait()
	b := -1
	for w := range workers {
		if errs[w] != nil {
			return 0, errs[w]
		}
		if best[w] >= 0 && (b < 0 || bestScore[w] > bestScore[b]) {
			b = w
		}
	}
	if b < 0 || best[b] >= rows {
		return 0, fmt.Errorf("hers: no row")
	}
	return best[b], nil
}
