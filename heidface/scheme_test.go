package heidface

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/idface/idface/harness/testutil"
	"github.com/idface/idface/template"
)

// schemeKeys draws a key pair of s, or fails the test.
func schemeKeys(t testing.TB, s Scheme) (sk, pk []byte) {
	t.Helper()
	sk, pk, err := s.GenKeys()
	if err != nil {
		t.Fatal(err)
	}
	return sk, pk
}

// TestSchemesExact runs both schemes through the interface the engines
// use: a full group whose rows sit at the extremes +-min(alpha, beta) in
// every digit position, then deltas into a partly filled group, a group
// file round trip, and the zero group; every decoded score must equal the
// plaintext ternary score.
func TestSchemesExact(t *testing.T) {
	r := mrand.New(mrand.NewPCG(5, 6))
	for _, c := range []struct {
		scheme         string
		d, alpha, beta int
		wantM          int
	}{
		{"paillier", 512, 341, 63, 341}, {"paillier", 512, 341, 127, 292}, {"paillier", 512, 341, 341, 227},
		{"paillier", 512, 512, 512, 204}, {"bgv", 512, 341, 63, 9},
	} {
		t.Run(fmt.Sprintf("%s/alpha=%d/beta=%d", c.scheme, c.alpha, c.beta), func(t *testing.T) {
			if testing.Short() && c.beta != 341 {
				t.Skip("short")
			}
			s, err := New(c.scheme, c.d, c.alpha, c.beta)
			if err != nil {
				t.Fatal(err)
			}
			if s.Encoder().M != c.wantM || s.Name() != c.scheme {
				t.Fatalf("%s m = %d, want %d", s.Name(), s.Encoder().M, c.wantM)
			}
			sk, pk := schemeKeys(t, s)
			if err := s.CheckKeyPair(sk, pk); err != nil {
				t.Fatal(err)
			}
			enc, err := s.NewEncryptor(pk)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := s.NewDecryptor(sk, pk)
			if err != nil {
				t.Fatal(err)
			}
			y := testutil.RandTernary(r, c.d, c.beta)
			gr := s.GroupRows()
			rows := make([]template.Ternary, gr)
			for i := range rows {
				switch {
				case i%7 == 0 || i == gr-1: // the top digit too
					rows[i] = testutil.Extreme(r, y, c.alpha, 1)
				case i%5 == 0 || i == gr-2:
					rows[i] = testutil.Extreme(r, y, c.alpha, -1)
				default:
					rows[i] = testutil.RandTernary(r, c.d, c.alpha)
				}
			}
			// Two deltas: the first half of the slots, then the rest.
			half := gr / 2
			slots := make([]int, gr)
			for i := range slots {
				slots[i] = i
			}
			g, err := enc.Delta(slots[:half], rows[:half])
			if err != nil {
				t.Fatal(err)
			}
			d2, err := enc.Delta(slots[half:], rows[half:])
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Add(d2); err != nil {
				t.Fatal(err)
			}
			// Through a group file, as the local server keeps it.
			var buf bytes.Buffer
			if err := s.WriteGroup(&buf, testHeader, g); err != nil {
				t.Fatal(err)
			}
			var h GroupHeader
			h, g, err = s.ReadGroup(bytes.NewReader(buf.Bytes()), nil)
			if err != nil || h != testHeader {
				t.Fatalf("%+v %v", h, err)
			}
			out := make([]byte, 2*s.CiphertextBytes())
			if err := enc.Copy().IPDB(g, y, out); err != nil {
				t.Fatal(err)
			}
			scores := make([]int, gr)
			if err := dec.Copy().Scores(out, scores); err != nil {
				t.Fatal(err)
			}
			top := min(c.alpha, c.beta)
			for i, z := range rows {
				if want := z.Dot(y); scores[i] != want {
					t.Fatalf("row %d: decoded %d, want %d", i, scores[i], want)
				}
			}
			if scores[0] != top || scores[5] != -top || scores[gr-1] != top {
				t.Fatalf("extremes decoded as %d, %d, %d; want +-%d", scores[0], scores[5], scores[gr-1], top)
			}
			// A batch of three queries (y among them, twice) gives each
			// exactly IPDB's ciphertexts, and so its scores.
			ys := []template.Ternary{testutil.RandTernary(r, c.d, c.beta), y, y}
			outs := make([][]byte, len(ys))
			for i := range outs {
				outs[i] = make([]byte, len(out))
			}
			if err := enc.IPDBBatch(g, ys, outs[:2]); err == nil {
				t.Fatal("a batch of 3 queries took 2 outputs")
			}
			if err := enc.Copy().IPDBBatch(g, ys, outs); err != nil {
				t.Fatal(err)
			}
			for q, yq := range ys {
				alone := make([]byte, len(out))
				if err := enc.IPDB(g, yq, alone); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(outs[q], alone) {
					t.Fatalf("query %d of the batch: ciphertexts differ from IPDB's", q)
				}
				if err := dec.Scores(outs[q], scores); err != nil {
					t.Fatal(err)
				}
				for i, z := range rows {
					if want := z.Dot(yq); scores[i] != want {
						t.Fatalf("query %d of the batch, row %d: decoded %d, want %d", q, i, scores[i], want)
					}
				}
			}
			// The zero group decodes to zeros, alone and in a batch.
			if err := enc.IPDBBatch(nil, ys[:2], outs[:2]); err != nil {
				t.Fatal(err)
			}
			for _, o := range outs[:2] {
				if err := dec.Scores(o, scores); err != nil {
					t.Fatal(err)
				}
				for i, sc := range scores[:gr] {
					if sc != 0 {
						t.Fatalf("zero group in a batch: row %d decoded %d", i, sc)
					}
				}
			}
			if err := enc.IPDB(nil, y, out); err != nil {
				t.Fatal(err)
			}
			if err := dec.Scores(out, scores); err != nil {
				t.Fatal(err)
			}
			for i, sc := range scores[:gr] {
				if sc != 0 {
					t.Fatalf("zero group: row %d decoded %d", i, sc)
				}
			}
			// A slot outside the group or used twice is refused.
			if _, err := enc.Delta([]int{gr}, rows[:1]); err == nil {
				t.Fatal("slot outside the group accepted")
			}
			if _, err := enc.Delta([]int{1, 1}, rows[:2]); err == nil {
				t.Fatal("slot used twice accepted")
			}
		})
	}
}

