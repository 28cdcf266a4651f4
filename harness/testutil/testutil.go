// Package testutil holds helpers shared by the tests and benchmarks of
// several packages: random ternary vectors, rows at the extreme scores
// and the benchmark database size. It imports nothing of the module above
// template, so the sharing packages' tests can use it (configuration
// members: harness/members).
package testutil

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/idface/idface/template"
)

// RandTernary draws a uniformly random vector of Z^d_a (test data only).
func RandTernary(r *rand.Rand, d, a int) template.Ternary {
	t := template.NewTernary(d)
	for _, j := range r.Perm(d)[:a] {
		if r.IntN(2) == 0 {
			t.Plus[j>>6] |= 1 << uint(j&63)
		} else {
			t.Minus[j>>6] |= 1 << uint(j&63)
		}
	}
	return t
}

// Extreme returns a row of weight alpha whose score with y is
// sign*min(alpha, weight(y)).
func Extreme(r *rand.Rand, y template.Ternary, alpha int, sign int8) template.Ternary {
	x := template.NewTernary(y.Dim)
	n := 0
	var free []int
	for j := 0; j < y.Dim; j++ {
		switch v := y.At(j) * sign; {
		case v != 0 && n < alpha:
			n++
			if v > 0 {
				x.Plus[j>>6] |= 1 << uint(j&63)
			} else {
				x.Minus[j>>6] |= 1 << uint(j&63)
			}
		case v == 0:
			free = append(free, j)
		}
	}
	r.Shuffle(len(free), func(i, k int) { free[i], free[k] = free[k], free[i] })
	for _, j := range free[:alpha-n] {
		x.Plus[j>>6] |= 1 << uint(j&63)
	}
	return x
}

// BenchRows is the database size of the large benchmarks: 1,000,000 by
// default, IDFACE_BENCH_ROWS to override (CI uses a small value).
func BenchRows(b *testing.B) int {
	if v := os.Getenv("IDFACE_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("IDFACE_BENCH_ROWS=%q: want a positive integer", v)
		}
		return n
	}
	return 1_000_000
}
