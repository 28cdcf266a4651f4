// Package paillier is the Paillier cryptosystem that IDFace's Paillier
// variant runs on (paper 4.3, Table comp_res): additively homomorphic
// encryption of integers modulo a 2048-bit n (112-bit security), with
// ciphertexts modulo n^2 (512 bytes).
//
// Choices:
//
//   - g = n + 1, so Enc(m) = (1 + m*n) * r^n mod n^2 needs no exponentiation
//     of the message.
//   - The randomiser r^n is h_s^a (Damgard, Jurik and Nielsen, "A
//     generalization of Paillier's public-key system", IJIS 2010, 4.1): h_s
//     = h^n mod n^2 for h = -x^2 mod n is part of the public key and a is a
//     fresh 1024-bit (|n|/2) exponent. With a fixed-base table of h_s an
//     encryption is 128 multiplications modulo n^2 instead of a 2048-bit
//     exponentiation (25x faster here). Indistinguishability rests on the
//     decisional composite residuosity assumption with the short-exponent
//     variant DJN state there.
//   - Everything that touches the secret key (p, q and what derives from
//     them) is constant time: filippo.io/bigmod (the Go standard library's
//     crypto/internal/fips140/bigmod, published as a module) for modular
//     arithmetic, and a fixed-length limb multiplication for the exact
//     division by p in L_p. math/big is not constant time; it is used only
//     on public values: ciphertexts, n, h_s (the local server's sums and
//     encryptions). Its encryption randomness goes through math/big too: a
//     timing side channel on the local server's host could reveal a, and
//     with it the plaintext, but that host sees every enrolled template in
//     the clear anyway (it encrypts them).
//   - Decryption uses the CRT: c^(p-1) mod p^2 and c^(q-1) mod q^2.
package paillier

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"sync"

	"filippo.io/bigmod"
)

const (
	// ModulusBits is the size of n.
	ModulusBits = 2048
	// CiphertextBytes is the size of a ciphertext (modulo n^2).
	CiphertextBytes = 2 * ModulusBits / 8
	// PublicKeyBytes is the size of a public key: n and h_s.
	PublicKeyBytes = ModulusBits/8 + CiphertextBytes
	// SecretKeyBytes is the size of a secret key: p and q.
	SecretKeyBytes = ModulusBits / 8

	primeBytes = ModulusBits / 16
	limbs      = ModulusBits / 2 / 64 // a prime's 64-bit limbs
	expBits    = ModulusBits / 2      // the randomiser's exponent a
	window     = 8                    // bits of a per table row
)

// PublicKey encrypts and adds. Safe for concurrent use.
type PublicKey struct {
	N, N2 *big.Int
	Hs    *big.Int // h^n mod n^2, the randomiser base

	once  sync.Once
	table [][]*big.Int // table[i][v-1] = Hs^(v * 2^(window*i)) mod n^2
}

// SecretKey decrypts. Nothing in it changes after it is made; Copy exists
// for symmetry with BGV's decryption contexts.
type SecretKey struct {
	Pub        *PublicKey
	p, q       []byte // big-endian, primeBytes each
	pMod, qMod *bigmod.Modulus
	p2, q2     *bigmod.Modulus // p^2, q^2
	nMod       *bigmod.Modulus
	pm1, qm1   []byte      // exponents p-1, q-1
	hp, hq     *bigmod.Nat // (-q)^-1 mod p, (-p)^-1 mod q: 1 / L_p(g^(p-1))
	qInvP      *bigmod.Nat // q^-1 mod p
	qN         *bigmod.Nat // q as a residue mod n
	pInv, qInv [limbs]uint64
}

// GenerateKey draws two 1024-bit primes (crypto/rand.Prime, which since Go
// 1.26 reads the system's CSPRNG whatever reader it is given) and the
// randomiser base from rand, and returns the key pair.
func GenerateKey(rand io.Reader) (*SecretKey, error) {
	for {
		p, err := primeFrom(rand)
		if err != nil {
			return nil, err
		}
		q, err := primeFrom(rand)
		if err != nil {
			return nil, err
		}
		if p.Cmp(q) == 0 {
			continue
		}
		n := new(big.Int).Mul(p, q)
		if n.BitLen() != ModulusBits {
			continue
		}
		hs, err := randomiserBase(rand, n)
		if err != nil {
			return nil, err
		}
		pub, err := newPublicKey(n, hs)
		if err != nil {
			return nil, err
		}
		return newSecretKey(pub, p.FillBytes(make([]byte, primeBytes)), q.FillBytes(make([]byte, primeBytes)))
	}
}

func primeFrom(r io.Reader) (*big.Int, error) {
	p, err := rand.Prime(r, ModulusBits/2)
	if err != nil {
		return nil, fmt.Errorf("paillier: drawing a prime: %w", err)
	}
	return p, nil
}