// TestPaillierRefusesDamageAndForeignKeys: a damaged group file, a file of
// the other scheme, ciphertexts that are not units, and a key pair whose
// halves do not belong together are all refused.
func TestPaillierRefusesDamageAndForeignKeys(t *testing.T) {
	r := mrand.New(mrand.NewPCG(7, 8))
	s, _ := New("paillier", 64, 42, 20)
	sk, pk := schemeKeys(t, s)
	enc, _ := s.NewEncryptor(pk)
	g, err := enc.Delta([]int{0, 3}, []template.Ternary{testutil.RandTernary(r, 64, 42), testutil.RandTernary(r, 64, 42)})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	s.WriteGroup(&buf, testHeader, g)
	raw := buf.Bytes()
	for _, at := range []int{9, 30, 100, len(raw) / 2, len(raw) - 1} {
		bad := bytes.Clone(raw)
		bad[at] ^= 1
		if _, _, err := s.ReadGroup(bytes.NewReader(bad), nil); err == nil {
			t.Fatalf("group file with byte %d changed accepted", at)
		}
	}
	if _, _, err := s.ReadGroup(bytes.NewReader(raw[:len(raw)-3]), nil); err == nil {
		t.Fatal("truncated group file accepted")
	}
	old := bytes.Clone(raw)
	old[7] = 1
	if _, _, err := s.ReadGroup(bytes.NewReader(old), nil); err == nil || !strings.Contains(err.Error(), "format 1;") {
		t.Fatalf("Paillier group file format 1: %v", err)
	}
	bgv, _ := NewParams(64, 42, 20)
	_, bpk := GenKeys(bgv)
	bg, _ := NewBGVLocal(bgv, bpk).EncryptGroup(nil)
	var bbuf bytes.Buffer
	WriteGroup(&bbuf, bgv, testHeader, bg)
	if _, _, err := s.ReadGroup(bytes.NewReader(bbuf.Bytes()), nil); err == nil || !strings.Contains(err.Error(), "BGV") {
		t.Fatalf("a BGV group file in a Paillier cluster: %v", err)
	}

	dec, _ := s.NewDecryptor(sk, pk)
	scores := make([]int, s.GroupRows())
	ctb := s.CiphertextBytes()
	zero := make([]byte, 2*ctb)
	if err := dec.Scores(zero, scores); err == nil {
		t.Fatal("zero ciphertexts decrypted")
	}
	ones := bytes.Repeat([]byte{0xff}, 2*ctb) // >= n^2
	if err := dec.Scores(ones, scores); err == nil {
		t.Fatal("ciphertexts above n^2 decrypted")
	}
	if err := dec.Scores(zero[:ctb], scores); err == nil {
		t.Fatal("one ciphertext decrypted as a pair")
	}
	sk2, pk2 := schemeKeys(t, s)
	if err := s.CheckKeyPair(sk2, pk); err == nil {
		t.Fatal("a secret key with another public key passed")
	}
	if err := s.CheckKeyPair(sk, pk2); err == nil {
		t.Fatal("a public key with another secret key passed")
	}
	if err := s.CheckPublicKey(pk[:10]); err == nil {
		t.Fatal("short public key accepted")
	}
}
