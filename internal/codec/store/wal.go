// Package store is idface's durable storage: a write-ahead log with its own
// file and record format (independent of the wire protocol's version), and
// durable whole-file replacement. The engines define their record types
// and encodings; this package only frames, checksums, syncs and verifies
// them.
//
// A log file is a file header followed by records:
//
//	file header: "idfacelg" | format u16 (2) | kind u16 | binding length u32 | binding |
//	             CRC-32C u32 of everything before it
//	binding:     cluster id [16] | generation u64 | key fingerprint [32] |
//	             mode length u8 | mode | member length u8 | member
//	record:      magic u16 (0x1DFA) | format u8 (1) | type u8 | sealed length u32 | tail length u32 |
//	             CRC-32C u32 of the tail as written | CRC-32C u32 of the first 16 header bytes and the sealed bytes |
//	             sealed bytes | tail bytes
//
// The sealed part never changes. The tail holds data that may later be
// erased in place (a deleted row's shares, see Overwrite); the engine that
// owns the record checks its tail unit by unit. A record whose checksums fail
// at the end of the file is a torn write (a crash during an append, never
// acknowledged): it is cut off at open and its bytes are kept aside in
// FILE.torn-OFFSET. A damaged record followed by an intact one is damage:
// the log refuses to open and names the file and offset.
//
// The binding ties a log to the one member whose data it is (see
// Binding): a log restored into another member's home, another cluster's
// or another mode's, or written under another HE key, is refused at open,
// because replaying it would make the server answer with someone else's
// shares (silent false accepts and rejects).
package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// Format is the version of the log file format this build writes and
// reads. Format 1 (a header without a binding) is read only by Adopt,
// which binds it.
const Format = 2

// recFormat is the version of the record framing (unchanged since format 1).
const recFormat = 1

// Kind says which engine's records a log holds, so that a data directory
// of one mode is never replayed by another.
type Kind uint16

const (
	KindShares Kind = 1 // 2PC/MPC: a party's XOR shares (modes/mpcface)
	KindHERows Kind = 2 // HE: a local server's row map (modes/hemode)
	KindBlind  Kind = 3 // blind mode: a share holder's additive shares (modes/blind)
	// replicated mode: a share holder's pairs of replicated shares
	// (modes/replicated)
	KindReplicated Kind = 4
)

// MaxRecord bounds one record: a full enrollment batch of shares at the
// largest dimension.
const MaxRecord = 128 << 20

const (
	v1HeaderLen  = 16 // format 1: magic, format, kind, reserved, CRC
	headerFixed  = 16 // magic, format, kind, binding length
	maxBinding   = 16 + 8 + 32 + 1 + 255 + 1 + 255
	recHeaderLen = 20
	recMagic     = 0x1DFA
)

var fileMagic = [8]byte{'i', 'd', 'f', 'a', 'c', 'e', 'l', 'g'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C used everywhere in idface's storage.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Record is one log record as appended.
type Record struct {
	Type   uint8
	Sealed []byte // never changes
	Tail   []byte // may be erased in place later; nil for most records
}

// Entry is a record read back at replay.
type Entry struct {
	Record
	Offset     int64 // of the record header
	TailOffset int64 // file offset of the tail's first byte
	// TailIntact reports that the tail is exactly as appended. When false
	// the engine checks its units: erased in place, or damaged.
	TailIntact bool
	// Last reports that this is the file's final record.
	Last bool
}

// ErrTorn may be returned by a replay function for the last record when
// its tail shows a torn write; the log then cuts the record like a torn
// header.
var ErrTorn = errors.New("store: torn record at the end of the log")

// DamageError reports a damaged record in the middle of a log.
type DamageError struct {
	File      string
	Offset    int64 // of the damaged record
	NextValid int64 // an intact record after it (-1 if unknown)
	Reason    string
}

func (e *DamageError) Error() string {
	s := fmt.Sprintf("store: %s is damaged at offset %d (%s)", e.File, e.Offset, e.Reason)
	if e.NextValid >= 0 {
		s += fmt.Sprintf("; intact records follow at offset %d, so this is not a torn write", e.NextValid)
	}
	return s + ": the party refuses to start. Run 'idface fsck' to see what is intact and repair from the peers"
}

// FormatError reports a log written in another format or for another kind.
type FormatError struct {
	File string
	Msg  string
}

func (e *FormatError) Error() string { return "store: " + e.File + ": " + e.Msg }

// Log is an append-only log open for appending.
type Log struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	w      *bufio.Writer
	size   int64
	header int64 // bytes of the file header (no overwrite there)
}

// Report describes what Scan or Open found.
type Report struct {
	// Binding is the log's own (the expected one for a new log).
	Binding   Binding
	Records   int
	Bytes     int64 // intact bytes, header included (up to the first damage)
	TornBytes int64 // bytes of a torn tail (cut by Open)
	TornFile  string
	// Damaged lists the damaged spans found by ScanAll; ReplayErr is the
	// first error of the replay function (after which nothing more was
	// replayed).
	Damaged   []Span
	ReplayErr error

	header int64 // bytes of the file header
}

