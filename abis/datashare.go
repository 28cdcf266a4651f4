package abis

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// MOSIP's encrypted data share, as its key manager makes it
// (CryptomanagerServiceImpl.encrypt) and its mock ABIS opens it
// (CryptoCoreUtil.decryptCbeffData, mosip/mosip-mock-services): the
// document is base64 (URL-safe, padded or not) of
//
//	key part || "#KEY_SPLITTER#" || data part
//
// In the current form the key part is "VER_R2", the SHA-256 thumbprint of
// the ABIS partner's certificate (32 bytes) and the AES key sealed to the
// certificate's RSA key (RSA-OAEP, SHA-256 and MGF1-SHA-256); the data
// part is 32 random bytes of additional data, whose first 12 are the
// nonce, then the AES-GCM ciphertext and its 16-byte tag. In the older
// form the key part is the thumbprint (when it is longer than 256 bytes)
// and the sealed key, and the data part the ciphertext, its tag and a
// 16-byte nonce, with no additional data.
const (
	shareVersion    = "VER_R2"
	shareSplitter   = "#KEY_SPLITTER#"
	thumbprintSize  = sha256.Size
	shareAADSize    = 32
	shareNonceSize  = 12
	legacyNonceSize = 16
	gcmTagSize      = 16
)

// DataShareKeys open the data shares MOSIP encrypted for this ABIS
// partner: its RSA private keys (several while a key is rotated), each
// found by the thumbprint of any certificate of its public key (the
// partner's own, and the one MOSIP's partner management re-signed, to
// which MOSIP seals), else by trying each.
type DataShareKeys struct {
	keys []shareKey
}

type shareKey struct {
	thumbs [][thumbprintSize]byte
	priv   *rsa.PrivateKey
}

// LoadDataShareKeys reads PEM files, each holding one RSA private key
// (PKCS#8 or PKCS#1, not encrypted) and the certificates of its public
// key: the ABIS partner's key pair as MOSIP's partner management knows it
// (from its .p12: `openssl pkcs12 -in partner.p12 -nodes -out pair.pem`,
// then the certificate MOSIP signed for it appended).
func LoadDataShareKeys(paths ...string) (*DataShareKeys, error) {
	k := &DataShareKeys{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("abis: data share key: %w", err)
		}
		if err := k.Add(b); err != nil {
			return nil, fmt.Errorf("abis: data share key %s: %w", p, err)
		}
	}
	if len(k.keys) == 0 {
		return nil, errors.New("abis: no data share key given")
	}
	return k, nil
}

// Add takes one key pair in PEM: an RSA private key and at least one
// certificate of its public key (others, a CA's say, are passed over).
func (k *DataShareKeys) Add(pemBytes []byte) error {
	var priv *rsa.PrivateKey
	var certs []*x509.Certificate
	for rest := pemBytes; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if strings.Contains(blk.Headers["Proc-Type"], "ENCRYPTED") || blk.Type == "ENCRYPTED PRIVATE KEY" {
			return errors.New("an encrypted private key: give it unencrypted (openssl pkcs12 ... -nodes), in a file only the adapter reads")
		}
		var key any
		var err error
		switch blk.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			return errors.New("an EC private key; MOSIP seals data shares to RSA keys")
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return fmt.Errorf("certificate: %w", err)
			}
			certs = append(certs, c)
			continue
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("private key: %w", err)
		}
		rk, ok := key.(*rsa.PrivateKey)
		if !ok {
			return fmt.Errorf("a %T private key; MOSIP seals data shares to RSA keys", key)
		}
		if priv != nil {
			return errors.New("two private keys: give one key pair a file")
		}
		priv = rk
	}
	if priv == nil {
		return errors.New("no RSA private key (a PEM block PRIVATE KEY or RSA PRIVATE KEY)")
	}
	sk := shareKey{priv: priv}
	for _, c := range certs {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.Equal(&priv.PublicKey) {
			sk.thumbs = append(sk.thumbs, sha256.Sum256(c.Raw))
		}
	}
	switch {
	case len(certs) == 0:
		return errors.New("no certificate (a PEM block CERTIFICATE): its thumbprint names the key in each data share")
	case len(sk.thumbs) == 0:
		return errors.New("no certificate is of the private key")
	}
	k.keys = append(k.keys, sk)
	return nil
}

