package experiments

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/sharing/additive"
)

// KernelPath is the critical path of a blind identification's kernels,
// each timed alone in this process on the cluster's sizes (median of
// reps): one holder scores its shares and permutes and masks them, its
// vector crosses loopback QUIC, the decider sums the holders' vectors and
// takes the top-K (and the best score, in the same pass), the entry maps
// the positions back (the permutation at K points). What an identify
// costs beyond it is processes, messages and scheduling (issue 21's
// target: identify p50 within 1.5x of it).
//
// Each kernel above has every core of the machine. In a cluster on one
// machine the mu holders score and permute at the same time, so each has
// about HolderCores of them (GOMAXPROCS/mu, at least 1): the Shared
// fields time the holder's two kernels so, the rest as above. It is a
// lower bound of what one machine can reach: the holder timed alone
// keeps the whole memory bandwidth and last-level cache, which the
// holders share when they run at once. On a machine per holder the two
// paths are the same.
type KernelPath struct {
	ScoreMs     float64 `json:"score_ms"`
	PermuteMs   float64 `json:"permute_ms"`
	WireMs      float64 `json:"wire_ms"`
	DecideMs    float64 `json:"decide_ms"`
	UnpermuteMs float64 `json:"unpermute_ms"`
	TotalMs     float64 `json:"total_ms"`

	HolderCores     int     `json:"holder_cores"`
	ScoreSharedMs   float64 `json:"score_shared_ms"`
	PermuteSharedMs float64 `json:"permute_shared_ms"`
	SharedTotalMs   float64 `json:"shared_total_ms"`
}

// BlindKernelPath measures KernelPath for cluster p (mode blind or
// replicated's ring) at rows rows with top-K k.
func BlindKernelPath(ctx context.Context, p *config.Params, rows, k, reps int) (*KernelPath, error) {
	switch p.Ring().Bits {
	case 8:
		return blindKernelPath[uint8](ctx, p, rows, k, reps)
	case 16:
		return blindKernelPath[uint16](ctx, p, rows, k, reps)
	}
	return nil, fmt.Errorf("blind kernels: a ring of %d bits", p.Ring().Bits)
}

func blindKernelPath[E additive.Elem](ctx context.Context, p *config.Params, rows, k, reps int) (*KernelPath, error) {
	if rows < 1 || reps < 1 {
		return nil, fmt.Errorf("blind kernels: %d rows, %d reps", rows, reps)
	}
	d, elemSize := p.Dim(), len(additive.ElemBytes(make([]E, 1)))
	st, err := additive.NewStore[E](d, rows)
	if err != nil {
		return nil, err
	}
	// Random rows, as shares are: zero pages would be read from cache.
	raw := make([]byte, d*elemSize)
	for range rows {
		rand.Read(raw)
		if _, err := st.Append(additive.ViewElems[E](raw)); err != nil {
			return nil, err
		}
	}
	// A query of the cluster's weight: beta coordinates of +-1.
	beta := min(p.Beta(), d)
	pos, coef := make([]int32, beta), make([]int8, beta)
	for i := range pos {
		pos[i], coef[i] = int32(i*d/beta), int8(1-2*(i%2))
	}
	q, err := additive.NewQuery(d, pos, coef)
	if err != nil {
		return nil, err
	}
	mu := p.Mu()
	src, dst := make([]E, rows), make([]E, rows)
	vecs := make([][]E, mu)
	for i := range vecs {
		vecs[i] = make([]E, rows)
		rand.Read(additive.ElemBytes(vecs[i]))
	}
	seed, err := additive.NewSeed(nil)
	if err != nil {
		return nil, err
	}
	perm := &additive.Permuter{}
	median := func(f func() error) (float64, error) {
		var ms []float64
		for range reps {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			ms = append(ms, time.Since(t0).Seconds()*1000)
		}
		slices.Sort(ms)
		return ms[len(ms)/2], nil
	}
	var kp KernelPath
	if kp.ScoreMs, err = median(func() error { return st.ScoreSharesParallel(src, q, 0, rows, 0) }); err != nil {
		return nil, err
	}
	if kp.PermuteMs, err = median(func() error { return additive.PermuteMask(perm, dst, src, st.LiveBits(), &seed, 0, mu) }); err != nil {
		return nil, err
	}
	decide := func() error { _, _, _, err := additive.DecideBest(k, p.Threshold(), 0, vecs...); return err } // the decider's one pass
	if kp.DecideMs, err = median(decide); err != nil {
		return nil, err
	}
	positions := make([]int, k)
	for i := range positions {
		positions[i] = i * (rows / k)
	}
	back := make([]int, k)
	if kp.UnpermuteMs, err = median(func() error { return perm.Unpermute(back, positions, &seed, rows) }); err != nil {
		return nil, err
	}
	if kp.WireMs, err = WireFloor(ctx, rows*elemSize, reps); err != nil {
		return nil, err
	}
	kp.TotalMs = kp.ScoreMs + kp.PermuteMs + kp.WireMs + kp.DecideMs + kp.UnpermuteMs

	// The holder's kernels on its share of the cores.
	kp.HolderCores = max(1, runtime.GOMAXPROCS(0)/mu)
	if kp.ScoreSharedMs, err = median(func() error { return st.ScoreSharesParallel(src, q, 0, rows, kp.HolderCores) }); err != nil {
		return nil, err
	}
	shared := &additive.Permuter{Workers: kp.HolderCores}
	if kp.PermuteSharedMs, err = median(func() error { return additive.PermuteMask(shared, dst, src, st.LiveBits(), &seed, 0, mu) }); err != nil {
		return nil, err
	}
	kp.SharedTotalMs = kp.ScoreSharedMs + kp.PermuteSharedMs + kp.WireMs + kp.DecideMs + kp.UnpermuteMs
	return &kp, nil
}
