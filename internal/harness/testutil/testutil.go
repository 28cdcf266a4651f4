// Package testutil holds helpers shared by the tests and benchmarks of
// several packages: random ternary vectors, rows at the extreme scores,
// the benchmark database size, and configuration members with real
// certificates.
package testutil

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/template"
)

// Member is a configuration member named name, at address addr (none for
// a client) with role role (none for a party), whose certificate is a
// fresh self-signed one, as 'party init' and 'client init' make, and whose
// pin is that certificate's. A server (one with an address) also gets a
// seal key, which the parties of a mode with sealed enrollment need. The
// private keys are dropped: for members whose keys a test needs, generate
// the identity with quicnet.GenerateIdentity (or run the cluster with
// internal/harness/inproc).
func Member(tb testing.TB, name, addr, role string) config.Member {
	tb.Helper()
	id, err := quicnet.GenerateIdentity(name)
	if err != nil {
		tb.Fatal(err)
	}
	m := config.Member{Name: name, Addr: addr, Role: role, Cert: string(id.CertPEM), Pin: id.Pin}
	if addr != "" {
		k, err := seal.GenerateKey(nil)
		if err != nil {
			tb.Fatal(err)
		}
		m.Seal = k.Public().String()
	}
	return m
}

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
