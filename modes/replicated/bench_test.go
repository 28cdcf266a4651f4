package replicated

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/harness/testutil"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// randomPair is a holder's two stores of rows random rows at d = 512
// (benchmark data, not shares).
func randomPair[E additive.Elem](b *testing.B, rows int) pair[E] {
	r := rand.New(rand.NewPCG(3, 3))
	var st [2]*additive.Store[E]
	for k := range st {
		s, err := additive.NewStore[E](512, rows)
		if err != nil {
			b.Fatal(err)
		}
		batch := make([][]E, 0, 4096)
		for i := 0; i < rows; i += len(batch) {
			batch = batch[:0]
			for range min(cap(batch), rows-i) {
				row := make([]E, 512)
				for j := range row {
					row[j] = E(r.Uint32())
				}
				batch = append(batch, row)
			}
			if err := s.PutRows(i, batch); err != nil {
				b.Fatal(err)
			}
		}
		st[k] = s
	}
	return pair[E]{own: st[0], next: st[1]}
}

// BenchmarkHolderQuery is a holder's work per query at a ternary query of
// beta = 63 over IDFACE_BENCH_ROWS rows (default 10^6): the two
// share-score vectors (twice blind mode's column sums), their permutation
// and masks (one permutation of the pairs; separately for comparison), and
// the tagger's tags and digests.
func BenchmarkHolderQuery(b *testing.B) {
	rows := testutil.BenchRows(b)
	benchHolderQuery[uint8](b, rows)
	benchHolderQuery[uint16](b, rows)
}

func benchHolderQuery[E additive.Elem](b *testing.B, rows int) {
	st := randomPair[E](b, rows)
	y := make([]int8, 512)
	r := rand.New(rand.NewPCG(4, 4))
	for _, j := range r.Perm(512)[:63] {
		y[j] = int8(1 - 2*r.IntN(2))
	}
	q, err := additive.DenseQuery(y)
	if err != nil {
		b.Fatal(err)
	}
	own, next := make([]E, rows), make([]E, rows)
	live := make([]uint64, (rows+63)/64)
	for i := range live {
		live[i] = ^uint64(0)
	}
	out := &vectors[E]{View: blindbase.View{Live: live}, own: make([]E, rows), next: make([]E, rows)}
	var sigma additive.Seed
	perm := &additive.Permuter{}
	bits := additive.RingOf[E]().Bits
	name := fmt.Sprintf("rows=%d/k=%d/beta=63", rows, bits)
	b.Run(name+"/score", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := st.score([][]E{own}, [][]E{next}, []*additive.Query{q}, rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(name+"/permute", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := permuteBoth(perm, out, own, next, &sigma, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	// For comparison: the two vectors permuted one after the other.
	b.Run(name+"/permute-separately", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := additive.PermuteMask(perm, out.own, own, live, &sigma, 1, 3); err != nil {
				b.Fatal(err)
			}
			if err := additive.PermuteMask(perm, out.next, next, live, &sigma, 2, 3); err != nil {
				b.Fatal(err)
			}
		}
	})
	tags := make([]byte, 4*rows)
	var key [32]byte
	// A helper's tags of the vector the entry checks, its answer to the
	// decider's fetch of one position, and the digest of its next vector.
	cols, grid := replicated.TagGrid(rows)
	sel, _, err := replicated.TagSelect(crand.Reader, grid, 0)
	if err != nil {
		b.Fatal(err)
	}
	answer := make([]byte, 4*cols)
	b.Run(name+"/tags+answer+digest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := replicated.Tags(tags, out.own, &key); err != nil {
				b.Fatal(err)
			}
			if err := replicated.TagAnswer(answer, tags, cols, sel); err != nil {
				b.Fatal(err)
			}
			replicated.VectorDigest([16]byte{}, 2, bits, additive.ElemBytes(out.next))
		}
	})
}
