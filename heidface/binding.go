package heidface

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/idface/idface/internal/codec/wire"
)

// Binding ties an HE data file to its place: the cluster, the server that
// holds it, the mode, the public key its ciphertexts are under and the
// key's generation. A file whose binding differs from what its server
// expects was copied, swapped or left over, and is refused: it would
// decrypt to another group's (or another key's) rows.
type Binding struct {
	Cluster [16]byte // config.Params.ClusterID
	Member  string   // the server that holds the file
	Mode    string   // the cluster's mode ("he")
	Key     [32]byte // Fingerprint of the public key
	// Generation numbers the key (and, later, share) epoch: 1 for now.
	Generation uint64
}

// GroupHeader is the part of a group file's header after its magic and d.
type GroupHeader struct {
	Binding
	// Index is the group's number (file g%06d.ct).
	Index int
	// Slots bounds the slots that hold contributions: every delta added
	// to the group fell in slots 0..Slots-1. A file older than its row
	// log (a stale backup) misses live rows past Slots; one newer than
	// the log holds contributions in slots the log never reserved.
	Slots int
}

// Mismatch lists how b differs from want ("" when it does not), for an
// error that says what is wrong.
func (b Binding) Mismatch(want Binding) string {
	var d []string
	if b.Cluster != want.Cluster {
		d = append(d, fmt.Sprintf("cluster %x, not %x", b.Cluster[:4], want.Cluster[:4]))
	}
	if b.Member != want.Member {
		d = append(d, fmt.Sprintf("server %q, not %q", b.Member, want.Member))
	}
	if b.Mode != want.Mode {
		d = append(d, fmt.Sprintf("mode %q, not %q", b.Mode, want.Mode))
	}
	if b.Key != want.Key {
		d = append(d, fmt.Sprintf("public key %x, not %x", b.Key[:8], want.Key[:8]))
	}
	if b.Generation != want.Generation {
		d = append(d, fmt.Sprintf("generation %d, not %d", b.Generation, want.Generation))
	}
	return strings.Join(d, ", ")
}

// String describes a binding for reports (fsck).
func (b Binding) String() string {
	return fmt.Sprintf("cluster %x, server %q, mode %s, public key %x, generation %d", b.Cluster[:4], b.Member, b.Mode, b.Key[:8], b.Generation)
}

// maxHeader bounds a group file header's encoded length.
const maxHeader = 1024

func (h GroupHeader) marshal() []byte {
	e := wire.Enc{}
	e.Raw(h.Cluster[:])
	e.Str(h.Member)
	e.Str(h.Mode)
	e.Raw(h.Key[:])
	e.U64(h.Generation)
	e.U32(uint32(h.Index))
	e.U32(uint32(h.Slots))
	return e.B
}

// readGroupHeader reads the length-prefixed, checksummed header that follows a group
// file's magic and d.
func readGroupHeader(r io.Reader) (GroupHeader, error) {
	var h GroupHeader
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return h, fmt.Errorf("heidface: group file header: %w", err)
	}
	l := int(binary.BigEndian.Uint16(n[:]))
	if l > maxHeader {
		return h, fmt.Errorf("heidface: group file header of %d bytes: damaged", l)
	}
	b := make([]byte, l+4)
	if _, err := io.ReadFull(r, b); err != nil {
		return h, fmt.Errorf("heidface: group file header: %w", err)
	}
	if crc32.Checksum(b[:l], castagnoli) != binary.BigEndian.Uint32(b[l:]) {
		return h, fmt.Errorf("heidface: group file header checksum mismatch: the file is damaged")
	}
	d := wire.Dec{B: b[:l]}
	d.Fixed(h.Cluster[:])
	h.Member = d.Str(256)
	h.Mode = d.Str(64)
	d.Fixed(h.Key[:])
	h.Generation = d.U64()
	h.Index = int(d.U32())
	h.Slots = int(d.U32())
	if err := d.Done(); err != nil {
		return h, fmt.Errorf("heidface: group file header: %w", err)
	}
	return h, nil
}

func writeGroupHeader(w io.Writer, h GroupHeader) error {
	b := h.marshal()
	if len(b) > maxHeader {
		return fmt.Errorf("heidface: group file header of %d bytes", len(b))
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
	out = append(out, b...)
	_, err := w.Write(binary.BigEndian.AppendUint32(out, crc32.Checksum(b, castagnoli)))
	return err
}

// KeyBinding ties a key file to the cluster and the key server whose key
// it is: the key server's pair and every local server's copy of the
// public key carry the same binding, so a copy from another cluster is
// refused and a local server's public.key can be restored from the key
// server's or another local server's.
type KeyBinding struct {
	Cluster   [16]byte
	KeyServer string
}

func (b KeyBinding) String() string {
	return fmt.Sprintf("cluster %x, key server %q", b.Cluster[:4], b.KeyServer)
}
