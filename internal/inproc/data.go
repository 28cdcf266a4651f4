package inproc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idface/idface/protocol"
)

// Templates draws n Gaussian templates of dimension d (test data; the same
// seed gives the same templates).
func Templates(n, d int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 0x1dface))
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, d)
		for j := range out[i] {
			out[i][j] = float32(r.NormFloat64())
		}
	}
	return out
}

// Items names templates prefix-0, prefix-1, ... for an enrollment.
func Items(xs [][]float32, prefix string) []protocol.Item {
	var it []protocol.Item
	for i, x := range xs {
		it = append(it, protocol.Item{ID: fmt.Sprintf("%s-%d", prefix, i), Template: x})
	}
	return it
}

// Ctx is a context for one step of a test, at most d long and cancelled
// at the test's cleanup.
func Ctx(t testing.TB, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}
