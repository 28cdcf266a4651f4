package heidface

import (
	"fmt"
	"io"

	"github.com/idface/idface/template"
)

// Scheme is what IDFace needs of an additively homomorphic encryption
// scheme: the local server encrypts packed column groups and sums the
// columns a query selects; the key server decrypts the two sums of a group
// and decodes one score per row. BGV (Lattigo, the default) and Paillier
// implement it; the engines see nothing else of either.
type Scheme interface {
	// Name is the scheme's name in cluster.json: "bgv" or "paillier".
	Name() string
	// Encoder is the base-p packing: M templates per plaintext value.
	Encoder() template.Encoder
	// GroupRows is the number of templates one column group holds.
	GroupRows() int
	// CiphertextBytes is the size of one serialised ciphertext (S_ct).
	CiphertextBytes() int
	// GenKeys draws a key pair (at the key server, once) from crypto/rand.
	GenKeys() (sk, pk []byte, err error)
	// CheckPublicKey parses a public key received from a peer or a file.
	CheckPublicKey(pk []byte) error
	// CheckKeyPair verifies that sk decrypts what pk encrypts.
	CheckKeyPair(sk, pk []byte) error
	NewEncryptor(pk []byte) (Encryptor, error)
	NewDecryptor(sk, pk []byte) (Decryptor, error)
	// WriteGroup and ReadGroup store a group with its header (what the
	// file is bound to) and a checksum; a damaged or truncated file is an
	// error, never a group with wrong data. check, when not nil, judges
	// the header before the body is read.
	WriteGroup(w io.Writer, h GroupHeader, g EncGroup) error
	ReadGroup(r io.Reader, check CheckHeader) (GroupHeader, EncGroup, error)
	// Describe gives the parameters for a log line.
	Describe() []any
}

// EncGroup is one encrypted column group: for every position j, X+_j and
// X-_j of the group's rows.
type EncGroup interface {
	// Add adds delta (a group of the same scheme) into the group.
	Add(delta EncGroup) error
}

// Encryptor is the local server's side: the public key only. Not safe for
// concurrent use: Copy per goroutine.
type Encryptor interface {
	// Delta encrypts the contribution of rows zs at the given slots of one
	// group: 2d fresh encryptions whatever the number of rows, so that
	// adding it (EncGroup.Add) enrolls the rows without revealing which
	// positions changed; a new group is its first delta.
	Delta(slots []int, zs []template.Ternary) (EncGroup, error)
	// IPDB writes the serialised ct+ || ct- of query y over g into out
	// (2 CiphertextBytes); g nil (every slot burned) gives two fresh
	// encryptions of zero.
	IPDB(g EncGroup, y template.Ternary, out []byte) error
	// IPDBBatch is IPDB for several queries over one group (ys[i] into
	// outs[i]), each output exactly IPDB's; a scheme whose sums are
	// bound by memory reads each selected column once for all of them.
	IPDBBatch(g EncGroup, ys []template.Ternary, outs [][]byte) error
	Copy() Encryptor
}

// Decryptor is the key server's side. Not safe for concurrent use: Copy
// per goroutine.
type Decryptor interface {
	// Scores checks and decrypts a peer's ct+ || ct- (2 CiphertextBytes)
	// and writes the score of group row r into scores[r] (len GroupRows).
	// The scores must never leave the key server.
	Scores(pair []byte, scores []int) error
	Copy() Decryptor
}

// Schemes lists the schemes by name, the default first (a new slice each
// call).
func Schemes() []string { return []string{"bgv", "paillier"} }

// New returns the scheme called name for templates of dimension d enrolled
// with T_alpha and queried with T_beta; "" is BGV.
func New(name string, d, alpha, beta int) (Scheme, error) {
	switch name {
	case "", "bgv":
		p, err := NewParams(d, alpha, beta)
		if err != nil {
			return nil, err
		}
		return p, nil
	case "paillier":
		return NewPaillier(d, alpha, beta)
	}
	return nil, fmt.Errorf("heidface: scheme %q: want bgv or paillier", name)
}
