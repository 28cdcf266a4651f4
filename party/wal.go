package party

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// wal is the party's durable store: an append-only log of records, each
//
//	length (u32) | CRC-32C of payload (u32) | payload
//
// where the payload is a protocol message (Prepare or Decide). Every
// transaction step is one append and one fsync, so bulk enrollment costs one
// fsync per batch; replay at start rebuilds the column store in one
// sequential read. A torn tail (a crash mid-append) fails its checksum and
// is cut off at open. We chose this over an embedded B+tree (bbolt): the
// workload is append-only, nothing is ever looked up on disk, and a B+tree's
// copy-on-write pages would write each share several times.
type wal struct {
	f    *os.File
	w    *bufio.Writer
	size int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxRecord bounds one record: a full enrollment batch of shares.
const maxRecord = 64 << 20

// openWAL opens (creating) the log at path and calls replay for every
// intact record in order. It returns how many bytes of torn tail it cut.
func openWAL(path string, replay func(payload []byte) error) (*wal, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var good int64
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break // clean end or torn header
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if n > maxRecord {
			break
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			break
		}
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
			break
		}
		if err := replay(payload); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("party: replaying %s at offset %d: %w", path, good, err)
		}
		good += 8 + int64(n)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	cut := st.Size() - good
	if cut > 0 {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, 0, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, 0, err
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, err
	}
	return &wal{f: f, w: bufio.NewWriterSize(f, 1<<20), size: good}, cut, nil
}

// append writes records and makes them durable before returning.
func (l *wal) append(payloads ...[]byte) error {
	for _, p := range payloads {
		if len(p) > maxRecord {
			return errors.New("party: record too large for the log")
		}
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(len(p)))
		binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(p, castagnoli))
		l.w.Write(hdr[:])
		l.w.Write(p)
		l.size += 8 + int64(len(p))
	}
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("party: writing the log: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("party: fsync of the log: %w", err)
	}
	return nil
}

func (l *wal) close() error { return l.f.Close() }