// Span is a damaged stretch of a log: [Offset, Next), Next being the next
// intact record.
type Span struct {
	Offset, Next int64
	Reason       string
}

// Open opens (creating) the log at path, replays every intact record in
// order, cuts a torn tail (kept in a side file) and positions for appends.
// A log bound to another member, cluster, mode, key or generation than b
// is refused with a *BindingError; a new log is bound to b.
func Open(path string, b Binding, replay func(Entry) error) (*Log, Report, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, Report{}, err
	}
	rep, err := scan(f, path, b, replay)
	if err != nil {
		f.Close()
		return nil, rep, err
	}
	header := rep.header
	if rep.Bytes == 0 { // new log, or a torn header of a new one: write the file header
		rep.Binding = withGeneration(b)
		h, err := fileHeader(rep.Binding)
		if err == nil {
			err = f.Truncate(0)
		}
		if err == nil {
			_, err = f.WriteAt(h, 0)
		}
		if err != nil {
			f.Close()
			return nil, rep, err
		}
		rep.Bytes, header = int64(len(h)), int64(len(h))
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, rep, err
		}
	}
	if rep.TornBytes > 0 {
		torn := make([]byte, rep.TornBytes)
		if _, err := f.ReadAt(torn, rep.Bytes); err != nil {
			f.Close()
			return nil, rep, err
		}
		rep.TornFile = fmt.Sprintf("%s.torn-%d", path, rep.Bytes)
		if err := os.WriteFile(rep.TornFile, torn, 0o600); err != nil {
			f.Close()
			return nil, rep, err
		}
		if err := f.Truncate(rep.Bytes); err != nil {
			f.Close()
			return nil, rep, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, rep, err
		}
	}
	if _, err := f.Seek(rep.Bytes, io.SeekStart); err != nil {
		f.Close()
		return nil, rep, err
	}
	return &Log{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20), size: rep.Bytes, header: header}, rep, nil
}

// Scan reads a log without changing it: replay sees every intact record;
// the report says where a torn tail starts. A damaged record in the middle
// is a *DamageError, a log bound elsewhere a *BindingError.
func Scan(path string, b Binding, replay func(Entry) error) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	return scan(f, path, b, replay)
}

// ScanAll reads a whole log without changing it, past damage: every
// damaged span is reported, the intact records around them are replayed
// until replay fails (fsck's view of a log).
func ScanAll(path string, b Binding, replay func(Entry) error) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	var rep Report
	first := true
	for {
		if rep.ReplayErr != nil {
			replay = func(Entry) error { return nil }
		}
		wrapped := func(e Entry) error {
			if err := replay(e); err != nil && !errors.Is(err, ErrTorn) {
				rep.ReplayErr = fmt.Errorf("offset %d: %w", e.Offset, err)
				replay = func(Entry) error { return nil }
			}
			return nil
		}
		var r Report
		var err error
		if first {
			r, err = scan(f, path, b, wrapped)
			rep.Binding = r.Binding
		} else {
			r, err = scanFrom(f, path, rep.Damaged[len(rep.Damaged)-1].Next, wrapped)
		}
		rep.Records += r.Records
		var de *DamageError
		if errors.As(err, &de) && de.NextValid > 0 {
			if first {
				rep.Bytes = de.Offset
			}
			rep.Damaged = append(rep.Damaged, Span{de.Offset, de.NextValid, de.Reason})
			first = false
			continue
		}
		if err != nil {
			return rep, err
		}
		if first {
			rep.Bytes = r.Bytes
		}
		rep.TornBytes = r.TornBytes
		return rep, nil
	}
}

func scan(f *os.File, path string, want Binding, replay func(Entry) error) (Report, error) {
	st, err := f.Stat()
	if err != nil {
		return Report{}, err
	}
	size := st.Size()
	var rep Report
	if size == 0 {
		return rep, nil
	}
	b, n, err := readHeader(f, path, size, want)
	if err != nil || n == 0 {
		return rep, err
	}
	rep, err = scanRecords(f, path, n, size, replay)
	rep.Binding, rep.header = b, n
	return rep, err
}

// scanFrom scans records from offset off (after a damaged span).
func scanFrom(f *os.File, path string, off int64, replay func(Entry) error) (Report, error) {
	st, err := f.Stat()
	if err != nil {
		return Report{}, err
	}
	return scanRecords(f, path, off, st.Size(), replay)
}

func scanRecords(f *os.File, path string, off, size int64, replay func(Entry) error) (Report, error) {
	var rep Report
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), 1<<20)
	for off < size {
		e, n, reason := readRecord(r, off, size)
		if reason != "" {
			if next := findValid(f, off+1, size); next >= 0 {
				return rep, &DamageError{File: path, Offset: off, NextValid: next, Reason: reason}
			}
			break // a torn tail
		}
		e.Last = off+n == size
		if err := replay(e); err != nil {
			if errors.Is(err, ErrTorn) && e.Last {
				break
			}
			var de *DamageError
			if errors.As(err, &de) {
				de.File, de.Offset = path, off
				return rep, de
			}
			return rep, fmt.Errorf("store: replaying %s at offset %d: %w", path, off, err)
		}
		off += n
		rep.Records++
	}
	rep.Bytes, rep.TornBytes = off, size-off
	return rep, nil
}

