package paillier

import (
	"bytes"
	"crypto/rand"
	"math/big"
	"sync"
	"testing"
)

var (
	keyOnce sync.Once
	testKey *SecretKey
)

func key(t testing.TB) *SecretKey {
	keyOnce.Do(func() {
		k, err := GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		testKey = k
	})
	return testKey
}

func decrypt(t *testing.T, sk *SecretKey, c []byte) *big.Int {
	t.Helper()
	if err := sk.Pub.CheckCiphertext(new(big.Int).SetBytes(c)); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, ModulusBits/8)
	if err := sk.Decrypt(c, out); err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out)
}

// TestRoundTripAtTheExtremes decrypts 0, 1, n-1, 2^2047 - 1 (the largest
// packed value) and random plaintexts, and checks that the product of two
// ciphertexts decrypts to the sum modulo n.
func TestRoundTripAtTheExtremes(t *testing.T) {
	sk := key(t)
	n := sk.Pub.N
	top := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), ModulusBits-1), big.NewInt(1))
	ms := []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(n, big.NewInt(1)), top}
	for range 4 {
		r, _ := rand.Int(rand.Reader, n)
		ms = append(ms, r)
	}
	cts := make([][]byte, len(ms))
	for i, m := range ms {
		cts[i] = make([]byte, CiphertextBytes)
		if err := sk.Pub.Encrypt(m, rand.Reader, cts[i]); err != nil {
			t.Fatal(err)
		}
		if got := decrypt(t, sk, cts[i]); got.Cmp(m) != 0 {
			t.Fatalf("plaintext %d: decrypted %x, want %x", i, got, m)
		}
	}
	// Fresh randomness: the same plaintext twice gives different ciphertexts.
	again := make([]byte, CiphertextBytes)
	sk.Pub.Encrypt(ms[0], rand.Reader, again)
	if bytes.Equal(again, cts[0]) {
		t.Fatal("two encryptions of 0 are equal")
	}
	for i := range ms {
		for j := range ms {
			a, b := new(big.Int).SetBytes(cts[i]), new(big.Int).SetBytes(cts[j])
			sum := new(big.Int)
			sk.Pub.Add(sum, a, b)
			want := new(big.Int).Add(ms[i], ms[j])
			want.Mod(want, n)
			if got := decrypt(t, sk, sum.FillBytes(make([]byte, CiphertextBytes))); got.Cmp(want) != 0 {
				t.Fatalf("%d + %d: decrypted %x, want %x", i, j, got, want)
			}
		}
	}
}

func TestEncryptRefusesOutOfRange(t *testing.T) {
	sk := key(t)
	out := make([]byte, CiphertextBytes)
	for _, m := range []*big.Int{big.NewInt(-1), sk.Pub.N} {
		if err := sk.Pub.Encrypt(m, rand.Reader, out); err == nil {
			t.Fatalf("encrypted %v", m)
		}
	}
}

