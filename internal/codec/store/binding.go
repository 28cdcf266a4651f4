package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Binding names the one member whose data a file is. Every data file a
// server keeps carries one, and the server refuses a file whose binding is
// not its own: copying p1's log over p2's made p2 answer with p1's shares
// (20 of 20 strangers accepted in blind mode) while the row-map digests
// still agreed, because the two logs list the same rows.
type Binding struct {
	Kind    Kind     // which engine's records
	Cluster [16]byte // config.Params.ClusterID
	Member  string   // the server's name in the cluster
	Mode    string   // the cluster's mode
	// Key is the fingerprint of the HE public key the data is encrypted
	// under; zero where there is none.
	Key [32]byte
	// Generation counts deliberate renewals of a member's data (a new
	// key, a reshare). Files of two generations never combine. Zero in an
	// expected binding accepts the file's generation (a new file gets 1).
	Generation uint64
}

// String is the binding as a person reads it.
func (b Binding) String() string {
	s := fmt.Sprintf("member %q of cluster %x (mode %s, kind %d, generation %d", b.Member, b.Cluster, b.Mode, b.Kind, b.Generation)
	if b.Key != ([32]byte{}) {
		s += fmt.Sprintf(", HE key %x", b.Key[:8])
	}
	return s + ")"
}

// mismatch lists what differs between a file's binding and the expected one.
func (b Binding) mismatch(want Binding) []string {
	var d []string
	if b.Kind != want.Kind {
		d = append(d, fmt.Sprintf("kind %d, expected %d (this data directory belongs to another mode)", b.Kind, want.Kind))
	}
	if b.Cluster != want.Cluster {
		d = append(d, fmt.Sprintf("cluster %x, expected %x", b.Cluster, want.Cluster))
	}
	if b.Member != want.Member {
		d = append(d, fmt.Sprintf("member %q, expected %q", b.Member, want.Member))
	}
	if b.Mode != want.Mode {
		d = append(d, fmt.Sprintf("mode %s, expected %s", b.Mode, want.Mode))
	}
	if b.Key != want.Key {
		d = append(d, fmt.Sprintf("HE key %x, expected %x", b.Key[:8], want.Key[:8]))
	}
	if want.Generation != 0 && b.Generation != want.Generation {
		d = append(d, fmt.Sprintf("generation %d, expected %d", b.Generation, want.Generation))
	}
	return d
}

// BindingError reports a data file that belongs to another member,
// cluster, mode, key or generation.
type BindingError struct {
	File      string
	Got, Want Binding
	Diff      []string
}

func (e *BindingError) Error() string {
	return fmt.Sprintf("store: %s belongs to %s, not to this server (%s): it was copied or restored from another server, cluster, key or generation, and replaying it would answer with that data. "+
		"Restore %s's own backup of its data directory; if it has none, move the directory away and see DEPLOY.md \"Backing up and restoring a server\"",
		e.File, e.Got, joinDiff(e.Diff), e.Want.Member)
}

