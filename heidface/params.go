// Package heidface is the HE mode of idface: IDFace's additively encrypted,
// packed database (paper 4.3) behind one interface, Scheme, with two
// implementations: Lattigo v5 BGV (the default, below) and Paillier with a
// 2048-bit modulus (paillierscheme.go, on package heidface/paillier: the
// paper's other row), plus the HERS baseline (paper 3.1) on BGV.
//
// Scheme. BGV with coefficient encoding and additions only: LogN = 12
// (N = 4096 coefficients), Q = one 60-bit and one 48-bit prime (108 bits,
// no special modulus P because no key is ever switched), ternary secret and
// discrete Gaussian errors (sigma 3.2). The homomorphic encryption
// standard's table gives 128-bit security for N = 4096 up to log QP = 109.
// The plaintext modulus t is the largest prime below Q[0] with t = 1 mod 2N
// (coefficient encoding needs the full ring), just under 2^60, so every
// coefficient carries 59 exact bits: m = floor(59 / log2 p) templates per
// coefficient (9, 8, 6 for beta = 63, 127, 341; the paper's CKKS keeps 50
// bits, m = 8, 7, 5). We chose BGV over CKKS because decoding
// must return the plaintext ternary scores exactly; additions of fresh
// encryptions keep the noise far below the decryption bound (tested at the
// largest beta and fullest packing).
//
// # Security model
//
// The local server holds the public key and ciphertexts only (IND-CPA).
// The key server holds the secret key; it decrypts the two inner-product
// ciphertexts per group and returns only the indices of the best rows above
// the threshold. Decrypted scores must never leave it: with approximate or
// decryption-revealing use, IND-CPA-D attacks can recover the key.
package heidface

import (
	"fmt"
	"math/bits"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"

	"github.com/idface/idface/template"
)

// LogN, the ring degree, and the moduli of the scheme.
const (
	LogN  = 12
	logQ0 = 60 // Lattigo's largest modulus size
	logQ1 = 48
)

// BGVScheme is IDFace on Lattigo BGV: the HE parameters for one (d, alpha,
// beta) (heidface.Paillier is the other Scheme).
type BGVScheme struct {
	BGV      bgv.Parameters
	Dim      int
	Alpha    int
	Beta     int
	Enc      template.Encoder // p and m for the slot bits of t
	SlotBits int              // floor(log2 t)
	ctBytes  int              // S_ct, computed once: the engines ask per group
}

// plaintextModulus is the largest prime below q0 congruent to 1 mod 2N.
func plaintextModulus(q0 uint64) (uint64, error) {
	g := ring.NewNTTFriendlyPrimesGenerator(uint64(bits.Len64(q0)), 2<<LogN)
	for range 1000 {
		ps, err := g.NextDownstreamPrimes(1)
		if err != nil {
			return 0, err
		}
		if ps[0] < q0 {
			return ps[0], nil
		}
	}
	return 0, fmt.Errorf("heidface: no plaintext modulus below %d", q0)
}

// NewParams returns the parameters for templates of dimension d enrolled
// with T_alpha and queried with T_beta.
func NewParams(d, alpha, beta int) (*BGVScheme, error) {
	if d < 1 || d > template.MaxDim || alpha < 1 || alpha > d || beta < 1 || beta > d {
		return nil, fmt.Errorf("heidface: d = %d, alpha = %d, beta = %d", d, alpha, beta)
	}
	rp, err := rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: LogN, LogQ: []int{logQ0, logQ1}, NTTFlag: true})
	if err != nil {
		return nil, fmt.Errorf("heidface: parameters: %w", err)
	}
	t, err := plaintextModulus(rp.Q()[0])
	if err != nil {
		return nil, err
	}
	p, err := bgv.NewParameters(rp, t)
	if err != nil {
		return nil, fmt.Errorf("heidface: parameters: %w", err)
	}
	slotBits := bits.Len64(t) - 1
	enc, err := template.NewEncoder(alpha, beta, slotBits)
	if err != nil {
		return nil, err
	}
	ctBytes := rlwe.NewCiphertext(p, 1, p.MaxLevel()).BinarySize()
	return &BGVScheme{BGV: p, Dim: d, Alpha: alpha, Beta: beta, Enc: enc, SlotBits: slotBits, ctBytes: ctBytes}, nil
}

// N is the number of coefficients per plaintext (N_s).
func (p *BGVScheme) N() int { return p.BGV.N() }

// GroupRows is the number of templates one column group holds: N*m.
func (p *BGVScheme) GroupRows() int { return p.N() * p.Enc.M }

// CiphertextBytes is the size of one serialised ciphertext (S_ct).
func (p *BGVScheme) CiphertextBytes() int { return p.ctBytes }

// LogQ is the bit size of the ciphertext modulus.
func (p *BGVScheme) LogQ() float64 { return p.BGV.LogQ() }
