package heidface

import (
	"fmt"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// GenKeys draws a secret key and its public key (at the key server).
func GenKeys(p *BGVScheme) (*rlwe.SecretKey, *rlwe.PublicKey) {
	return rlwe.NewKeyGenerator(p.BGV).GenKeyPairNew()
}

// Key is the key server's decryption context. Not safe for concurrent use;
// ShallowCopy per goroutine.
type Key struct {
	P    *BGVScheme
	dec  *rlwe.Decryptor
	ecd  *bgv.Encoder
	pt   *rlwe.Plaintext
	buf  []uint64
	bufM []uint64
}

// NewKey returns the decryption context for sk.
func NewKey(p *BGVScheme, sk *rlwe.SecretKey) *Key {
	k := &Key{P: p, dec: rlwe.NewDecryptor(p.BGV, sk), ecd: bgv.NewEncoder(p.BGV)}
	k.init()
	return k
}

func (k *Key) init() {
	k.pt = bgv.NewPlaintext(k.P.BGV, k.P.BGV.MaxLevel())
	k.pt.IsBatched = false
	k.buf = make([]uint64, k.P.N())
	k.bufM = make([]uint64, k.P.N())
}

// ShallowCopy returns a copy sharing the key but no buffers.
func (k *Key) ShallowCopy() *Key {
	c := &Key{P: k.P, dec: k.dec.ShallowCopy(), ecd: k.ecd.ShallowCopy()}
	c.init()
	return c
}

// Scores decrypts one group's (ct+, ct-) and writes the score of group row
// r into scores[r] (len GroupRows): Decode of the paper, digit by digit.
// The scores must never leave the key server.
func (k *Key) Scores(ctPlus, ctMinus *rlwe.Ciphertext, scores []int) error {
	p := k.P
	if len(scores) < p.GroupRows() {
		return fmt.Errorf("heidface: score buffer of %d, want %d", len(scores), p.GroupRows())
	}
	for i, ct := range []*rlwe.Ciphertext{ctPlus, ctMinus} {
		if ct == nil || ct.Degree() != 1 || ct.Level() != p.BGV.MaxLevel() || ct.Value[0].N() != p.N() {
			return fmt.Errorf("heidface: malformed inner-product ciphertext")
		}
		k.dec.Decrypt(ct, k.pt)
		out := k.buf
		if i == 1 {
			out = k.bufM
		}
		if err := k.ecd.Decode(k.pt, out); err != nil {
			return err
		}
	}
	e := p.Enc
	mask := e.P - 1
	n := p.N()
	for c := 0; c < n; c++ {
		a, b := k.buf[c], k.bufM[c]
		for i := 0; i < e.M; i++ {
			scores[i*n+c] = int(a&mask) - int(b&mask)
			a >>= uint(e.LogP)
			b >>= uint(e.LogP)
		}
	}
	return nil
}