func joinDiff(d []string) string {
	var b bytes.Buffer
	for i, s := range d {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// Check compares a file's binding with the expected one.
func (b Binding) Check(file string, want Binding) error {
	if d := b.mismatch(want); len(d) > 0 {
		return &BindingError{File: file, Got: b, Want: want, Diff: d}
	}
	return nil
}

// marshal encodes the binding (the body of a log header).
func (b Binding) marshal() ([]byte, error) {
	if len(b.Mode) > 255 || len(b.Member) > 255 {
		return nil, errors.New("store: mode or member name too long for a binding")
	}
	out := make([]byte, 0, 16+8+32+2+len(b.Mode)+len(b.Member))
	out = append(out, b.Cluster[:]...)
	out = binary.BigEndian.AppendUint64(out, b.Generation)
	out = append(out, b.Key[:]...)
	out = append(out, byte(len(b.Mode)))
	out = append(out, b.Mode...)
	out = append(out, byte(len(b.Member)))
	out = append(out, b.Member...)
	return out, nil
}

// unmarshalBinding decodes a binding body of a log of kind k.
func unmarshalBinding(k Kind, p []byte) (Binding, bool) {
	b := Binding{Kind: k}
	if len(p) < 16+8+32+1 {
		return b, false
	}
	copy(b.Cluster[:], p)
	b.Generation = binary.BigEndian.Uint64(p[16:])
	copy(b.Key[:], p[24:])
	p = p[56:]
	n := int(p[0])
	if len(p) < 1+n+1 {
		return b, false
	}
	b.Mode, p = string(p[1:1+n]), p[1+n:]
	n = int(p[0])
	if len(p) != 1+n {
		return b, false
	}
	b.Member = string(p[1:])
	return b, b.Generation != 0
}

// fileHeader is the header of a new log bound to b.
func fileHeader(b Binding) ([]byte, error) {
	body, err := b.marshal()
	if err != nil {
		return nil, err
	}
	h := make([]byte, headerFixed, headerFixed+len(body)+4)
	copy(h, fileMagic[:])
	binary.BigEndian.PutUint16(h[8:], Format)
	binary.BigEndian.PutUint16(h[10:], uint16(b.Kind))
	binary.BigEndian.PutUint32(h[12:], uint32(len(body)))
	h = append(h, body...)
	return binary.BigEndian.AppendUint32(h, Checksum(h)), nil
}

// readHeader reads a log's file header: its binding and length. A file
// shorter than its header that starts like want's header is a new log
// whose header write was cut by a crash (n == 0, nothing appended).
func readHeader(f io.ReaderAt, path string, size int64, want Binding) (b Binding, n int64, err error) {
	var h [headerFixed]byte
	got, _ := f.ReadAt(h[:], 0)
	if fresh, ferr := fileHeader(withGeneration(want)); ferr == nil && size < int64(len(fresh)) {
		buf := make([]byte, size)
		f.ReadAt(buf, 0)
		if bytes.HasPrefix(fresh, buf) {
			return b, 0, nil
		}
	}
	if got < 12 || [8]byte(h[:8]) != fileMagic {
		return b, 0, &FormatError{path, fmt.Sprintf("not an idface log: it was written by an earlier idface (logs without a format header, wire version 1) or is another file. Run the earlier release to finish with that data directory, or move it away and re-enroll; this build reads log format %d", Format)}
	}
	switch v := binary.BigEndian.Uint16(h[8:]); {
	case v == 1:
		return b, 0, &FormatError{path, "log format 1, which does not name the member it belongs to. If this is this server's own log (not one copied from another server), bind it once with 'idface fsck --adopt' and start again"}
	case v != Format:
		return b, 0, &FormatError{path, fmt.Sprintf("log format %d; this build reads format %d. Use the idface release that wrote it, or a newer one that migrates it", v, Format)}
	}
	if got < headerFixed {
		return b, 0, &DamageError{File: path, Offset: 0, NextValid: -1, Reason: "short file header"}
	}
	b, n, err = parseBound(f, path, size, h)
	if err != nil {
		return b, 0, err
	}
	if err := b.Check(path, want); err != nil {
		return b, 0, err
	}
	return b, n, nil
}

// parseBound reads the binding of a format-2 header whose fixed part is h.
func parseBound(f io.ReaderAt, path string, size int64, h [headerFixed]byte) (Binding, int64, error) {
	bl := int64(binary.BigEndian.Uint32(h[12:]))
	if bl > maxBinding || headerFixed+bl+4 > size {
		return Binding{}, 0, &DamageError{File: path, Offset: 0, NextValid: -1, Reason: "file header length"}
	}
	full := make([]byte, headerFixed+bl+4)
	if _, err := f.ReadAt(full, 0); err != nil {
		return Binding{}, 0, err
	}
	if Checksum(full[:headerFixed+bl]) != binary.BigEndian.Uint32(full[headerFixed+bl:]) {
		return Binding{}, 0, &DamageError{File: path, Offset: 0, NextValid: -1, Reason: "file header checksum"}
	}
	b, ok := unmarshalBinding(Kind(binary.BigEndian.Uint16(h[10:])), full[headerFixed:headerFixed+bl])
	if !ok {
		return b, 0, &DamageError{File: path, Offset: 0, NextValid: -1, Reason: "file header binding"}
	}
	return b, int64(len(full)), nil
}

// withGeneration is b with the generation a new file gets.
func withGeneration(b Binding) Binding {
	if b.Generation == 0 {
		b.Generation = 1
	}
	return b
}

// ReadBinding returns the binding of the log at path without checking it
// (fsck shows it).
func ReadBinding(path string) (Binding, error) {
	f, err := os.Open(path)
	if err != nil {
		return Binding{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Binding{}, err
	}
	var h [headerFixed]byte
	if n, _ := f.ReadAt(h[:], 0); n < headerFixed || [8]byte(h[:8]) != fileMagic || binary.BigEndian.Uint16(h[8:]) != Format {
		return Binding{}, &FormatError{path, "no binding: not a log of format " + fmt.Sprint(Format)}
	}
	b, _, err := parseBound(f, path, st.Size(), h)
	return b, err
}

// Adopt binds a format-1 log (written before bindings) to b, rewriting
// only its header: the operator states that the file is this member's own.
// The file is replaced durably; a log already bound is left alone and its
// binding checked.
func Adopt(path string, b Binding) error {
	b = withGeneration(b)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [v1HeaderLen]byte
	if n, _ := f.ReadAt(h[:], 0); n < v1HeaderLen || [8]byte(h[:8]) != fileMagic {
		return &FormatError{path, "not an idface log"}
	}
	if v := binary.BigEndian.Uint16(h[8:]); v != 1 {
		if v != Format {
			return &FormatError{path, fmt.Sprintf("log format %d: nothing to adopt", v)}
		}
		got, err := ReadBinding(path)
		if err != nil {
			return err
		}
		return got.Check(path, b)
	}
	if Checksum(h[:12]) != binary.BigEndian.Uint32(h[12:]) {
		return &DamageError{File: path, Offset: 0, NextValid: -1, Reason: "file header checksum"}
	}
	if k := Kind(binary.BigEndian.Uint16(h[10:])); k != b.Kind {
		return &FormatError{path, fmt.Sprintf("a log of kind %d, expected %d: this data directory belongs to another mode", k, b.Kind)}
	}
	hdr, err := fileHeader(b)
	if err != nil {
		return err
	}
	return WriteFileFunc(path, 0o600, func(out *os.File) error {
		if _, err := out.Write(hdr); err != nil {
			return err
		}
		_, err := io.Copy(out, io.NewSectionReader(f, v1HeaderLen, 1<<62))
		return err
	})
}

// HeaderLen is the length of the file header of a log bound to b (the
// offset of its first record).
func HeaderLen(b Binding) int {
	return headerFixed + 16 + 8 + 32 + 1 + len(b.Mode) + 1 + len(b.Member) + 4
}
