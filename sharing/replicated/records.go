package replicated

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// Share records (docs/REPLICATED-NOTES.md "No share from a single
// source"). Each share s_j is held by two holders (HoldersOf(j)), and the
// third, Recorder(j), keeps a record of it: a salted digest bound to the
// cluster, the row's id and the share's index. A holder that takes s_j from
// the other holder alone (a rebuild, a catch-up) checks it against the
// recorder's record, so that a peer that plants a face in the copy it
// serves is refused. The salt is known to the two holders of s_j only:
// without it the recorder, which holds the two other shares, could test a
// guessed gallery vector v (s_j = v - s_(j+1) - s_(j+2)) against the
// record.
//
// A holder keeps, after each row's pair, the trailer
// salt_i || salt_(i+1) || record of s_(i+2).

const (
	// SaltSize is the bytes of one share's salt.
	SaltSize = 16
	// RecordSize is the bytes of one share's record.
	RecordSize = sha256.Size
	// TrailerSize is the bytes a holder keeps after each row's pair: the
	// salts of its two shares and its record of the third.
	TrailerSize = 2*SaltSize + RecordSize
)

// Recorder is the holder that keeps the record of share j: the one that
// does not hold it.
func Recorder(j int) int { return (j + 1) % Holders }

// Record is the record of share j of row id of a cluster, salted with
// salt (SaltSize bytes): what Recorder(j) keeps, and what a holder of s_j
// computes to prove its copy. The epoch is not bound: a reshare changes
// the share, and both holders attest the new record to the recorder.
func Record(cluster [16]byte, id string, j int, salt, share []byte) [RecordSize]byte {
	h := sha256.New()
	var hdr [20 + 16 + 1 + 2]byte
	copy(hdr[:], "idface/repl/record/\x00")
	copy(hdr[20:], cluster[:])
	hdr[36] = byte(j)
	binary.BigEndian.PutUint16(hdr[37:], uint16(len(id)))
	h.Write(hdr[:])
	h.Write([]byte(id))
	h.Write(salt)
	h.Write(share)
	var out [RecordSize]byte
	h.Sum(out[:0])
	return out
}

// Trailer is holder i's trailer of one row: the salts of its shares
// (s_i, s_(i+1)) and its record of s_(i+2).
type Trailer struct {
	Salts  [2][SaltSize]byte
	Record [RecordSize]byte
}

// Append appends t's bytes to b.
func (t *Trailer) Append(b []byte) []byte {
	b = append(b, t.Salts[0][:]...)
	b = append(b, t.Salts[1][:]...)
	return append(b, t.Record[:]...)
}

// ParseTrailer reads a trailer from its TrailerSize bytes.
func ParseTrailer(b []byte) (Trailer, error) {
	var t Trailer
	if len(b) != TrailerSize {
		return t, fmt.Errorf("replicated: a trailer of %d bytes, want %d", len(b), TrailerSize)
	}
	copy(t.Salts[0][:], b)
	copy(t.Salts[1][:], b[SaltSize:])
	copy(t.Record[:], b[2*SaltSize:])
	return t, nil
}

// Recorded reports whether the record is set: an all-zero record is one
// not attested yet (after a reshare, until both holders of the share
// attest its new record).
func (t *Trailer) Recorded() bool { return t.Record != [RecordSize]byte{} }

// Trailers makes the three holders' trailers of row id from its three
// shares (as bytes), with fresh salts from rnd (crypto/rand or a CSPRNG
// keyed from it): what the operator's client seals with each holder's
// pair.
func Trailers(cluster [16]byte, id string, shares *[Holders][]byte, rnd io.Reader) ([Holders]Trailer, error) {
	var salts [Holders][SaltSize]byte
	var out [Holders]Trailer
	for j := range salts {
		if _, err := io.ReadFull(rnd, salts[j][:]); err != nil {
			return out, fmt.Errorf("replicated: salts: %w", err)
		}
	}
	for i := range out {
		h := Held(i)
		third := (i + 2) % Holders
		out[i] = Trailer{Salts: [2][SaltSize]byte{salts[h[0]], salts[h[1]]}, Record: Record(cluster, id, third, salts[third][:], shares[third])}
	}
	return out, nil
}