// randomiserBase returns h^n mod n^2 for h = -x^2 mod n, x random in Z*_n.
func randomiserBase(r io.Reader, n *big.Int) (*big.Int, error) {
	one := big.NewInt(1)
	for {
		x, err := rand.Int(r, n)
		if err != nil {
			return nil, err
		}
		if x.Sign() == 0 || new(big.Int).GCD(nil, nil, x, n).Cmp(one) != 0 {
			continue
		}
		h := new(big.Int).Mul(x, x)
		h.Mod(h, n)
		h.Sub(n, h)
		n2 := new(big.Int).Mul(n, n)
		return h.Exp(h, n, n2), nil
	}
}

func newPublicKey(n, hs *big.Int) (*PublicKey, error) {
	if n.BitLen() != ModulusBits || n.Bit(0) != 1 {
		return nil, errors.New("paillier: n is not an odd 2048-bit number")
	}
	n2 := new(big.Int).Mul(n, n)
	if hs.Sign() <= 0 || hs.Cmp(n2) >= 0 || new(big.Int).GCD(nil, nil, hs, n).Cmp(big.NewInt(1)) != 0 {
		return nil, errors.New("paillier: the randomiser base is not a unit modulo n^2")
	}
	// A base that is +-1 modulo p or q (1 and n^2 - 1 among them) would
	// give randomisers anyone can strip: refused. (A key server could still
	// choose a base of other small order; it holds the secret key anyway.)
	for _, d := range []int64{-1, 1} {
		if new(big.Int).GCD(nil, nil, new(big.Int).Add(hs, big.NewInt(d)), n).Cmp(big.NewInt(1)) != 0 {
			return nil, errors.New("paillier: the randomiser base is +-1 modulo a factor of n: a weak key")
		}
	}
	return &PublicKey{N: n, N2: n2, Hs: hs}, nil
}

// Bytes is the public key's fixed-length form: n || h_s, big-endian.
func (pk *PublicKey) Bytes() []byte {
	b := make([]byte, PublicKeyBytes)
	pk.N.FillBytes(b[:ModulusBits/8])
	pk.Hs.FillBytes(b[ModulusBits/8:])
	return b
}

// ParsePublicKey checks and parses the form written by Bytes.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	if len(b) != PublicKeyBytes {
		return nil, fmt.Errorf("paillier: public key of %d bytes, want %d", len(b), PublicKeyBytes)
	}
	return newPublicKey(new(big.Int).SetBytes(b[:ModulusBits/8]), new(big.Int).SetBytes(b[ModulusBits/8:]))
}

func newSecretKey(pub *PublicKey, p, q []byte) (*SecretKey, error) {
	sk := &SecretKey{Pub: pub, p: p, q: q}
	var err error
	if sk.pMod, err = bigmod.NewModulus(p); err != nil {
		return nil, err
	}
	if sk.qMod, err = bigmod.NewModulus(q); err != nil {
		return nil, err
	}
	if sk.p2, err = bigmod.NewModulusProduct(p, p); err != nil {
		return nil, err
	}
	if sk.q2, err = bigmod.NewModulusProduct(q, q); err != nil {
		return nil, err
	}
	if sk.nMod, err = bigmod.NewModulusProduct(p, q); err != nil {
		return nil, err
	}
	if !sameBytes(sk.nMod.Nat().Bytes(sk.nMod), pub.N.FillBytes(make([]byte, ModulusBits/8))) {
		return nil, errors.New("paillier: p*q is not the public key's n: the key files belong to different key pairs")
	}
	sk.pm1 = minusOne(p)
	sk.qm1 = minusOne(q)
	// L_p(g^(p-1) mod p^2) = (p-1)q = -q mod p for g = n+1; hp is its inverse.
	qModP := bigmod.NewNat().Mod(natOf(q), sk.pMod)
	pModQ := bigmod.NewNat().Mod(natOf(p), sk.qMod)
	var ok bool
	if sk.qInvP, ok = bigmod.NewNat().InverseVarTime(qModP, sk.pMod); !ok { // once, at key load
		return nil, errors.New("paillier: q is not invertible modulo p")
	}
	sk.hp = bigmod.NewNat().ExpandFor(sk.pMod).Sub(qModP, sk.pMod) // -q mod p
	if sk.hp, ok = bigmod.NewNat().InverseVarTime(sk.hp, sk.pMod); !ok {
		return nil, errors.New("paillier: bad key")
	}
	sk.hq = bigmod.NewNat().ExpandFor(sk.qMod).Sub(pModQ, sk.qMod)
	if sk.hq, ok = bigmod.NewNat().InverseVarTime(sk.hq, sk.qMod); !ok {
		return nil, errors.New("paillier: bad key")
	}
	sk.qN = bigmod.NewNat().Mod(natOf(q), sk.nMod)
	sk.pInv = inverse2k(toLimbs(p))
	sk.qInv = inverse2k(toLimbs(q))
	return sk, nil
}

