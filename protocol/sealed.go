package protocol

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/wire"
)

// Sealed enrollment (blind mode): the operator's client computes every
// holder's share of each row and seals each holder's shares to that
// holder's key (internal/codec/seal), so the entry relays parts it cannot read.
//
// A part's plaintext is one byte (1: the units are seeds, 0: full shares)
// and one unit per id, in the request's order. It is sealed for the
// Binding {cluster, holder, mode, SealContext(nonce, ids)}, and the
// operator's signature covers a digest of every part (SealedStatement),
// so neither the entry nor anyone else can swap, drop or replay a part:
// a part opens only at its holder, for this request's ids, and a part
// the operator did not make fails the signature.

// MaxSealedPart bounds one sealed part: the seal's overhead, the flag and
// a batch of the largest shares.
const MaxSealedPart = seal.Overhead + 1 + MaxBatch*MaxShare

// SealedEnroll asks the entry to enroll a batch whose shares the client
// made and sealed: Parts[k] is party k's (party order).
type SealedEnroll struct {
	Auth  Auth
	IDs   []string
	Parts [][]byte
}

func (m *SealedEnroll) Type() Type { return TSealedEnroll }
func (m *SealedEnroll) marshal(e *wire.Enc) {
	MarshalAuth(e, m.Auth)
	e.U32(uint32(len(m.IDs)))
	for _, id := range m.IDs {
		e.Str(id)
	}
	e.U8(uint8(len(m.Parts)))
	for _, p := range m.Parts {
		e.Bytes32(p)
	}
}
func (m *SealedEnroll) unmarshal(d *wire.Dec) {
	m.Auth = UnmarshalAuth(d)
	n := d.Count(MaxBatch, 2)
	for range n {
		m.IDs = append(m.IDs, d.Str(MaxIDLen))
	}
	k := int(d.U8())
	if d.Err == nil && k > MaxParties {
		d.Fail("%d sealed parts", k)
		return
	}
	for range k {
		m.Parts = append(m.Parts, d.Bytes32(MaxSealedPart))
	}
}

// SealedPrepare is phase one of a sealed enrollment at a party: the
// Prepare's rows without shares, the party's sealed part, and the hash of
// every party's part (PartHash, party order), which the operator signed.
//
// Held, in a cluster of three holders that answers with one down
// (replicated mode), is the third party's part (neither the origin's nor
// the recipient's): the recipient keeps it for that party when it has not
// heard from it that it prepared, so that a party left out can catch up
// from either other holder (engine/rowtxn/relay.go). It is the last field:
// a held record an earlier build logged reads as one without it
// (DecodeStored).
type SealedPrepare struct {
	Prepare Prepare // every op a put without a share
	Part    []byte
	Hashes  [][32]byte
	Held    []byte
}

func (m *SealedPrepare) Type() Type { return TSealedPrepare }
func (m *SealedPrepare) marshal(e *wire.Enc) {
	m.Prepare.marshalBody(e)
	e.Bytes32(m.Part)
	e.U8(uint8(len(m.Hashes)))
	for _, h := range m.Hashes {
		e.Raw(h[:])
	}
	e.Bytes32(m.Held)
	e.Raw(m.Prepare.Relay[:])
}
func (m *SealedPrepare) unmarshal(d *wire.Dec) {
	m.Prepare.unmarshalBody(d)
	for i, op := range m.Prepare.Ops {
		if d.Err == nil && (op.Kind != OpPut || op.Seeded || len(op.Share) > 0) {
			d.Fail("op %d of a sealed prepare: a put without a share wanted", i)
		}
	}
	m.Part = d.Bytes32(MaxSealedPart)
	k := int(d.U8())
	if d.Err == nil && k > MaxParties {
		d.Fail("%d part hashes", k)
		return
	}
	for range k {
		var h [32]byte
		d.Fixed(h[:])
		m.Hashes = append(m.Hashes, h)
	}
	if m.Held = d.Bytes32(MaxSealedPart); len(m.Held) == 0 {
		m.Held = nil
	}
	d.Fixed(m.Prepare.Relay[:])
}

// Prepared is a party's note to the third party of a transaction (mu = 3,
// neither the origin nor itself) that it has prepared it: the third then
// need not keep the sender's part for it (engine/rowtxn/relay.go).
// Answered with the third's commit (Decide) when it committed the
// transaction, its own Prepared when it has it, else DecideOK; sent again
// for a transaction still undecided after a while, it pulls a decision
// the origin withheld.
type Prepared struct {
	Txn    TxnID
	Origin uint8
}

func (m *Prepared) Type() Type { return TPrepared }
func (m *Prepared) marshal(e *wire.Enc) {
	e.Raw(m.Txn[:])
	e.U8(m.Origin)
}
func (m *Prepared) unmarshal(d *wire.Dec) {
	copy(m.Txn[:], d.Take(16))
	m.Origin = d.U8()
}

// PartHash is the hash of one sealed part that the operator's signature
// covers through SealedStatement.
func PartHash(part []byte) [32]byte { return sha256.Sum256(part) }

// SealContext is the request a part is sealed for (seal.Binding.Context):
// the operator's nonce and the ids, so a part cannot be moved to another
// request or rows.
func SealContext(nonce [16]byte, ids []string) []byte {
	h := sha256.New()
	writeIDs(h, ids)
	return append(nonce[:], h.Sum(nil)...)
}

// sealedStatement is what an operator signs for a sealed enrollment: the
// plain statement's fields under another label, and the parts' hashes.
func sealedStatement(cluster [16]byte, nonce [16]byte, ids []string, hashes [][32]byte) []byte {
	h := statementHash("idface operator authorisation v1 sealed\x00", cluster, OpPut, nonce, ids)
	h.Write([]byte{byte(len(hashes))})
	for _, p := range hashes {
		h.Write(p[:])
	}
	return h.Sum(nil)
}

// SignSealed authorises a sealed enrollment of ids with these parts'
// hashes; nonce must be fresh from crypto/rand (it is also in every part's
// binding, so the parts are sealed before signing with the same nonce).
func SignSealed(key crypto.Signer, name string, cluster [16]byte, nonce [16]byte, ids []string, hashes [][32]byte) (Auth, error) {
	a := Auth{Signer: name, Nonce: nonce}
	sig, err := key.Sign(rand.Reader, sealedStatement(cluster, nonce, ids, hashes), crypto.SHA256)
	if err != nil {
		return a, fmt.Errorf("signing the sealed enrollment: %w", err)
	}
	a.Sig = sig
	return a, nil
}

// VerifySealed checks that a authorises the sealed enrollment of exactly
// ids with parts of these hashes in cluster under pub.
func (a Auth) VerifySealed(pub *ecdsa.PublicKey, cluster [16]byte, ids []string, hashes [][32]byte) bool {
	return pub != nil && len(a.Sig) > 0 && ecdsa.VerifyASN1(pub, sealedStatement(cluster, a.Nonce, ids, hashes), a.Sig)
}

// writeIDs hashes a list of ids with their count and lengths.
func writeIDs(h interface{ Write([]byte) (int, error) }, ids []string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(ids)))
	h.Write(n[:])
	for _, id := range ids {
		binary.BigEndian.PutUint32(n[:], uint32(len(id)))
		h.Write(n[:])
		h.Write([]byte(id))
	}
}
