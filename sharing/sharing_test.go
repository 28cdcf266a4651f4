package sharing

import (
	"bytes"
	"fmt"
	"github.com/idface/idface/harness/testutil"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idface/idface/template"
)

// seeded is a deterministic stream for reproducible tests.
func seeded(t testing.TB, seed byte) *bytes.Reader {
	t.Helper()
	return bytes.NewReader(bytes.Repeat([]byte{seed}, 48))
}

func TestGenShareReconstruct(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, d := range []int{128, 192, 256, 500, 512} {
		for _, mu := range []int{2, 3, 6} {
			t.Run(fmt.Sprintf("d=%d/mu=%d", d, mu), func(t *testing.T) {
				z := testutil.RandTernary(r, d, template.DefaultAlpha(d))
				sh, err := GenShare(z, mu, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range sh {
					if err := s.Check(d); err != nil {
						t.Fatalf("share %d: %v", i, err)
					}
				}
				got, err := Reconstruct(sh, d)
				if err != nil {
					t.Fatal(err)
				}
				if got.Dot(z) != z.Weight() || got.Weight() != z.Weight() {
					t.Fatal("reconstruction differs from the template")
				}
				if _, err := Reconstruct(sh[:mu-1], d); err == nil && mu == 2 {
					// One share alone almost surely has overlapping signs.
					t.Log("a single share happened to look ternary")
				}
			})
		}
	}
	if _, err := GenShare(template.NewTernary(8), 1, nil); err == nil {
		t.Error("mu = 1 accepted")
	}
}

// TestShareUniform checks that each of the first mu-1 shares, and the last
// share on its own, are uniform whatever the template: the per-bit frequency
// over many sharings of a fixed (all +1 or sparse) template stays within a
// few standard deviations of 1/2, as does the pairwise agreement of bits.
func TestShareUniform(t *testing.T) {
	const d, trials = 128, 4000
	all := template.NewTernary(d)
	for i := range all.Plus {
		all.Plus[i] = ^uint64(0)
	}
	sparse, _ := template.Transform(append([]float64{1}, make([]float64, d-1)...), 1)
	stream, err := NewStream(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, z := range map[string]template.Ternary{"all-plus": all, "one-nonzero": sparse} {
		for _, mu := range []int{2, 3} {
			for party := 0; party < mu; party++ {
				t.Run(fmt.Sprintf("%s/mu=%d/party=%d", name, mu, party), func(t *testing.T) {
					ones := make([]int, 2*d)
					agree := 0 // bit j == bit j+1, a cheap pairwise check
					sh := make([]Share, mu)
					for i := range sh {
						sh[i] = NewShare(d)
					}
					for range trials {
						if err := GenShareInto(sh, z, stream); err != nil {
							t.Fatal(err)
						}
						s := sh[party]
						for j := 0; j < d; j++ {
							p, m := int(s.Plus[j>>6]>>uint(j&63)&1), int(s.Minus[j>>6]>>uint(j&63)&1)
							ones[j] += p
							ones[d+j] += m
							if j+1 < d && p == int(s.Plus[(j+1)>>6]>>uint((j+1)&63)&1) {
								agree++
							}
						}
					}
					sd := math.Sqrt(trials) / 2
					for j, c := range ones {
						if math.Abs(float64(c)-trials/2) > 5.5*sd { // 2d tests: false alarm ~1e-5
							t.Fatalf("bit %d set %d of %d times", j, c, trials)
						}
					}
					n := float64(trials * (d - 1))
					if math.Abs(float64(agree)-n/2) > 5.5*math.Sqrt(n)/2 {
						t.Fatalf("adjacent bits agree %d of %.0f times", agree, n)
					}
				})
			}
		}
	}
}

func TestStreamDeterministicAndDistinct(t *testing.T) {
	a, _ := NewStream(seeded(t, 1))
	b, _ := NewStream(seeded(t, 1))
	c, _ := NewStream(seeded(t, 2))
	x, y, z := make([]byte, 64), make([]byte, 64), make([]byte, 64)
	a.Read(x)
	b.Read(y)
	c.Read(z)
	if !bytes.Equal(x, y) || bytes.Equal(x, z) {
		t.Fatal("stream not a deterministic function of its seed")
	}
	if _, err := NewStream(bytes.NewReader(make([]byte, 10))); err == nil {
		t.Fatal("short seed accepted")
	}
}

// cluster is mu parties' stores over the same rows, built as the party
// layer will: every party puts its share of row i at index i.
type cluster struct {
	plain  []template.Ternary
	stores []*Store
}

func newCluster(t testing.TB, r *rand.Rand, d, alpha, rows, mu int) *cluster {
	t.Helper()
	c := &cluster{stores: make([]*Store, mu)}
	for p := range c.stores {
		c.stores[p], _ = NewStore(d, 0)
	}
	stream, _ := NewStream(nil)
	for range rows {
		z := testutil.RandTernary(r, d, alpha)
		c.plain = append(c.plain, z)
		var sh []Share
		if mu == 1 {
			sh = []Share{{Plus: z.Plus, Minus: z.Minus}}
		} else {
			var err error
			if sh, err = GenShare(z, mu, stream); err != nil {
				t.Fatal(err)
			}
		}
		for p, s := range c.stores {
			if _, err := s.Append(sh[p]); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// columns returns every party's selected columns over words [w0, w1):
// party 0 as views into its store, the others through a gathered block
// (the wire layout), so both paths are tested.
func (c *cluster) columns(t testing.TB, sel Selection, w0, w1 int) [][][]uint64 {
	cols := make([][][]uint64, len(c.stores))
	for p, s := range c.stores {
		if p == 0 {
			v, err := s.Columns(sel, w0, w1, nil)
			if err != nil {
				t.Fatal(err)
			}
			cols[p] = v
			continue
		}
		block := make([]uint64, (w1-w0)*2*sel.Beta)
		if err := s.Gather(block, sel, w0, w1); err != nil {
			t.Fatal(err)
		}
		cols[p] = BlockColumns(block, 2*sel.Beta, nil)
	}
	return cols
}

// naiveTop is the definition: <T_alpha(x_i), T_beta(y)> for every live row,
// sorted best first with lower rows winning ties.
func naiveTop(plain []template.Ternary, live func(int) bool, y template.Ternary, k, floor int) []Match {
	var all []Match
	for i, z := range plain {
		if s := z.Dot(y); live(i) && s >= floor {
			all = append(all, Match{Row: i, Score: s})
		}
	}
	slices.SortFunc(all, CompareMatches)
	return all[:min(k, len(all))]
}

func TestScoreMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	const d = 512
	for _, ab := range [][2]int{{341, 63}, {341, 127}, {341, 341}, {512, 512}, {63, 63}, {127, 40}} {
		for _, mu := range []int{1, 2, 3} {
			for _, rows := range []int{1, 63, 200, 1000} {
				alpha, beta := ab[0], ab[1]
				t.Run(fmt.Sprintf("alpha=%d/beta=%d/mu=%d/rows=%d", alpha, beta, mu, rows), func(t *testing.T) {
					c := newCluster(t, r, d, alpha, rows, mu)
					for i := 0; i < rows; i += 7 { // deletions
						for _, s := range c.stores {
							if err := s.Delete(i); err != nil {
								t.Fatal(err)
							}
						}
					}
					live := c.stores[0].IsLive
					for q := 0; q < 4; q++ {
						var y template.Ternary
						if q == 0 && rows > 1 { // a genuine: query equal to a live row's top beta
							y = restrict(c.plain[1], beta)
						} else {
							y = testutil.RandTernary(r, d, beta)
						}
						sel := NewSelection(y)
						W := c.stores[0].Words()
						parts := c.columns(t, sel, 0, W)
						for _, k := range []int{1, 5, rows} {
							floor := -beta
							if q == 3 {
								floor = 2
							}
							want := naiveTop(c.plain, live, y, k, floor)
							got, err := ScoreParallel(parts, c.stores[0].LiveWords(0, W), beta, k, floor, 2)
							if err != nil {
								t.Fatal(err)
							}
							if !slices.Equal(got, want) {
								t.Fatalf("k=%d floor=%d: got %v, want %v", k, floor, head(got), head(want))
							}
						}
						// Block-wise streaming in uneven blocks gives the same.
						sc, _ := NewScorer(beta, 3, -beta)
						for w0 := 0; w0 < W; w0 += 3 {
							w1 := min(w0+3, W)
							if err := sc.Add(c.columns(t, sel, w0, w1), w0, c.stores[0].LiveWords(w0, w1)); err != nil {
								t.Fatal(err)
							}
						}
						if want := naiveTop(c.plain, live, y, 3, -beta); !slices.Equal(sc.Result(), want) {
							t.Fatalf("streamed: got %v, want %v", sc.Result(), want)
						}
					}
				})
			}
		}
	}
}

// restrict keeps the first beta nonzeros of z: a query whose score with z is
// exactly beta, the extreme.
func restrict(z template.Ternary, beta int) template.Ternary {
	y := template.NewTernary(z.Dim)
	n := 0
	for j := 0; j < z.Dim && n < beta; j++ {
		if v := z.At(j); v != 0 {
			n++
			if v > 0 {
				y.Plus[j>>6] |= 1 << uint(j&63)
			} else {
				y.Minus[j>>6] |= 1 << uint(j&63)
			}
		}
	}
	return y
}

func head(m []Match) []Match { return m[:min(len(m), 5)] }

func TestStorePutRowDelete(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	s, _ := NewStore(192, 0)
	a := NewShare(192)
	for i := range a.Plus {
		a.Plus[i], a.Minus[i] = r.Uint64(), r.Uint64()
	}
	if err := s.Put(130, a, true); err != nil {
		t.Fatal(err)
	}
	if s.Rows() != 131 || s.Live() != 1 || s.IsLive(0) || !s.IsLive(130) {
		t.Fatalf("rows %d live %d", s.Rows(), s.Live())
	}
	got, _ := s.Row(130)
	if !slices.Equal(got.Plus, a.Plus) || !slices.Equal(got.Minus, a.Minus) {
		t.Fatal("Row does not return what Put stored")
	}
	b := NewShare(192)
	if err := s.Put(130, b, true); err != nil { // overwrite clears old bits
		t.Fatal(err)
	}
	if got, _ := s.Row(130); !slices.Equal(got.Plus, b.Plus) {
		t.Fatal("overwrite kept old bits")
	}
	if err := s.Delete(130); err != nil || s.Live() != 0 {
		t.Fatal("delete failed")
	}
	if err := s.Delete(130); err == nil {
		t.Fatal("double delete accepted")
	}
	if err := s.Put(0, Share{Plus: make([]uint64, 2), Minus: make([]uint64, 3)}, true); err == nil {
		t.Fatal("malformed share accepted")
	}
	bad := NewShare(100)
	bad.Plus[1] = 1 << 40
	if err := bad.Check(100); err == nil {
		t.Fatal("bits past d accepted")
	}
	if err := s.Gather(make([]uint64, 10), Selection{Beta: 1, Cols: []int32{0, 9999}}, 0, 1); err == nil {
		t.Fatal("column out of range accepted")
	}
}

// TestChunkBoundary stores rows on both sides of a chunk boundary and reads
// them back through Row, Gather (which may span chunks) and Columns (which
// must not).
func TestChunkBoundary(t *testing.T) {
	const d = 64
	r := rand.New(rand.NewPCG(6, 7))
	s, _ := NewStore(d, 0)
	edge := ChunkWords * 64
	rows := []int{edge - 65, edge - 1, edge, edge + 1, edge + 70}
	shares := map[int]Share{}
	for _, row := range rows {
		sh := NewShare(d)
		sh.Plus[0], sh.Minus[0] = r.Uint64(), r.Uint64()
		shares[row] = sh
		if err := s.Put(row, sh, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, row := range rows {
		got, _ := s.Row(row)
		if !slices.Equal(got.Plus, shares[row].Plus) || !slices.Equal(got.Minus, shares[row].Minus) {
			t.Fatalf("row %d read back wrong", row)
		}
	}
	sel := Selection{Beta: 1, Cols: []int32{5, d + 9}}
	w0, w1 := ChunkWords-2, ChunkWords+2
	dst := make([]uint64, 2*(w1-w0))
	if err := s.Gather(dst, sel, w0, w1); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		w := row / 64
		if w < w0 || w >= w1 {
			continue
		}
		bit := func(c, j int) uint64 { return dst[c*(w1-w0)+w-w0] >> uint(row%64) & 1 }
		if bit(0, 5) != shares[row].Plus[0]>>5&1 || bit(1, 9) != shares[row].Minus[0]>>9&1 {
			t.Fatalf("gathered bits of row %d differ", row)
		}
	}
	if _, err := s.Columns(sel, w0, w1, nil); err == nil {
		t.Fatal("Columns across a chunk boundary accepted")
	}
	if v, err := s.Columns(sel, ChunkWords, w1, nil); err != nil || len(v[0]) != 2 {
		t.Fatalf("Columns within a chunk: %v", err)
	}
}

// TestUnion: a batch's union holds each selected column once, in order,
// and every query's columns picked out of a union block are its own
// columns of the store, in its order (what it would have scored alone).
func TestUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	const d, rows = 256, 300
	st, err := NewStore(d, rows)
	if err != nil {
		t.Fatal(err)
	}
	for range rows {
		y := testutil.RandTernary(r, d, 100)
		if _, err := st.Append(Share{Plus: y.Plus, Minus: y.Minus}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []int{1, 2, 8, 32} {
		sels := make([]Selection, q)
		for i := range sels {
			sels[i] = NewSelection(testutil.RandTernary(r, d, 1+r.IntN(d)))
		}
		u, idx := Union(sels)
		if !slices.IsSorted(u.Cols) || len(slices.Compact(slices.Clone(u.Cols))) != len(u.Cols) {
			t.Fatalf("q=%d: union columns not sorted and distinct", q)
		}
		W := st.Words()
		block := make([]uint64, W*len(u.Cols))
		if err := st.Gather(block, u, 0, W); err != nil {
			t.Fatal(err)
		}
		cols := BlockColumns(block, len(u.Cols), nil)
		for i, s := range sels {
			want := make([]uint64, W*len(s.Cols))
			if err := st.Gather(want, s, 0, W); err != nil {
				t.Fatal(err)
			}
			got := slices.Concat(Pick(cols, idx[i], nil)...)
			if !slices.Equal(got, want) {
				t.Fatalf("q=%d: query %d's columns out of the union differ from its own", q, i)
			}
		}
		if q == 1 && !slices.Equal(u.Cols, slices.Sorted(slices.Values(sels[0].Cols))) {
			t.Fatal("a batch of one: the union is not the query's columns")
		}
	}
}
