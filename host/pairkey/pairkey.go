// Package pairkey derives the secret two servers of a cluster share
// without exchanging a message: static-static ECDH on P-256 between one
// server's identity key (its TLS key) and the other's certificate, which
// the cluster configuration pins, through HKDF-SHA256 bound to the cluster
// id and the two names. Servers seal the row-map digests they compare with
// it (engine.Env.SealDigest). No client can compute it: that takes one of
// the two servers' private keys.
package pairkey

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/idface/idface/config"
)

// label separates these keys from any other use of the ECDH secret.
const label = "idface pair key v1"

// Derive returns the key server self shares with every other server of p,
// by name. priv is self's identity key; nil gives no keys (a server built
// without its identity cannot compare digests). Every other server's
// certificate must hold its key: in-process test clusters give every
// member a real identity (inproc.Literal).
func Derive(p *config.Params, self string, priv crypto.PrivateKey) (map[string][32]byte, error) {
	if priv == nil {
		return nil, nil
	}
	ek, ok := priv.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("pairkey: %s's identity key is a %T, not ECDSA P-256: give it a new key ('idface party rotate') and assemble the config again", self, priv)
	}
	mine, err := ek.ECDH()
	if err != nil || mine.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("pairkey: %s's identity key is not on P-256: give it a new key ('idface party rotate') and assemble the config again", self)
	}
	keys := map[string][32]byte{}
	for _, m := range p.Servers() {
		if m.Name == self {
			continue
		}
		pub, err := publicKey(m)
		if err != nil {
			return nil, err
		}
		secret, err := mine.ECDH(pub)
		if err != nil {
			return nil, fmt.Errorf("pairkey: ECDH with %s: %w", m.Name, err)
		}
		if keys[m.Name], err = Key(secret, p.ClusterID(), self, m.Name); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Key is the pair key from an ECDH secret: HKDF-SHA256 with the cluster id
// as salt and the two names, in order, in the info, so that both servers
// derive the same key and no other pair or cluster does.
func Key(secret []byte, cluster [16]byte, a, b string) ([32]byte, error) {
	if b < a {
		a, b = b, a
	}
	var k [32]byte
	out, err := hkdf.Key(sha256.New, secret, cluster[:], label+"\x00"+a+"\x00"+b, len(k))
	if err != nil {
		return k, fmt.Errorf("pairkey: %w", err)
	}
	copy(k[:], out)
	return k, nil
}

// publicKey is the P-256 key of a member's pinned certificate.
func publicKey(m config.Member) (*ecdh.PublicKey, error) {
	blk, _ := pem.Decode([]byte(m.Cert))
	if blk == nil {
		return nil, fmt.Errorf("pairkey: %s's certificate in the cluster config is not PEM", m.Name)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pairkey: %s's certificate: %w", m.Name, err)
	}
	ek, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("pairkey: %s's certificate holds a %T, not an ECDSA P-256 key: give it a new key ('idface party rotate') and assemble the config again", m.Name, c.PublicKey)
	}
	pub, err := ek.ECDH()
	if err != nil || pub.Curve() != ecdh.P256() {
		return nil, fmt.Errorf("pairkey: %s's certificate key is not on P-256: give it a new key ('idface party rotate') and assemble the config again", m.Name)
	}
	return pub, nil
}
