// Package seal encrypts a part of a request to the one server that may
// read it, so that the server relaying the request cannot: HPKE (RFC 9180,
// crypto/hpke) in base mode with the hybrid KEM MLKEM768-X25519 (X-Wing),
// HKDF-SHA256 and AES-256-GCM. The hybrid KEM keeps recorded traffic
// secret if either ML-KEM-768 or X25519 stands, so a template sealed today
// stays sealed when a quantum computer can break X25519.
//
// Every sealed part is bound (HPKE info) to a Binding: the cluster, the
// holder it is for, the mode, and the request or row it belongs to. A part
// sealed for one holder, cluster or row does not open as another's.
//
// # Security model
//
// Base mode authenticates no sender: anyone who knows a holder's public key
// can seal a part to it. The requester's authenticity comes from elsewhere
// (in idface the operator's signature covers a digest of every sealed part,
// protocol.Auth), and this package gives confidentiality and integrity
// against the relaying server and the network.
//
// The private key never leaves the holder's host: a key file (MarshalKey,
// ParseKey) of mode 0600 in its home, with a format header and a checksum.
// The public key travels in the member's public descriptor and the cluster
// configuration as text (PublicKey.String, ParsePublicKey).
package seal

import (
	"bytes"
	"crypto/hpke"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sizes of the suite's parts (draft-ietf-hpke-pq, X-Wing).
const (
	SeedSize      = 32   // a private key
	PublicKeySize = 1216 // ML-KEM-768 encapsulation key + X25519 point
	encSize       = 1120 // ML-KEM-768 ciphertext + X25519 point
	tagSize       = 16   // AES-256-GCM
	// Overhead is what sealing adds to a plaintext.
	Overhead = encSize + tagSize
)

// Suite names the suite in public keys and key files.
const Suite = "mlkem768x25519"

var (
	kem  = hpke.MLKEM768X25519()
	kdf  = hpke.HKDFSHA256()
	aead = hpke.AES256GCM()
)

// ErrOpen is the one error of a part that does not open: damaged, sealed
// to another key, or bound to another holder, cluster, mode or row. The
// causes are not told apart (nothing to learn for whoever sent it).
var ErrOpen = errors.New("seal: the sealed part does not open with this holder's key for this request (damaged, or sealed for another holder, cluster or request)")

// PrivateKey is a holder's key for opening parts.
type PrivateKey struct {
	seed [SeedSize]byte
	k    hpke.PrivateKey
}

// PublicKey is a holder's key for sealing parts to it.
type PublicKey struct{ k hpke.PublicKey }

// GenerateKey makes a private key from rnd (crypto/rand when nil).
func GenerateKey(rnd io.Reader) (*PrivateKey, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var seed [SeedSize]byte
	if _, err := io.ReadFull(rnd, seed[:]); err != nil {
		return nil, fmt.Errorf("seal: drawing a key: %w", err)
	}
	return newPrivateKey(seed)
}

func newPrivateKey(seed [SeedSize]byte) (*PrivateKey, error) {
	k, err := kem.NewPrivateKey(seed[:])
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &PrivateKey{seed: seed, k: k}, nil
}

// Public is the key's public half.
func (k *PrivateKey) Public() *PublicKey { return &PublicKey{k.k.PublicKey()} }

// String encodes a public key for a descriptor: "mlkem768x25519:" and the
// key's bytes in standard base64.
func (p *PublicKey) String() string {
	return Suite + ":" + base64.StdEncoding.EncodeToString(p.k.Bytes())
}

// Equal reports whether two public keys are the same.
func (p *PublicKey) Equal(q *PublicKey) bool {
	return p != nil && q != nil && bytes.Equal(p.k.Bytes(), q.k.Bytes())
}

// maxPublicText bounds a public key's text before decoding.
var maxPublicText = len(Suite) + 1 + base64.StdEncoding.EncodedLen(PublicKeySize)

// ParsePublicKey reads a key written by PublicKey.String.
func ParsePublicKey(s string) (*PublicKey, error) {
	if len(s) > maxPublicText {
		return nil, fmt.Errorf("seal: a public key of %d characters; a %s key has %d", len(s), Suite, maxPublicText)
	}
	suite, b64, ok := strings.Cut(s, ":")
	if !ok || suite != Suite {
		return nil, fmt.Errorf("seal: public key %.24q...: want %q and the key in base64", s, Suite+":")
	}
	b, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(b) != PublicKeySize {
		return nil, fmt.Errorf("seal: the %s public key is not %d bytes of base64", Suite, PublicKeySize)
	}
	k, err := kem.NewPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("seal: public key: %w", err)
	}
	return &PublicKey{k}, nil
}