// Open returns the document a data share encrypts. Every failure is
// FailCBEFF, saying why: not base64, no key part, a key or data that does
// not open (sealed to another partner, altered, cut). A share that opens
// was sealed to this partner's public key, by whoever holds that key's
// certificate: the envelope says nothing of who made the document.
func (k *DataShareKeys) Open(doc []byte) ([]byte, error) {
	raw, err := shareBase64(doc)
	if err != nil {
		return nil, fail(FailCBEFF, "the data share is not base64 (an encrypted data share was expected: --datashare-key): %v", err)
	}
	i := bytes.Index(raw, []byte(shareSplitter))
	if i < 0 {
		return nil, fail(FailCBEFF, "the data share has no key part (no %s)", shareSplitter)
	}
	keyPart, data := raw[:i], raw[i+len(shareSplitter):]
	current := bytes.HasPrefix(keyPart, []byte(shareVersion))
	var nonce, aad, ct []byte
	if current {
		keyPart = keyPart[len(shareVersion):]
		if len(data) < shareAADSize+gcmTagSize {
			return nil, fail(FailCBEFF, "the data share (%s) is too short: data of %d bytes", shareVersion, len(data))
		}
		aad, ct = data[:shareAADSize], data[shareAADSize:]
		nonce = aad[:shareNonceSize]
	} else {
		if len(data) < legacyNonceSize+gcmTagSize {
			return nil, fail(FailCBEFF, "the data share is too short: data of %d bytes", len(data))
		}
		ct, nonce = data[:len(data)-legacyNonceSize], data[len(data)-legacyNonceSize:]
	}
	// The key part is the sealed key, after the certificate's thumbprint
	// (always in the current form; in the older one where it is longer than
	// the key's modulus). A share whose thumbprint is none of this
	// partner's certificates is tried with every key, as MOSIP's mock ABIS
	// does: a wrong key fails OAEP.
	var thumb []byte
	type try struct {
		c      shareKey
		sealed []byte
	}
	var known, others []try
	for _, c := range k.keys {
		n := c.priv.Size()
		t := try{c: c}
		switch {
		case len(keyPart) == thumbprintSize+n:
			thumb, t.sealed = keyPart[:thumbprintSize], keyPart[thumbprintSize:]
		case len(keyPart) == n && !current:
			t.sealed = keyPart
		default:
			continue
		}
		if t.sealed != nil && len(keyPart) > n && slices.ContainsFunc(c.thumbs, func(h [thumbprintSize]byte) bool { return bytes.Equal(h[:], thumb) }) {
			known = append(known, t)
		} else {
			others = append(others, t)
		}
	}
	for _, t := range append(known, others...) {
		key, err := rsa.DecryptOAEP(sha256.New(), nil, t.c.priv, t.sealed, nil)
		if err != nil {
			continue
		}
		out, err := openGCM(key, nonce, ct, aad)
		clear(key)
		if err != nil {
			return nil, fail(FailCBEFF, "the data share's data does not open with its key (damaged or altered): %v", err)
		}
		return out, nil
	}
	if thumb != nil {
		return nil, fail(FailCBEFF, "the data share's key (sealed to the certificate of thumbprint %s) does not open with this ABIS's private keys (--datashare-key)", hex.EncodeToString(thumb))
	}
	return nil, fail(FailCBEFF, "the data share's key (a key part of %d bytes) does not open with this ABIS's private keys (--datashare-key)", len(keyPart))
}

func openGCM(key, nonce, ct, aad []byte) ([]byte, error) {
	switch len(key) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("an AES key of %d bytes", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCMWithNonceSize(b, len(nonce))
	if err != nil {
		return nil, err
	}
	return g.Open(nil, nonce, ct, aad)
}

// shareBase64 decodes base64 as MOSIP writes it (URL-safe, with or
// without padding) or with the standard alphabet, ignoring line-breaking
// white space.
func shareBase64(doc []byte) ([]byte, error) {
	s := make([]byte, 0, len(doc))
	for _, c := range doc {
		switch c {
		case ' ', '\t', '\r', '\n':
		case '+':
			s = append(s, '-')
		case '/':
			s = append(s, '_')
		default:
			s = append(s, c)
		}
	}
	s = bytes.TrimRight(s, "=")
	out := make([]byte, base64.RawURLEncoding.DecodedLen(len(s)))
	n, err := base64.RawURLEncoding.Decode(out, s)
	return out[:n], err
}
