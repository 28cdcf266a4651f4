package heidface

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/harness/testutil"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/template"
)

// The HE benchmarks measure one column group; a database of D rows costs
// ceil(D / GroupRows) of each (the closing notes scale them to 1,000,000).

func benchSetup(b *testing.B, beta int) (*BGVScheme, *BGVLocal, *Key, *Group, template.Ternary) {
	r := rand.New(rand.NewPCG(1, uint64(beta)))
	p, err := NewParams(512, 341, beta)
	if err != nil {
		b.Fatal(err)
	}
	sk, pk := GenKeys(p)
	local, key := NewBGVLocal(p, pk), NewKey(p, sk)
	rows := make([]template.Ternary, p.GroupRows())
	for i := range rows {
		rows[i] = testutil.RandTernary(r, 512, 341)
	}
	g, err := local.EncryptGroup(rows)
	if err != nil {
		b.Fatal(err)
	}
	return p, local, key, g, testutil.RandTernary(r, 512, beta)
}

func BenchmarkEncryptGroup(b *testing.B) {
	for _, beta := range []int{63, 341} {
		b.Run(fmt.Sprintf("alpha=341/beta=%d", beta), func(b *testing.B) {
			p, local, _, _, _ := benchSetup(b, beta)
			r := rand.New(rand.NewPCG(2, 2))
			rows := make([]template.Ternary, p.GroupRows())
			for i := range rows {
				rows[i] = testutil.RandTernary(r, 512, 341)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := local.EncryptGroup(rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(p.GroupRows()*b.N)/b.Elapsed().Seconds(), "templates/s")
		})
	}
}

func BenchmarkIPDB(b *testing.B) {
	for _, beta := range []int{63, 127, 341} {
		b.Run(fmt.Sprintf("alpha=341/beta=%d", beta), func(b *testing.B) {
			p, local, _, g, y := benchSetup(b, beta)
			ctP := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
			ctM := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
			b.ReportAllocs()
			for b.Loop() {
				if err := local.IPDB(g, y, ctP, ctM); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*(beta-1)), "ns/add")
		})
	}
}

func BenchmarkKeyScores(b *testing.B) {
	p, local, key, g, y := benchSetup(b, 63)
	ctP := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	ctM := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	local.IPDB(g, y, ctP, ctM)
	scores := make([]int, p.GroupRows())
	b.ReportAllocs()
	for b.Loop() {
		if err := key.Scores(ctP, ctM, scores); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHERS(b *testing.B) {
	p, h, key, g, rows := hersFixture(b, 3, 4096)
	out := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	scores := make([]int64, p.N())
	b.Run("ip/group", func(b *testing.B) {
		for b.Loop() {
			h.IP(g, rows[0], out)
		}
	})
	b.Run("decrypt/group", func(b *testing.B) {
		for b.Loop() {
			key.HERSScores(out, p.N(), scores)
		}
	})
}

// BenchmarkScheme measures one column group of each scheme through the
// interface the engines use: a delta (2d fresh encryptions, the cost of
// enrolling a batch into a group), IP_DB and the key server's Scores.
// Per 10^6 rows multiply by ceil(10^6 / group_rows).
func BenchmarkScheme(b *testing.B) {
	for _, c := range []struct {
		scheme string
		beta   int
	}{{"bgv", 63}, {"paillier", 63}, {"paillier", 127}, {"paillier", 341}} {
		b.Run(fmt.Sprintf("scheme=%s/alpha=341/beta=%d", c.scheme, c.beta), func(b *testing.B) {
			r := rand.New(rand.NewPCG(4, uint64(c.beta)))
			s, err := New(c.scheme, 512, 341, c.beta)
			if err != nil {
				b.Fatal(err)
			}
			sk, pk := schemeKeys(b, s)
			enc, _ := s.NewEncryptor(pk)
			dec, _ := s.NewDecryptor(sk, pk)
			rows := make([]template.Ternary, s.GroupRows())
			slots := make([]int, len(rows))
			for i := range rows {
				rows[i], slots[i] = testutil.RandTernary(r, 512, 341), i
			}
			g, err := enc.Delta(slots, rows)
			if err != nil {
				b.Fatal(err)
			}
			y := testutil.RandTernary(r, 512, c.beta)
			out := make([]byte, 2*s.CiphertextBytes())
			scores := make([]int, s.GroupRows())
			b.Run("delta", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := enc.Delta(slots[:1], rows[:1]); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("ipdb", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := enc.IPDB(g, y, out); err != nil {
						b.Fatal(err)
					}
				}
			})
			enc.IPDB(g, y, out)
			b.Run("scores", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := dec.Scores(out, scores); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(s.GroupRows()), "group_rows")
		})
	}
}

// BenchmarkIPDBBatch is one BGV group summed for Q concurrent queries in
// one IPDBBatch (each selected column read once) beside Q calls of IPDB:
// what a local server gains by merging concurrent identifies' passes.
func BenchmarkIPDBBatch(b *testing.B) {
	for _, beta := range []int{63, 341} {
		p, local, _, g, _ := benchSetup(b, beta)
		r := rand.New(rand.NewPCG(3, uint64(beta)))
		for _, nq := range []int{1, 4, 8} {
			ys := make([]template.Ternary, nq)
			plus, minus := make([]*rlwe.Ciphertext, nq), make([]*rlwe.Ciphertext, nq)
			for i := range ys {
				ys[i] = testutil.RandTernary(r, 512, beta)
				plus[i], minus[i] = rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel()), rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
			}
			for _, batched := range []bool{false, true} {
				b.Run(fmt.Sprintf("alpha=341/beta=%d/queries=%d/batched=%v", beta, nq, batched), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if batched {
							if err := local.IPDBBatch(g, ys, plus, minus); err != nil {
								b.Fatal(err)
							}
							continue
						}
						for i, y := range ys {
							if err := local.IPDB(g, y, plus[i], minus[i]); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportMetric(float64(nq*b.N)/b.Elapsed().Seconds(), "queries/s")
				})
			}
		}
	}
}
