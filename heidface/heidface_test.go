package heidface

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idface/idface/harness/testutil"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/template"
)

func TestParamsSecurityAndPacking(t *testing.T) {
	p, err := NewParams(512, 341, 63)
	if err != nil {
		t.Fatal(err)
	}
	if p.LogQ() > 109 || p.BGV.LogN() != 12 || p.BGV.PCount() != 0 {
		t.Fatalf("log Q = %.1f, LogN = %d, P moduli %d: outside the 128-bit table (N = 4096: log QP <= 109)", p.LogQ(), p.BGV.LogN(), p.BGV.PCount())
	}
	if p.SlotBits != 59 {
		t.Fatalf("slot bits %d", p.SlotBits)
	}
	for _, c := range []struct{ beta, m int }{{63, 9}, {127, 8}, {341, 6}} {
		q, _ := NewParams(512, 341, c.beta)
		if q.Enc.M != c.m {
			t.Errorf("beta = %d: m = %d, want %d", c.beta, q.Enc.M, c.m)
		}
	}
}

// TestDecodedScoresExact fills a whole group (the fullest packing) and
// checks every decoded score equals the plaintext ternary score, with rows
// at the extremes +-min(alpha, beta), at the largest beta of the paper and
// at alpha = beta = d.
func TestDecodedScoresExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ d, alpha, beta int }{{512, 341, 341}, {512, 512, 512}, {512, 341, 63}} {
		t.Run(fmt.Sprintf("alpha=%d/beta=%d", c.alpha, c.beta), func(t *testing.T) {
			if testing.Short() && c.beta != 341 {
				t.Skip("short")
			}
			p, err := NewParams(c.d, c.alpha, c.beta)
			if err != nil {
				t.Fatal(err)
			}
			sk, pk := GenKeys(p)
			local, key := NewBGVLocal(p, pk), NewKey(p, sk)
			y := testutil.RandTernary(r, c.d, c.beta)
			rows := make([]template.Ternary, p.GroupRows())
			for i := range rows {
				switch {
				case i%97 == 0 || i >= len(rows)-p.N(): // every coefficient of the top digit
					rows[i] = testutil.Extreme(r, y, c.alpha, 1)
				case i%89 == 0:
					rows[i] = testutil.Extreme(r, y, c.alpha, -1)
				default:
					rows[i] = testutil.RandTernary(r, c.d, c.alpha)
				}
			}
			g, err := local.EncryptGroup(rows)
			if err != nil {
				t.Fatal(err)
			}
			ctP := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
			ctM := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
			if err := local.IPDB(g, y, ctP, ctM); err != nil {
				t.Fatal(err)
			}
			scores := make([]int, p.GroupRows())
			if err := key.Scores(ctP, ctM, scores); err != nil {
				t.Fatal(err)
			}
			top := min(c.alpha, c.beta)
			for i, z := range rows {
				if want := z.Dot(y); scores[i] != want {
					t.Fatalf("row %d: decoded %d, want %d", i, scores[i], want)
				}
			}
			if scores[0] != top || scores[89] != -top {
				t.Fatalf("extremes decoded as %d and %d, want +-%d", scores[0], scores[89], top)
			}
		})
	}
}

func TestAddRowIntoPartialGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p, _ := NewParams(512, 341, 127)
	sk, pk := GenKeys(p)
	local, key := NewBGVLocal(p, pk), NewKey(p, sk)
	rows := make([]template.Ternary, 10)
	for i := range rows {
		rows[i] = testutil.RandTernary(r, 512, 341)
	}
	g, err := local.EncryptGroup(rows)
	if err != nil {
		t.Fatal(err)
	}
	y := testutil.RandTernary(r, 512, 127)
	added := map[int]template.Ternary{10: testutil.Extreme(r, y, 341, 1), p.N() + 5: testutil.RandTernary(r, 512, 341), p.GroupRows() - 1: testutil.Extreme(r, y, 341, -1)}
	for slot, z := range added {
		if err := local.AddRow(g, slot, z); err != nil {
			t.Fatal(err)
		}
	}
	ctP := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	ctM := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	local.IPDB(g, y, ctP, ctM)
	scores := make([]int, p.GroupRows())
	if err := key.Scores(ctP, ctM, scores); err != nil {
		t.Fatal(err)
	}
	for i := range scores {
		want := 0
		if i < len(rows) {
			want = rows[i].Dot(y)
		} else if z, ok := added[i]; ok {
			want = z.Dot(y)
		}
		if scores[i] != want {
			t.Fatalf("slot %d: %d, want %d", i, scores[i], want)
		}
	}
	if err := local.AddRow(g, p.GroupRows(), rows[0]); err == nil {
		t.Fatal("slot outside the group accepted")
	}
}