// Bytes is the secret key's form: p || q, big-endian.
func (sk *SecretKey) Bytes() []byte { return append(append([]byte{}, sk.p...), sk.q...) }

// ParseSecretKey parses the form written by Bytes against its public key
// and checks that p*q = n.
func ParseSecretKey(b []byte, pub *PublicKey) (*SecretKey, error) {
	if len(b) != SecretKeyBytes {
		return nil, fmt.Errorf("paillier: secret key of %d bytes, want %d", len(b), SecretKeyBytes)
	}
	p, q := append([]byte{}, b[:primeBytes]...), append([]byte{}, b[primeBytes:]...)
	if p[len(p)-1]&1 == 0 || q[len(q)-1]&1 == 0 || p[0] < 0x80 || q[0] < 0x80 {
		return nil, errors.New("paillier: the secret key's primes are not odd 1024-bit numbers")
	}
	return newSecretKey(pub, p, q)
}

// Copy returns a key for another goroutine (the key material is shared,
// read only).
func (sk *SecretKey) Copy() *SecretKey { c := *sk; return &c }

func natOf(b []byte) *bigmod.Nat {
	m, err := bigmod.NewModulus(append([]byte{0x80}, make([]byte, len(b))...)) // 2^(8 len + 7): any b fits
	if err != nil {
		panic(err)
	}
	n, err := bigmod.NewNat().SetBytes(b, m)
	if err != nil {
		panic(err)
	}
	return n
}

func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// minusOne returns b - 1 for odd b (big-endian): only the last byte changes.
func minusOne(b []byte) []byte {
	c := append([]byte{}, b...)
	c[len(c)-1] &^= 1
	return c
}

// toLimbs reads a big-endian number of at most limbs*8 bytes.
func toLimbs(b []byte) (l [limbs]uint64) {
	for i := range limbs {
		end := len(b) - 8*i
		if end <= 0 {
			break
		}
		var w [8]byte
		start := max(0, end-8)
		copy(w[8-(end-start):], b[start:end])
		l[i] = binary.BigEndian.Uint64(w[:])
	}
	return l
}

// mulLow returns a*b mod 2^(64 limbs), in constant time.
func mulLow(a, b *[limbs]uint64) (z [limbs]uint64) {
	for i := range limbs {
		var carry uint64
		for j := 0; i+j < limbs; j++ {
			hi, lo := bits.Mul64(a[i], b[j])
			lo, c := bits.Add64(lo, z[i+j], 0)
			hi += c
			lo, c = bits.Add64(lo, carry, 0)
			hi += c
			z[i+j], carry = lo, hi
		}
	}
	return z
}

// inverse2k returns p^-1 mod 2^(64 limbs) for odd p by Newton's iteration
// x <- x(2 - p x), which doubles the correct low bits each step (p*p = 1
// mod 8 gives 3 to start); a fixed count of steps, constant time.
func inverse2k(p [limbs]uint64) [limbs]uint64 {
	x := p
	for range 10 { // 3 * 2^10 > 64 limbs bits
		px := mulLow(&p, &x)
		// two = 2 - p x
		var two [limbs]uint64
		var borrow uint64
		two[0], borrow = bits.Sub64(2, px[0], 0)
		for i := 1; i < limbs; i++ {
			two[i], borrow = bits.Sub64(0, px[i], borrow)
		}
		x = mulLow(&x, &two)
	}
	return x
}

// Encrypt returns Enc(m) for 0 <= m < n as a CiphertextBytes big-endian
// ciphertext, with randomness from rand.
func (pk *PublicKey) Encrypt(m *big.Int, rand io.Reader, out []byte) error {
	if m.Sign() < 0 || m.Cmp(pk.N) >= 0 {
		return errors.New("paillier: plaintext outside [0, n)")
	}
	r, err := pk.randomiser(rand)
	if err != nil {
		return err
	}
	c := new(big.Int).Mul(m, pk.N)
	c.Add(c, bigOne)
	c.Mul(c, r)
	c.Mod(c, pk.N2)
	c.FillBytes(out[:CiphertextBytes])
	return nil
}

var bigOne = big.NewInt(1)

// randomiser returns h_s^a mod n^2 for a fresh random exponent a.
func (pk *PublicKey) randomiser(rand io.Reader) (*big.Int, error) {
	pk.once.Do(pk.buildTable)
	var a [expBits / 8]byte
	if _, err := io.ReadFull(rand, a[:]); err != nil {
		return nil, fmt.Errorf("paillier: randomness: %w", err)
	}
	r := big.NewInt(1)
	ad := pk.Adder()
	for i, v := range a { // a is big-endian: byte i weighs 2^(8 (len-1-i))
		if v != 0 {
			ad.Add(r, r, pk.table[len(a)-1-i][v-1])
		}
	}
	return r, nil
}

