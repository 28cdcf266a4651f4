package heidface

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// groupMagic starts a group file: "IDFG", version 1.
var groupMagic = [8]byte{'I', 'D', 'F', 'G', 0, 0, 0, 1}

// WriteGroup writes a group's 2d ciphertexts.
func WriteGroup(w io.Writer, p *Params, g *Group) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	bw.Write(groupMagic[:])
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], uint32(p.Dim))
	bw.Write(h[:])
	for _, cts := range [2][]*rlwe.Ciphertext{g.Plus, g.Minus} {
		for _, ct := range cts {
			if _, err := ct.WriteTo(bw); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// ReadGroup reads a group written by WriteGroup and checks every
// ciphertext's shape against the parameters.
func ReadGroup(r io.Reader, p *Params) (*Group, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, fmt.Errorf("heidface: group file header: %w", err)
	}
	if [8]byte(hdr[:8]) != groupMagic || int(binary.BigEndian.Uint32(hdr[8:])) != p.Dim {
		return nil, fmt.Errorf("heidface: not a group file for d = %d", p.Dim)
	}
	g := &Group{}
	for i := 0; i < 2*p.Dim; i++ {
		ct := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
		if _, err := ct.ReadFrom(br); err != nil {
			return nil, fmt.Errorf("heidface: group file ciphertext %d: %w", i, err)
		}
		if err := p.CheckCiphertext(ct); err != nil {
			return nil, err
		}
		if i < p.Dim {
			g.Plus = append(g.Plus, ct)
		} else {
			g.Minus = append(g.Minus, ct)
		}
	}
	return g, nil
}

// CheckCiphertext verifies a ciphertext has this scheme's shape (degree 1,
// top level, N coefficients, NTT form) before anything computes with it.
func (p *Params) CheckCiphertext(ct *rlwe.Ciphertext) error {
	if ct == nil || ct.Degree() != 1 || ct.Level() != p.BGV.MaxLevel() || ct.Value[0].N() != p.N() || ct.Value[1].N() != p.N() || !ct.IsNTT {
		return fmt.Errorf("heidface: ciphertext of the wrong shape")
	}
	for _, v := range ct.Value {
		for i, q := range p.BGV.Q() {
			for _, c := range v.Coeffs[i] {
				if c >= q {
					return fmt.Errorf("heidface: ciphertext coefficient out of range")
				}
			}
		}
	}
	return nil
}

// UnmarshalCiphertext parses one ciphertext received from a peer. Lattigo's
// decoder is not written for hostile input, so a panic is turned into an
// error, and the shape is checked.
func (p *Params) UnmarshalCiphertext(b []byte) (ct *rlwe.Ciphertext, err error) {
	defer func() {
		if r := recover(); r != nil {
			ct, err = nil, fmt.Errorf("heidface: malformed ciphertext")
		}
	}()
	if len(b) != p.CiphertextBytes() {
		return nil, fmt.Errorf("heidface: ciphertext of %d bytes, want %d", len(b), p.CiphertextBytes())
	}
	ct = rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
	if err := ct.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("heidface: malformed ciphertext: %w", err)
	}
	return ct, p.CheckCiphertext(ct)
}
