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
// partner: its RSA private keys, each with its certificate (several while
// a key is rotated), found by the certificate's thumbprint.
type DataShareKeys struct {
	keys []shareKey
}

type shareKey struct {
	thumb [thumbprintSize]byte
	priv  *rsa.PrivateKey
}

// LoadDataShareKeys reads PEM files, each holding one RSA private key
// (PKCS#8 or PKCS#1) and its certificate: the ABIS partner's key pair as
// MOSIP's partner management knows it (from its .p12: `openssl pkcs12
// -in cbeff.p12 -nodes -out pair.pem`).
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

// Add takes one key pair in PEM: an RSA private key and the certificate
// of its public key.
func (k *DataShareKeys) Add(pemBytes []byte) error {
	var priv *rsa.PrivateKey
	var cert *x509.Certificate
	for rest := pemBytes; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		switch blk.Type {
		case "PRIVATE KEY":
			key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return fmt.Errorf("private key: %w", err)
			}
			rk, ok := key.(*rsa.PrivateKey)
			if !ok {
				return fmt.Errorf("a %T private key; MOSIP seals data shares to RSA keys", key)
			}
			priv = rk
		case "RSA PRIVATE KEY":
			rk, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
			if err != nil {
				return fmt.Errorf("private key: %w", err)
			}
			priv = rk
		case "CERTIFICATE":
			if cert != nil {
				continue // a chain: the first is the partner's own
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return fmt.Errorf("certificate: %w", err)
			}
			cert = c
		}
	}
	switch {
	case priv == nil:
		return errors.New("no RSA private key (a PEM block PRIVATE KEY or RSA PRIVATE KEY)")
	case cert == nil:
		return errors.New("no certificate (a PEM block CERTIFICATE): its thumbprint names the key in each data share")
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&priv.PublicKey) {
		return errors.New("the certificate is not of the private key")
	}
	k.keys = append(k.keys, shareKey{thumb: sha256.Sum256(cert.Raw), priv: priv})
	return nil
}

// Open returns the document a data share encrypts. Every failure is
// FailCBEFF, saying why: not base64, no key part, a thumbprint of
// another certificate, a key or data that does not open.
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
	var sealed, thumb []byte
	var nonce, aad, ct []byte
	if bytes.HasPrefix(keyPart, []byte(shareVersion)) {
		keyPart = keyPart[len(shareVersion):]
		if len(keyPart) <= thumbprintSize || len(data) < shareAADSize+gcmTagSize {
			return nil, fail(FailCBEFF, "the data share (%s) is too short: a key part of %d bytes, data of %d", shareVersion, len(keyPart), len(data))
		}
		thumb, sealed = keyPart[:thumbprintSize], keyPart[thumbprintSize:]
		aad, ct = data[:shareAADSize], data[shareAADSize:]
		nonce = aad[:shareNonceSize]
	} else {
		sealed = keyPart
		if len(keyPart) > 256 {
			thumb, sealed = keyPart[:thumbprintSize], keyPart[thumbprintSize:]
		}
		if len(data) < legacyNonceSize+gcmTagSize {
			return nil, fail(FailCBEFF, "the data share is too short: data of %d bytes", len(data))
		}
		ct, nonce = data[:len(data)-legacyNonceSize], data[len(data)-legacyNonceSize:]
	}
	candidates := k.keys
	if thumb != nil {
		candidates = nil
		for _, c := range k.keys {
			if bytes.Equal(c.thumb[:], thumb) {
				candidates = append(candidates, c)
			}
		}
		if len(candidates) == 0 {
			return nil, fail(FailCBEFF, "the data share is sealed to the certificate of thumbprint %s, not to this ABIS's (--datashare-key)", hex.EncodeToString(thumb))
		}
	}
	for _, c := range candidates {
		key, err := rsa.DecryptOAEP(sha256.New(), nil, c.priv, sealed, nil)
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
	return nil, fail(FailCBEFF, "the data share's key does not open with this ABIS's private key")
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
// without padding) or with the standard alphabet, ignoring surrounding
// and line-breaking white space.
func shareBase64(doc []byte) ([]byte, error) {
	s := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		case '+':
			return '-'
		case '/':
			return '_'
		}
		return r
	}, string(doc))
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
