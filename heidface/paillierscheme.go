package heidface

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	"runtime"
	"sync"

	"github.com/idface/idface/heidface/paillier"
	"github.com/idface/idface/template"
)

// Paillier is IDFace over Paillier with a 2048-bit modulus (the paper's
// 112-bit setting): a plaintext is one integer below n, so M =
// floor(2047 / log2 p) templates share it (341, 292, 227 for beta = 63,
// 127, 341, as the paper's m), and a column group holds M rows: 2d
// ciphertexts of 512 bytes. Sums of ciphertexts are products modulo n^2.
type Paillier struct {
	Dim, Alpha, Beta int
	Enc              template.Encoder
}

// NewPaillier returns the Paillier scheme for (d, alpha, beta).
func NewPaillier(d, alpha, beta int) (*Paillier, error) {
	if d < 1 || d > template.MaxDim || alpha < 1 || alpha > d || beta < 1 || beta > d {
		return nil, fmt.Errorf("heidface: d = %d, alpha = %d, beta = %d", d, alpha, beta)
	}
	lp := template.LogBase(alpha, beta)
	// Every digit stays below 2^(M lp) <= 2^2047 < n: sums never wrap.
	enc := template.Encoder{Alpha: alpha, Beta: beta, LogP: lp, P: 1 << uint(lp), M: (paillier.ModulusBits - 1) / lp}
	return &Paillier{Dim: d, Alpha: alpha, Beta: beta, Enc: enc}, nil
}

func (s *Paillier) Name() string              { return "paillier" }
func (s *Paillier) Encoder() template.Encoder { return s.Enc }
func (s *Paillier) GroupRows() int            { return s.Enc.M }
func (s *Paillier) CiphertextBytes() int      { return paillier.CiphertextBytes }

// Describe names the parameters for a log line.
func (s *Paillier) Describe() []any {
	return []any{"scheme", "paillier", "n_bits", paillier.ModulusBits, "m", s.Enc.M}
}

// GenKeys draws two 1024-bit primes from crypto/rand.
func (s *Paillier) GenKeys() (sk, pk []byte, err error) {
	k, err := paillier.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	return k.Bytes(), k.Pub.Bytes(), nil
}

// CheckPublicKey parses a public key.
func (s *Paillier) CheckPublicKey(pk []byte) error {
	_, err := paillier.ParsePublicKey(pk)
	return err
}

// CheckKeyPair verifies p*q = n and that sk decrypts what pk encrypts.
func (s *Paillier) CheckKeyPair(skb, pkb []byte) error {
	d, err := s.newDecryptor(skb, pkb)
	if err != nil {
		return err
	}
	want, err := rand.Int(rand.Reader, d.sk.Pub.N)
	if err != nil {
		return err
	}
	ct := make([]byte, paillier.CiphertextBytes)
	if err := d.sk.Pub.Encrypt(want, rand.Reader, ct); err != nil {
		return err
	}
	if err := d.sk.Decrypt(ct, d.pt); err != nil {
		return err
	}
	if new(big.Int).SetBytes(d.pt).Cmp(want) != 0 {
		return fmt.Errorf("heidface: the secret key does not decrypt what the public key encrypts: the key files belong to different key pairs")
	}
	return nil
}

// PaillierGroup is a column group: Plus[j] and Minus[j] encrypt X+_j and
// X-_j, whose digit i is row i's bit at position j.
type PaillierGroup struct {
	Plus, Minus []*big.Int
	pk          *paillier.PublicKey // of the encryptor that made it; nil when read from a file
}

// Add multiplies delta's ciphertexts into g's (plaintext addition).
func (g *PaillierGroup) Add(delta EncGroup) error {
	d, ok := delta.(*PaillierGroup)
	if !ok || d.pk == nil || len(d.Plus) != len(g.Plus) {
		return fmt.Errorf("heidface: adding a %T that no Paillier encryptor made to a Paillier group", delta)
	}
	ad := d.pk.Adder()
	for j := range g.Plus {
		ad.Add(g.Plus[j], g.Plus[j], d.Plus[j])
		ad.Add(g.Minus[j], g.Minus[j], d.Minus[j])
	}
	return nil
}

// NewEncryptor returns the local server's context for pk.
func (s *Paillier) NewEncryptor(pkb []byte) (Encryptor, error) {
	pk, err := paillier.ParsePublicKey(pkb)
	if err != nil {
		return nil, err
	}
	return &paillierEncryptor{s: s, pk: pk, ad: pk.Adder()}, nil
}