// Binding is what a sealed part belongs to. Context names the request or
// the row (the caller's canonical bytes: in idface the operator's nonce
// and the digest of the request's ids).
type Binding struct {
	Cluster [16]byte
	Holder  string
	Mode    string
	Context []byte
}

// info is the binding's canonical encoding, the HPKE info: a label, then
// every field with its length, so no two bindings encode alike.
func (b Binding) info() []byte {
	out := []byte("idface seal v1\x00")
	out = append(out, b.Cluster[:]...)
	for _, f := range [][]byte{[]byte(b.Holder), []byte(b.Mode), b.Context} {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

// Seal encrypts plaintext to pub for binding b. The result is Overhead
// bytes longer than plaintext. The KEM's randomness is crypto/rand's.
func Seal(pub *PublicKey, b Binding, plaintext []byte) ([]byte, error) {
	if pub == nil {
		return nil, errors.New("seal: no public key")
	}
	out, err := hpke.Seal(pub.k, kdf, aead, b.info(), plaintext)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return out, nil
}

// Open decrypts a part sealed to k for binding b. A part longer than
// max bytes of plaintext is refused before any work.
func Open(k *PrivateKey, b Binding, sealed []byte, max int) ([]byte, error) {
	if len(sealed) < Overhead || len(sealed)-Overhead > max {
		return nil, fmt.Errorf("seal: a sealed part of %d bytes; this request's part holds %d bytes at most (and %d more of encapsulation and tag)", len(sealed), max, Overhead)
	}
	pt, err := hpke.Open(k.k, kdf, aead, b.info(), sealed)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// Key file: a header line naming the format and suite, the private key in
// base64, and a checksum line (the first 8 bytes of SHA-256 of the header
// and key lines, in hex) so a damaged file is told from a wrong key.
const keyHeader = "idface seal private key v1 " + Suite

// MaxKeyFile bounds a key file before it is read.
const MaxKeyFile = 512

// MarshalKey encodes the private key for its file (mode 0600).
func MarshalKey(k *PrivateKey) []byte {
	body := keyHeader + "\n" + base64.StdEncoding.EncodeToString(k.seed[:]) + "\n"
	sum := sha256.Sum256([]byte(body))
	return []byte(body + "sha256 " + hex.EncodeToString(sum[:8]) + "\n")
}

// ParseKey reads a key file written by MarshalKey; name is the file's name
// for errors.
func ParseKey(name string, b []byte) (*PrivateKey, error) {
	damaged := func(why string) error {
		return fmt.Errorf("seal: %s is damaged (%s): restore it from a backup; or make a new key with 'idface party rotate' and assemble the configuration again (parts sealed to the old key can no longer be opened)", name, why)
	}
	if len(b) > MaxKeyFile {
		return nil, damaged(fmt.Sprintf("%d bytes, a key file has at most %d", len(b), MaxKeyFile))
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return nil, damaged("want three lines")
	}
	if lines[0] != keyHeader {
		if strings.HasPrefix(lines[0], "idface seal private key ") {
			return nil, fmt.Errorf("seal: %s is %q; this idface reads %q", name, lines[0], keyHeader)
		}
		return nil, damaged("not an idface seal key")
	}
	sum := sha256.Sum256([]byte(lines[0] + "\n" + lines[1] + "\n"))
	if lines[2] != "sha256 "+hex.EncodeToString(sum[:8]) {
		return nil, damaged("checksum mismatch")
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(lines[1])
	if err != nil || len(seed) != SeedSize {
		return nil, damaged("the key is not 32 bytes of base64")
	}
	return newPrivateKey([SeedSize]byte(seed))
}