func (pk *PublicKey) buildTable() {
	rows := expBits / window
	pk.table = make([][]*big.Int, rows)
	base := new(big.Int).Set(pk.Hs)
	for i := range rows {
		row := make([]*big.Int, 1<<window-1)
		row[0] = new(big.Int).Set(base)
		for v := 1; v < len(row); v++ {
			row[v] = new(big.Int).Mul(row[v-1], base)
			row[v].Mod(row[v], pk.N2)
		}
		pk.table[i] = row
		base = new(big.Int).Mul(row[len(row)-1], base) // base^(2^window)
		base.Mod(base, pk.N2)
	}
}

// Add returns a+b as ciphertexts: a*b mod n^2, into dst (which may alias a
// or b). Public values only. Sums of many terms use an Adder.
func (pk *PublicKey) Add(dst, a, b *big.Int) { pk.Adder().Add(dst, a, b) }

// Adder multiplies modulo n^2 with scratch of its own, so that a sum of
// many ciphertexts allocates nothing per term. Not safe for concurrent use.
type Adder struct {
	n2   *big.Int
	t, q big.Int
}

// Adder returns an Adder for this key's ciphertexts.
func (pk *PublicKey) Adder() *Adder { return &Adder{n2: pk.N2} }

// Add sets dst = a*b mod n^2 (the ciphertext of the sum); dst may alias a
// or b.
func (s *Adder) Add(dst, a, b *big.Int) {
	s.t.Mul(a, b)
	s.q.QuoRem(&s.t, s.n2, dst)
}

// CheckCiphertext verifies that c is a unit modulo n^2, as every honest
// ciphertext is: 0 < c < n^2 and gcd(c, n) = 1.
func (pk *PublicKey) CheckCiphertext(c *big.Int) error {
	if c.Sign() <= 0 || c.Cmp(pk.N2) >= 0 {
		return errors.New("paillier: ciphertext outside (0, n^2)")
	}
	if new(big.Int).GCD(nil, nil, c, pk.N).Cmp(bigOne) != 0 {
		return errors.New("paillier: ciphertext shares a factor with n")
	}
	return nil
}

// Decrypt writes the plaintext of the CiphertextBytes big-endian
// ciphertext c into out (ModulusBits/8 bytes, big-endian). Constant time in
// the secret key and the plaintext; the caller checks c first
// (CheckCiphertext).
func (sk *SecretKey) Decrypt(c []byte, out []byte) error {
	if len(c) != CiphertextBytes || len(out) != ModulusBits/8 {
		return errors.New("paillier: wrong ciphertext or plaintext length")
	}
	cn := natOf(c)
	mp := sk.half(cn, sk.p2, sk.pMod, sk.pm1, sk.hp, &sk.pInv)
	mq := sk.half(cn, sk.q2, sk.qMod, sk.qm1, sk.hq, &sk.qInv)
	// CRT: m = mq + q ((mp - mq) q^-1 mod p), which is < n.
	t := bigmod.NewNat().Mod(mq, sk.pMod)
	t = mp.Sub(t, sk.pMod).Mul(sk.qInvP, sk.pMod)
	m := bigmod.NewNat().Mod(t, sk.nMod).Mul(sk.qN, sk.nMod)
	m.Add(bigmod.NewNat().Mod(mq, sk.nMod), sk.nMod)
	copy(out, m.Bytes(sk.nMod))
	return nil
}

// half returns m mod p = L_p(c^(p-1) mod p^2) h_p mod p.
func (sk *SecretKey) half(c *bigmod.Nat, p2, p *bigmod.Modulus, pm1 []byte, h *bigmod.Nat, pInv *[limbs]uint64) *bigmod.Nat {
	x := bigmod.NewNat().Mod(c, p2)
	x = bigmod.NewNat().Exp(x, pm1, p2)
	x.SubOne(p2) // x - 1 = k p exactly, k < p
	xl := toLimbs(x.Bytes(p2))
	k := mulLow(&xl, pInv) // exact division: k = (x - 1) p^-1 mod 2^1024
	var kb [primeBytes]byte
	for i := range limbs {
		binary.BigEndian.PutUint64(kb[primeBytes-8*(i+1):], k[i])
	}
	kn, err := bigmod.NewNat().SetBytes(kb[:], p)
	if err != nil { // k < p always; only a bug gets here
		kn = bigmod.NewNat().ExpandFor(p)
	}
	return kn.Mul(h, p)
}