type paillierEncryptor struct {
	s    *Paillier
	pk   *paillier.PublicKey
	ad   *paillier.Adder // scratch of IPDB
	a, b big.Int
}

func (e *paillierEncryptor) Copy() Encryptor {
	return &paillierEncryptor{s: e.s, pk: e.pk, ad: e.pk.Adder()}
}

// Delta encrypts the rows' contribution to every one of the 2d columns,
// on all cores.
func (e *paillierEncryptor) Delta(slots []int, zs []template.Ternary) (EncGroup, error) {
	s := e.s
	if err := checkSlots(slots, zs, s.Dim, s.GroupRows()); err != nil {
		return nil, err
	}
	vals := make([]*big.Int, 2*s.Dim) // X+_j at j, X-_j at d+j
	for j := range vals {
		vals[j] = new(big.Int)
	}
	for k, z := range zs {
		bit := slots[k] * s.Enc.LogP
		for j := range s.Dim {
			switch z.At(j) {
			case 1:
				vals[j].SetBit(vals[j], bit, 1)
			case -1:
				vals[s.Dim+j].SetBit(vals[s.Dim+j], bit, 1)
			}
		}
	}
	cts := make([]*big.Int, len(vals))
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			buf := make([]byte, paillier.CiphertextBytes)
			for j := w; j < len(vals); j += workers {
				if err := e.pk.Encrypt(vals[j], rand.Reader, buf); err != nil {
					errs[w] = err
					return
				}
				cts[j] = new(big.Int).SetBytes(buf)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("heidface: encrypting: %w", err)
		}
	}
	return &PaillierGroup{Plus: cts[:s.Dim:s.Dim], Minus: cts[s.Dim:], pk: e.pk}, nil
}

// IPDB multiplies the columns the query selects: ct+ = prod_{y_j=+1} C+_j
// prod_{y_j=-1} C-_j and ct- with C+ and C- swapped, modulo n^2.
func (e *paillierEncryptor) IPDB(g EncGroup, y template.Ternary, out []byte) error {
	s, ctb := e.s, paillier.CiphertextBytes
	if len(out) != 2*ctb {
		return fmt.Errorf("heidface: output of %d bytes, want %d", len(out), 2*ctb)
	}
	if y.Dim != s.Dim {
		return fmt.Errorf("%w: query d = %d", template.ErrDimension, y.Dim)
	}
	if g == nil {
		for i := range 2 {
			if err := e.pk.Encrypt(new(big.Int), rand.Reader, out[i*ctb:(i+1)*ctb]); err != nil {
				return err
			}
		}
		return nil
	}
	pg, ok := g.(*PaillierGroup)
	if !ok || len(pg.Plus) != s.Dim {
		return fmt.Errorf("heidface: %T is not a Paillier group of d = %d", g, s.Dim)
	}
	a, b := e.a.SetInt64(1), e.b.SetInt64(1)
	if n := selectColumns(y, pg.Plus, pg.Minus, func(x, z *big.Int) {
		e.ad.Add(a, a, x)
		e.ad.Add(b, b, z)
	}); n == 0 {
		return fmt.Errorf("heidface: empty query")
	}
	a.FillBytes(out[:ctb])
	b.FillBytes(out[ctb:])
	return nil
}

// IPDBBatch runs IPDB for each query: Paillier's products modulo n^2 are
// bound by the multiplications, not by reading the columns.
func (e *paillierEncryptor) IPDBBatch(g EncGroup, ys []template.Ternary, outs [][]byte) error {
	if len(outs) != len(ys) {
		return fmt.Errorf("heidface: %d outputs for %d queries", len(outs), len(ys))
	}
	for i, y := range ys {
		if err := e.IPDB(g, y, outs[i]); err != nil {
			return err
		}
	}
	return nil
}

// NewDecryptor returns the key server's context.
func (s *Paillier) NewDecryptor(skb, pkb []byte) (Decryptor, error) { return s.newDecryptor(skb, pkb) }

func (s *Paillier) newDecryptor(skb, pkb []byte) (*paillierDecryptor, error) {
	pk, err := paillier.ParsePublicKey(pkb)
	if err != nil {
		return nil, err
	}
	sk, err := paillier.ParseSecretKey(skb, pk)
	if err != nil {
		return nil, err
	}
	return &paillierDecryptor{s: s, sk: sk, pt: make([]byte, paillier.ModulusBits/8), ptM: make([]byte, paillier.ModulusBits/8)}, nil
}

type paillierDecryptor struct {
	s       *Paillier
	sk      *paillier.SecretKey
	pt, ptM []byte
	c       big.Int
}

