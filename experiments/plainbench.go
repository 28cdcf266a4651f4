package experiments

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idface/idface/baseline"
	"github.com/idface/idface/config"
	"github.com/idface/idface/template"
)

// RunPlainBench measures the non-protected plaintext ternary search in this
// process (mode "plain" of idface bench): enrollment is T_alpha and insertion
// into a one-party column store, identification T_beta plus the same
// scorer the shared modes use; the float32 brute-force search runs on the
// same templates.
func RunPlainBench(o BenchOptions) (*BenchResult, error) {
	d, alpha, beta, err := config.Weights(o.Dim, o.Alpha, o.Beta)
	if err != nil {
		return nil, err
	}
	if o.Queries == 0 {
		o.Queries = 20
	}
	data := RandomTemplates(o.IDs+o.Queries, d, o.Seed)
	res := &BenchResult{Mode: "plain", Parties: 1, IDs: o.IDs, Alpha: alpha, Beta: beta}
	db, err := baseline.NewTernaryDB(d, o.IDs)
	if err != nil {
		return nil, err
	}
	tr, err := template.NewTransformer(d, alpha)
	if err != nil {
		return nil, err
	}
	z := template.NewTernary(d)
	start := time.Now()
	for i := range o.IDs {
		if err := template.Apply(tr, data[i*d:(i+1)*d], z); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if err := db.Add(z); err != nil {
			return nil, err
		}
		if o.Progress != nil && i%65536 == 0 {
			o.Progress(i, o.IDs)
		}
	}
	res.EnrollS = time.Since(start).Seconds()
	qt, err := template.NewTransformer(d, beta)
	if err != nil {
		return nil, err
	}
	y := template.NewTernary(d)
	var lat []float64
	for q := range o.Queries {
		t0 := time.Now()
		if err := template.Apply(qt, data[(o.IDs+q)*d:(o.IDs+q+1)*d], y); err != nil {
			return nil, err
		}
		if _, err := db.Search(y, 1); err != nil {
			return nil, err
		}
		lat = append(lat, Millis(time.Since(t0)))
	}
	res.SetLatencies(lat)
	res.ShareMB = float64(2*d*template.Words(o.IDs)*8) / 1e6
	res.PlainFloatP50, err = FloatReference(d, data, o.IDs, o.Queries)
	res.Complete()
	return res, err
}

// SizeLabel formats a database size as a power of two when it is one.
func SizeLabel(n int) string {
	for k := 0; k < 40; k++ {
		if n == 1<<k {
			return "2^" + strconv.Itoa(k)
		}
	}
	return strconv.Itoa(n)
}