// hersFixture encrypts n random quantised templates with the HERS
// baseline and returns what the test and the benchmark compute with.
func hersFixture(tb testing.TB, seed uint64, n int) (*BGVScheme, *HERS, *Key, *HERSGroup, [][]int64) {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	p, err := NewParams(512, 341, 63)
	if err != nil {
		tb.Fatal(err)
	}
	sk, pk := GenKeys(p)
	h, key := NewHERS(p, pk), NewKey(p, sk)
	rows := make([][]int64, n)
	for i := range rows {
		x := make([]float32, 512)
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		rows[i] = h.Quantize(x)
	}
	g, err := h.Encrypt(rows)
	if err != nil {
		tb.Fatal(err)
	}
	return p, h, key, g, rows
}

func TestHERSBaseline(t *testing.T) {
	p, h, key, g, rows := hersFixture(t, 5, 300)
	out := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	q := rows[17]
	if err := h.IP(g, q, out); err != nil {
		t.Fatal(err)
	}
	scores := make([]int64, len(rows))
	if err := key.HERSScores(out, len(rows), scores); err != nil {
		t.Fatal(err)
	}
	for i, x := range rows {
		var want int64
		for j := range x {
			want += x[j] * q[j]
		}
		if scores[i] != want {
			t.Fatalf("row %d: %d, want %d", i, scores[i], want)
		}
	}
}

func TestGroupFileAndHostileCiphertexts(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	p, _ := NewParams(128, 85, 40)
	_, pk := GenKeys(p)
	local := NewBGVLocal(p, pk)
	rows := []template.Ternary{testutil.RandTernary(r, 128, 85), testutil.RandTernary(r, 128, 85)}
	g, err := local.EncryptGroup(rows)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteGroup(&buf, p, testHeader, g); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	h, g2, err := ReadGroup(bytes.NewReader(raw), p, nil)
	if err != nil || h != testHeader {
		t.Fatalf("%+v %v", h, err)
	}
	if !g2.Plus[3].Equal(g.Plus[3]) || !g2.Minus[127].Equal(g.Minus[127]) {
		t.Fatal("group file round trip differs")
	}
	if _, _, err := ReadGroup(bytes.NewReader(raw[:len(raw)/2]), p, nil); err == nil {
		t.Fatal("truncated group file accepted")
	}
	// A flipped bit anywhere is refused: in a coefficient that stays in
	// range only the checksum notices. So are trailing bytes and formats 1
	// and 2; a flipped bit in the header is damage, not another binding.
	for _, at := range []int{20, 40, len(raw) / 2, len(raw) - 5, len(raw) - 1} {
		bad := bytes.Clone(raw)
		bad[at] ^= 1
		if _, _, err := ReadGroup(bytes.NewReader(bad), p, nil); err == nil {
			t.Fatalf("group file with bit %d flipped accepted", at)
		} else if at == 40 && !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("a flipped bit in the header: %v", err)
		}
	}
	if _, _, err := ReadGroup(bytes.NewReader(append(bytes.Clone(raw), 0)), p, nil); err == nil {
		t.Fatal("trailing byte accepted")
	}
	for _, f := range []byte{1, 2} {
		old := bytes.Clone(raw)
		old[7] = f
		if _, _, err := ReadGroup(bytes.NewReader(old), p, nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("format %d;", f)) || !strings.Contains(err.Error(), "earlier idface") {
			t.Fatalf("format %d: %v", f, err)
		}
	}
	// The check sees the header before the body is read.
	refuse := errors.New("not this server's")
	if _, _, err := ReadGroup(bytes.NewReader(raw), p, func(h GroupHeader) error {
		if h != testHeader {
			t.Fatalf("header %+v", h)
		}
		return refuse
	}); !errors.Is(err, refuse) {
		t.Fatalf("check: %v", err)
	}
	ctb, _ := g.Plus[0].MarshalBinary()
	if _, err := p.UnmarshalCiphertext(ctb); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"short":   ctb[:100],
		"garbage": bytes.Repeat([]byte{0xff}, len(ctb)),
		"zeros":   make([]byte, len(ctb)),
	} {
		if _, err := p.UnmarshalCiphertext(b); err == nil {
			t.Errorf("%s ciphertext accepted", name)
		}
	}
}

var testHeader = GroupHeader{Binding: Binding{Cluster: [16]byte{1, 2}, Member: "p1", Mode: "he", Key: [32]byte{3}, Generation: 1}, Index: 2, Slots: 7}

// FuzzReadGroup: no input panics, and a group is returned only for a
// file that passes its checksum.
func FuzzReadGroup(f *testing.F) {
	p, _ := NewParams(4, 2, 2)
	_, pk := GenKeys(p)
	g, _ := NewBGVLocal(p, pk).EncryptGroup(nil)
	var buf bytes.Buffer
	WriteGroup(&buf, p, testHeader, g)
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := ReadGroup(bytes.NewReader(b), p, nil); err == nil && !bytes.Equal(b, buf.Bytes()) {
			// A different file can only pass with a matching checksum:
			// possible in principle (2^-32), so re-encode to be sure.
			h2, g2, _ := ReadGroup(bytes.NewReader(b), p, nil)
			var out bytes.Buffer
			WriteGroup(&out, p, h2, g2)
			if !bytes.Equal(out.Bytes(), b) {
				t.Fatal("accepted a group file that does not re-encode to itself")
			}
		}
	})
}