func (d *paillierDecryptor) Copy() Decryptor {
	return &paillierDecryptor{s: d.s, sk: d.sk.Copy(), pt: make([]byte, len(d.pt)), ptM: make([]byte, len(d.ptM))}
}

// Scores checks both ciphertexts (units modulo n^2), decrypts them and
// subtracts their base-p digits.
func (d *paillierDecryptor) Scores(pair []byte, scores []int) error {
	ctb, e := paillier.CiphertextBytes, d.s.Enc
	if len(pair) != 2*ctb {
		return fmt.Errorf("heidface: %d bytes of ciphertexts, want %d", len(pair), 2*ctb)
	}
	if len(scores) < e.M {
		return fmt.Errorf("heidface: score buffer of %d, want %d", len(scores), e.M)
	}
	for i, pt := range [][]byte{d.pt, d.ptM} {
		c := pair[i*ctb : (i+1)*ctb]
		if err := d.sk.Pub.CheckCiphertext(d.c.SetBytes(c)); err != nil {
			return err
		}
		if err := d.sk.Decrypt(c, pt); err != nil {
			return err
		}
	}
	var a, b [paillier.ModulusBits / 64]uint64
	for i := range a {
		a[i] = binary.BigEndian.Uint64(d.pt[len(d.pt)-8*(i+1):])
		b[i] = binary.BigEndian.Uint64(d.ptM[len(d.ptM)-8*(i+1):])
	}
	mask := e.P - 1
	for i := range e.M {
		scores[i] = int(digit(&a, i*e.LogP, mask)) - int(digit(&b, i*e.LogP, mask))
	}
	return nil
}

// digit reads the bits [o, o + width) of a little-endian number.
func digit(x *[paillier.ModulusBits / 64]uint64, o int, mask uint64) uint64 {
	w, sh := o/64, uint(o%64)
	v := x[w] >> sh
	if sh != 0 && w+1 < len(x) {
		v |= x[w+1] << (64 - sh)
	}
	return v & mask
}

// paillierGroupMagic starts a Paillier group file: "IDPG", format 2
// (format 1 had no binding, GroupHeader, and is refused by name).
var paillierGroupMagic = [8]byte{'I', 'D', 'P', 'G', 0, 0, 0, 2}

// WriteGroup writes a Paillier group under header h:
//
//	"IDPG" 0 0 0 2 | d u32 | header (see writeGroupFile) | 2d ciphertexts (512 bytes big-endian) | CRC-32C u32 of all before
func (s *Paillier) WriteGroup(w io.Writer, h GroupHeader, g EncGroup) error {
	pg, ok := g.(*PaillierGroup)
	if !ok || len(pg.Plus) != s.Dim {
		return fmt.Errorf("heidface: %T is not a Paillier group of d = %d", g, s.Dim)
	}
	return writeGroupFile(w, paillierGroupMagic, s.Dim, h, func(cw io.Writer) error {
		buf := make([]byte, paillier.CiphertextBytes)
		for _, cts := range [2][]*big.Int{pg.Plus, pg.Minus} {
			for _, c := range cts {
				if c.Sign() <= 0 || c.BitLen() > 8*len(buf) {
					return fmt.Errorf("heidface: a Paillier ciphertext out of range")
				}
				c.FillBytes(buf)
				if _, err := cw.Write(buf); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ReadGroup reads a group written by WriteGroup and verifies its
// checksum; check judges the header first.
func (s *Paillier) ReadGroup(r io.Reader, check CheckHeader) (GroupHeader, EncGroup, error) {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<20)}
	h, err := readGroupStart(cr, paillierGroupMagic, s.Dim, check, [4]byte(groupMagic[:4]), "BGV")
	if err != nil {
		return h, nil, err
	}
	g := &PaillierGroup{}
	buf := make([]byte, paillier.CiphertextBytes)
	for i := 0; i < 2*s.Dim; i++ {
		if _, err := io.ReadFull(cr, buf); err != nil {
			return h, nil, fmt.Errorf("heidface: group file ciphertext %d: %w", i, err)
		}
		c := new(big.Int).SetBytes(buf)
		if c.Sign() == 0 {
			return h, nil, fmt.Errorf("heidface: group file ciphertext %d is zero", i)
		}
		if i < s.Dim {
			g.Plus = append(g.Plus, c)
		} else {
			g.Minus = append(g.Minus, c)
		}
	}
	if err := cr.checkTrailer(); err != nil {
		return h, nil, err
	}
	return h, g, nil
}