func TestKeysParseAndRefuse(t *testing.T) {
	sk := key(t)
	pk, err := ParsePublicKey(sk.Pub.Bytes())
	if err != nil || pk.N.Cmp(sk.Pub.N) != 0 || pk.Hs.Cmp(sk.Pub.Hs) != 0 {
		t.Fatalf("public key round trip: %v", err)
	}
	sk2, err := ParseSecretKey(sk.Bytes(), pk)
	if err != nil {
		t.Fatal(err)
	}
	c := make([]byte, CiphertextBytes)
	pk.Encrypt(big.NewInt(424242), rand.Reader, c)
	if got := decrypt(t, sk2, c); got.Int64() != 424242 {
		t.Fatalf("parsed key decrypts %v", got)
	}
	// Damaged or foreign keys.
	if _, err := ParsePublicKey(sk.Pub.Bytes()[1:]); err == nil {
		t.Fatal("short public key accepted")
	}
	bad := sk.Pub.Bytes()
	bad[ModulusBits/8-1] ^= 1 // n even
	if _, err := ParsePublicKey(bad); err == nil {
		t.Fatal("even n accepted")
	}
	zeroHs := sk.Pub.Bytes()
	clear(zeroHs[ModulusBits/8:])
	if _, err := ParsePublicKey(zeroHs); err == nil {
		t.Fatal("h_s = 0 accepted")
	}
	for _, hs := range []*big.Int{big.NewInt(1), new(big.Int).Sub(sk.Pub.N2, big.NewInt(1))} {
		weak := sk.Pub.Bytes()
		hs.FillBytes(weak[ModulusBits/8:])
		if _, err := ParsePublicKey(weak); err == nil {
			t.Fatalf("h_s = %v accepted: its randomisers are +-1, so 1 + m n is readable without the key", hs)
		}
	}
	skb := sk.Bytes()
	skb[10] ^= 0x40
	if _, err := ParseSecretKey(skb, pk); err == nil {
		t.Fatal("a secret key whose p*q is not n accepted")
	}
	if _, err := ParseSecretKey(skb[:100], pk); err == nil {
		t.Fatal("short secret key accepted")
	}
}

func TestCheckCiphertext(t *testing.T) {
	sk := key(t)
	pk := sk.Pub
	for name, c := range map[string]*big.Int{
		"zero":       new(big.Int),
		"n^2":        new(big.Int).Set(pk.N2),
		"multiple n": new(big.Int).Lsh(pk.N, 3),
	} {
		if err := pk.CheckCiphertext(c); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// TestExactDivision checks the constant-time limb arithmetic against
// math/big: p^-1 mod 2^1024 and low products.
func TestExactDivision(t *testing.T) {
	mod := new(big.Int).Lsh(big.NewInt(1), 64*limbs)
	for range 20 {
		p, _ := rand.Prime(rand.Reader, 1024)
		inv := inverse2k(toLimbs(p.Bytes()))
		want := new(big.Int).ModInverse(p, mod)
		if got := fromLimbs(inv); got.Cmp(want) != 0 {
			t.Fatalf("inverse of %x: %x, want %x", p, got, want)
		}
		k, _ := rand.Int(rand.Reader, p)
		kp := new(big.Int).Mul(k, p)
		kl := toLimbs(kp.Bytes()[max(0, len(kp.Bytes())-128):])
		if got := fromLimbs(mulLow(&kl, &inv)); got.Cmp(k) != 0 {
			t.Fatalf("(k p) p^-1 = %x, want %x", got, k)
		}
	}
}

func fromLimbs(l [limbs]uint64) *big.Int {
	z := new(big.Int)
	for i := limbs - 1; i >= 0; i-- {
		z.Lsh(z, 64)
		z.Or(z, new(big.Int).SetUint64(l[i]))
	}
	return z
}

func BenchmarkEncrypt(b *testing.B) {
	sk := key(b)
	m, _ := rand.Int(rand.Reader, sk.Pub.N)
	out := make([]byte, CiphertextBytes)
	sk.Pub.Encrypt(m, rand.Reader, out) // builds the table
	b.ReportAllocs()
	for b.Loop() {
		sk.Pub.Encrypt(m, rand.Reader, out)
	}
}

func BenchmarkAdd(b *testing.B) {
	sk := key(b)
	x, _ := rand.Int(rand.Reader, sk.Pub.N2)
	y, _ := rand.Int(rand.Reader, sk.Pub.N2)
	ad := sk.Pub.Adder() // as IP_DB sums: scratch of its own
	b.ReportAllocs()
	for b.Loop() {
		ad.Add(x, x, y)
	}
}

func BenchmarkDecrypt(b *testing.B) {
	sk := key(b)
	m, _ := rand.Int(rand.Reader, sk.Pub.N)
	c := make([]byte, CiphertextBytes)
	sk.Pub.Encrypt(m, rand.Reader, c)
	out := make([]byte, ModulusBits/8)
	b.ReportAllocs()
	for b.Loop() {
		sk.Decrypt(c, out)
	}
}