// readRecord reads the record at off; reason is non-empty if it is not
// intact.
func readRecord(r *bufio.Reader, off, size int64) (e Entry, n int64, reason string) {
	var h [recHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return e, 0, "short record header"
	}
	sealed, tail, ok := parseHeader(h[:], off, size)
	if !ok {
		return e, 0, "bad record header"
	}
	body := make([]byte, sealed+tail)
	if _, err := io.ReadFull(r, body); err != nil {
		return e, 0, "short record"
	}
	c := crc32.Update(Checksum(h[:16]), castagnoli, body[:sealed])
	if c != binary.BigEndian.Uint32(h[16:]) {
		return e, 0, "record checksum"
	}
	e = Entry{Record: Record{Type: h[3], Sealed: body[:sealed:sealed], Tail: body[sealed:]},
		Offset: off, TailOffset: off + recHeaderLen + sealed,
		TailIntact: Checksum(body[sealed:]) == binary.BigEndian.Uint32(h[12:])}
	if tail == 0 {
		e.Tail = nil
	}
	return e, recHeaderLen + sealed + tail, ""
}

func parseHeader(h []byte, off, size int64) (sealed, tail int64, ok bool) {
	if binary.BigEndian.Uint16(h) != recMagic || h[2] != recFormat {
		return 0, 0, false
	}
	sealed, tail = int64(binary.BigEndian.Uint32(h[4:])), int64(binary.BigEndian.Uint32(h[8:]))
	if sealed+tail > MaxRecord || off+recHeaderLen+sealed+tail > size {
		return 0, 0, false
	}
	return sealed, tail, true
}

// findValid returns the offset of the first intact record header with a
// valid sealed checksum at or after from, or -1.
func findValid(f *os.File, from, size int64) int64 {
	buf := make([]byte, 1<<20)
	for base := from; base < size; base += int64(len(buf)) - recHeaderLen {
		n, _ := f.ReadAt(buf, base)
		if n < recHeaderLen {
			return -1
		}
		for i := 0; i+recHeaderLen <= n; i++ {
			h := buf[i : i+recHeaderLen]
			if h[0] != recMagic>>8 || h[1] != recMagic&0xff {
				continue
			}
			off := base + int64(i)
			sealed, _, ok := parseHeader(h, off, size)
			if !ok {
				continue
			}
			body := make([]byte, sealed)
			if _, err := f.ReadAt(body, off+recHeaderLen); err != nil {
				continue
			}
			if crc32.Update(Checksum(h[:16]), castagnoli, body) == binary.BigEndian.Uint32(h[16:]) {
				return off
			}
		}
		if n < len(buf) {
			return -1
		}
	}
	return -1
}

// Pos is where an appended record landed.
type Pos struct {
	Offset     int64
	TailOffset int64
}

// Append writes records and makes them durable (fsync) before returning.
func (l *Log) Append(recs ...Record) ([]Pos, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pos := make([]Pos, len(recs))
	for i, r := range recs {
		if len(r.Sealed)+len(r.Tail) > MaxRecord {
			return nil, errors.New("store: record too large for the log")
		}
		var h [recHeaderLen]byte
		binary.BigEndian.PutUint16(h[0:], recMagic)
		h[2], h[3] = recFormat, r.Type
		binary.BigEndian.PutUint32(h[4:], uint32(len(r.Sealed)))
		binary.BigEndian.PutUint32(h[8:], uint32(len(r.Tail)))
		binary.BigEndian.PutUint32(h[12:], Checksum(r.Tail))
		binary.BigEndian.PutUint32(h[16:], crc32.Update(Checksum(h[:16]), castagnoli, r.Sealed))
		pos[i] = Pos{Offset: l.size, TailOffset: l.size + recHeaderLen + int64(len(r.Sealed))}
		l.w.Write(h[:])
		l.w.Write(r.Sealed)
		l.w.Write(r.Tail)
		l.size += recHeaderLen + int64(len(r.Sealed)) + int64(len(r.Tail))
	}
	if err := l.w.Flush(); err != nil {
		return nil, fmt.Errorf("store: writing %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return nil, fmt.Errorf("store: fsync of %s: %w", l.path, err)
	}
	return pos, nil
}

// Overwrite replaces bytes of an appended record's tail in place and makes
// the change durable: it erases data (a deleted row's shares) so that no
// later read of the file returns it. Only tails may be overwritten.
func (l *Log) Overwrite(off int64, b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if off < l.header || off+int64(len(b)) > l.size {
		return fmt.Errorf("store: overwrite of [%d, %d) outside %s", off, off+int64(len(b)), l.path)
	}
	if _, err := l.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("store: erasing in %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("store: fsync of %s: %w", l.path, err)
	}
	return nil
}

// Size is the log's length in bytes.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Path is the log file's name.
func (l *Log) Path() string { return l.path }

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }
