package protocol

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"hash"

	"github.com/idface/idface/internal/codec/wire"
)

// Auth is an operator's signature over one change of the gallery: which
// operation, which ids, in which cluster, with a fresh nonce. Every party
// that applies the change checks it against the operator's certificate in
// the cluster configuration, so a party cannot enroll or delete rows on
// its own (at bfed9c1 any party could delete any row by sending Delete to
// the row's origin), and remembers the nonce, so a captured signature
// cannot be used twice (a deletion replayed after the id was enrolled
// again, or an enrollment replayed with another template).
type Auth struct {
	Signer string   // the operator's member name
	Nonce  [16]byte // fresh from crypto/rand for each request
	Sig    []byte   // ECDSA P-256 over SHA-256 of the statement, ASN.1
}

// MaxSig bounds a signature on the wire (ECDSA P-256 in ASN.1 is at most
// 72 bytes).
const MaxSig = 80

// MaxAuth bounds an Auth's encoding: signer, nonce, signature.
const MaxAuth = 2 + MaxIDLen + 16 + 4 + MaxSig

// statement is what an operator signs: a domain label, the cluster, the
// operation, the nonce and the ids in order.
func statement(cluster [16]byte, op OpKind, nonce [16]byte, ids []string) []byte {
	return statementHash("idface operator authorisation v1\x00", cluster, op, nonce, ids).Sum(nil)
}

// statementHash hashes a statement's label and common fields.
func statementHash(label string, cluster [16]byte, op OpKind, nonce [16]byte, ids []string) hash.Hash {
	h := sha256.New()
	h.Write([]byte(label))
	h.Write(cluster[:])
	h.Write([]byte{byte(op)})
	h.Write(nonce[:])
	writeIDs(h, ids)
	return h
}

// Sign authorises op on ids in cluster as the operator name holding key.
func Sign(key crypto.Signer, name string, cluster [16]byte, op OpKind, ids []string) (Auth, error) {
	a := Auth{Signer: name}
	if _, err := rand.Read(a.Nonce[:]); err != nil {
		return a, err
	}
	sig, err := key.Sign(rand.Reader, statement(cluster, op, a.Nonce, ids), crypto.SHA256)
	if err != nil {
		return a, fmt.Errorf("signing the %s request: %w", op, err)
	}
	a.Sig = sig
	return a, nil
}

// Verify checks that a authorises op on exactly ids in cluster under pub.
func (a Auth) Verify(pub *ecdsa.PublicKey, cluster [16]byte, op OpKind, ids []string) bool {
	return pub != nil && len(a.Sig) > 0 && ecdsa.VerifyASN1(pub, statement(cluster, op, a.Nonce, ids), a.Sig)
}

// MarshalAuth appends a's encoding (also used in log records).
func MarshalAuth(e *wire.Enc, a Auth) {
	e.Str(a.Signer)
	e.Raw(a.Nonce[:])
	e.Bytes32(a.Sig)
}

// UnmarshalAuth reads an Auth written by MarshalAuth.
func UnmarshalAuth(d *wire.Dec) Auth {
	a := Auth{Signer: d.Str(MaxIDLen)}
	d.Fixed(a.Nonce[:])
	if s := d.Bytes32(MaxSig); len(s) > 0 {
		a.Sig = append([]byte(nil), s...)
	}
	return a
}

// String names an operation in messages.
func (k OpKind) String() string {
	switch k {
	case OpPut:
		return "enroll"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("op %d", uint8(k))
}
