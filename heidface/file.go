package heidface

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// groupMagic starts a group file: "IDFG", format 3. Format 1 had no
// checksum, format 2 no binding (GroupHeader); both are refused by name.
var groupMagic = [8]byte{'I', 'D', 'F', 'G', 0, 0, 0, 3}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcWriter and crcReader keep a CRC-32C of every byte that passes.
type crcWriter struct {
	w   io.Writer
	sum uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.sum = crc32.Update(c.sum, castagnoli, p[:n])
	return n, err
}

type crcReader struct {
	r   io.Reader
	sum uint32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sum = crc32.Update(c.sum, castagnoli, p[:n])
	return n, err
}

// WriteGroup writes a group's 2d ciphertexts under header h:
//
//	"IDFG" 0 0 0 3 | d u32 | header (GroupHeader) | 2d ciphertexts (Lattigo binary) | CRC-32C u32 of all before
func WriteGroup(w io.Writer, p *BGVScheme, h GroupHeader, g *Group) error {
	return writeGroupFile(w, groupMagic, p.Dim, h, func(cw io.Writer) error {
		for _, cts := range [2][]*rlwe.Ciphertext{g.Plus, g.Minus} {
			for _, ct := range cts {
				if _, err := ct.WriteTo(cw); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// writeGroupFile frames a group file of either scheme:
//
//	magic (8 bytes) | d u32 | header length u16 | header | CRC-32C u32 of the header | body | CRC-32C u32 of all before
//
// (the header has its own checksum so that damage to it is not taken for
// another binding before the body is read), where the header is cluster id [16] | server str | mode str | key
// fingerprint [32] | generation u64 | group index u32 | slots u32 (str: a
// u16 length and the bytes).
func writeGroupFile(w io.Writer, magic [8]byte, dim int, hdr GroupHeader, body func(io.Writer) error) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &crcWriter{w: bw}
	cw.Write(magic[:])
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], uint32(dim))
	cw.Write(h[:])
	if err := writeGroupHeader(cw, hdr); err != nil {
		return err
	}
	if err := body(cw); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(h[:], cw.sum)
	bw.Write(h[:])
	return bw.Flush()
}

// checkTrailer verifies that exactly the 4-byte checksum of everything
// read so far follows: a damaged, truncated or extended file is refused.
func (c *crcReader) checkTrailer() error {
	sum := c.sum
	var tr [5]byte
	if n, _ := io.ReadFull(c.r, tr[:]); n != 4 {
		return fmt.Errorf("heidface: group file has %d bytes where its 4-byte checksum belongs", n)
	}
	if binary.BigEndian.Uint32(tr[:4]) != sum {
		return fmt.Errorf("heidface: group file checksum mismatch: the file is damaged")
	}
	return nil
}

// CheckHeader, when not nil, judges a group file's header before its body
// is read (the store compares the binding with the server's).
type CheckHeader func(GroupHeader) error

// readGroupStart reads a group file's magic, d and header, and calls
// check. other names the other scheme's magic for a clear refusal.
func readGroupStart(cr *crcReader, magic [8]byte, dim int, check CheckHeader, other [4]byte, otherName string) (GroupHeader, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(cr, hdr[:]); err != nil {
		return GroupHeader{}, fmt.Errorf("heidface: group file header: %w", err)
	}
	switch {
	case [4]byte(hdr[:4]) == other:
		return GroupHeader{}, fmt.Errorf("heidface: a %s group file in a cluster of the other scheme", otherName)
	case [4]byte(hdr[:4]) != [4]byte(magic[:4]):
		return GroupHeader{}, fmt.Errorf("heidface: not a group file")
	case [8]byte(hdr[:8]) != magic:
		return GroupHeader{}, fmt.Errorf("heidface: group file of format %d; this build reads format %d only (earlier formats were written by an earlier idface and are not bound to a cluster, server and key: "+
			"run the earlier release to finish with that data, or start a new cluster and enroll again)", binary.BigEndian.Uint32(hdr[4:8]), magic[7])
	}
	if got := int(binary.BigEndian.Uint32(hdr[8:])); got != dim {
		return GroupHeader{}, fmt.Errorf("heidface: group file for d = %d, not %d", got, dim)
	}
	h, err := readGroupHeader(cr)
	if err != nil {
		return h, err
	}
	if check != nil {
		if err := check(h); err != nil {
			return h, err
		}
	}
	return h, nil
}

// ReadGroup reads a group written by WriteGroup, verifies its checksum and
// checks every ciphertext's shape against the parameters; check judges
// the header first. A damaged or truncated file is an error, never a
// group with wrong data.
func ReadGroup(r io.Reader, p *BGVScheme, check CheckHeader) (h GroupHeader, g *Group, err error) {
	defer func() { // Lattigo's reader is not written for hostile input
		if rec := recover(); rec != nil {
			g, err = nil, fmt.Errorf("heidface: malformed group file")
		}
	}()
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<20)}
	if h, err = readGroupStart(cr, groupMagic, p.Dim, check, [4]byte(paillierGroupMagic[:4]), "Paillier"); err != nil {
		return h, nil, err
	}
	g = &Group{p: p}
	buf := make([]byte, p.CiphertextBytes())
	for i := 0; i < 2*p.Dim; i++ {
		if _, err := io.ReadFull(cr, buf); err != nil {
			return h, nil, fmt.Errorf("heidface: group file ciphertext %d: %w", i, err)
		}
		ct, err := p.UnmarshalCiphertext(buf)
		if err != nil {
			return h, nil, fmt.Errorf("heidface: group file ciphertext %d: %w", i, err)
		}
		if i < p.Dim {
			g.Plus = append(g.Plus, ct)
		} else {
			g.Minus = append(g.Minus, ct)
		}
	}
	if err := cr.checkTrailer(); err != nil {
		return h, nil, err
	}
	return h, g, nil
}

// CheckCiphertext verifies a ciphertext has this scheme's shape (degree 1,
// top level, N coefficients, NTT form) before anything computes with it.
func (p *BGVScheme) CheckCiphertext(ct *rlwe.Ciphertext) error {
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
func (p *BGVScheme) UnmarshalCiphertext(b []byte) (ct *rlwe.Ciphertext, err error) {
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
