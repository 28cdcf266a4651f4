package abis

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/idface/idface/internal/codec/store"
)

// Journal is the adapter's durable record, an append-only file of lines
//
//	CRC-32C (8 hex digits) | ' ' | JSON entry | '\n'
//
// each written with fsync before the adapter acts on it. It holds no
// template: requestIds, referenceIds, referenceURLs and the answers to
// changes (inserts and deletes; other requests change nothing and are
// served again when redelivered).
// A torn last line (a crash during an append) is cut off at open; a
// damaged line followed by an intact one refuses the open.
//
// It is compacted (compact.go) once it has grown to four times its last
// compacted size (at least compactMin): what is still needed, the state
// of every referenceId, the changes begun and not answered, and the last
// keepAnswers answers (a redelivery comes after a crash or a restart,
// not weeks later), is written to a new file that replaces it.
type Journal struct {
	syncMu sync.Mutex // held across an fsync; synced is what it made durable
	synced int64
	mu     sync.Mutex
	f      *os.File
	path   string
	size   int64
	// answered: requestId -> where its answer is (offset of the JSON
	// entry in the file, and its length), read back on a redelivery.
	answered map[string][2]int64
	begun    map[string]bool // requestIds of changes begun (a change may be done without an answer)
	refs     map[string]*Ref
	// compactAt is the size at which the journal is compacted next.
	compactAt int64
	// failed is set once a write or an fsync failed: what is in memory
	// may then be ahead of the disk (and a later fsync may report
	// success for pages the kernel dropped), so nothing more is written
	// or answered from it until a restart replays the file.
	failed error
	// Warn, when set, is told of a compaction that failed (the journal
	// goes on growing and tries again once it has doubled).
	Warn func(msg string, args ...any)
}

// Ref is what the journal knows of a referenceId.
type Ref struct {
	URL     string // the insert's referenceURL (identify by referenceId fetches it again)
	Deleted bool
}

type entry struct {
	T        string          `json:"t"` // "begin", "done", or "ref" (a compacted referenceId: Ref, URL, Deleted)
	Req      string          `json:"rq,omitempty"`
	Op       string          `json:"op,omitempty"`
	Ref      string          `json:"ref,omitempty"`
	URL      string          `json:"url,omitempty"`
	OK       bool            `json:"ok,omitempty"` // done: the change succeeded
	Response json.RawMessage `json:"resp,omitempty"`
	Deleted  bool            `json:"del,omitempty"` // ref: deleted
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcOf(body []byte) uint32 { return crc32.Checksum(body, castagnoli) }

// appendLine appends the journal line of JSON body to dst.
func appendLine(dst, body []byte) []byte {
	dst = fmt.Appendf(dst, "%08x ", crcOf(body))
	return append(append(dst, body...), '\n')
}

// OpenJournal opens (creating) the journal at path and replays it.
func OpenJournal(path string) (*Journal, error) {
	existed, err := store.Exists(path)
	if err != nil {
		return nil, fmt.Errorf("abis: journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("abis: journal: %w", err)
	}
	if !existed {
		if err := store.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, fmt.Errorf("abis: journal: %w", err)
		}
	}
	// A compaction that stopped before its rename left its new file: the
	// journal is the old one, whole.
	if err := os.Remove(compactPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.Close()
		return nil, fmt.Errorf("abis: journal: %w", err)
	}
	j := &Journal{f: f, path: path}
	if err := j.replay(); err != nil {
		f.Close()
		return nil, err
	}
	j.synced = j.size
	j.compactAt = max(compactMin, 4*j.size)
	return j, nil
}

func (j *Journal) replay() error {
	j.answered, j.begun, j.refs = map[string][2]int64{}, map[string]bool{}, map[string]*Ref{}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("abis: journal %s: %w", j.path, err)
	}
	r := bufio.NewReaderSize(j.f, 1<<16)
	var off int64
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 { // torn: no newline
				return j.cut(off, len(line))
			}
			break
		}
		if err != nil {
			return fmt.Errorf("abis: journal %s: %w", j.path, err)
		}
		e, ok := parseLine(line)
		if !ok {
			// Damage unless it is the last line.
			if _, err := r.Peek(1); err == io.EOF {
				return j.cut(off, len(line))
			}
			return fmt.Errorf("abis: journal %s: damaged line at offset %d followed by more: refusing to guess what was answered", j.path, off)
		}
		j.apply(e, off+9, int64(len(line)-10))
		off += int64(len(line))
	}
	j.size = off
	_, err := j.f.Seek(off, io.SeekStart)
	return err
}

func (j *Journal) cut(off int64, n int) error {
	if err := j.f.Truncate(off); err != nil {
		return fmt.Errorf("abis: journal %s: cutting a torn line of %d bytes: %w", j.path, n, err)
	}
	j.size = off
	_, err := j.f.Seek(off, io.SeekStart)
	if err == nil {
		err = j.f.Sync()
	}
	return err
}

func parseLine(line []byte) (entry, bool) {
	var e entry
	if len(line) < 11 || line[8] != ' ' || line[len(line)-1] != '\n' {
		return e, false
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], line[:8]); err != nil {
		return e, false
	}
	body := line[9 : len(line)-1]
	if crcOf(body) != uint32(sum[0])<<24|uint32(sum[1])<<16|uint32(sum[2])<<8|uint32(sum[3]) {
		return e, false
	}
	if json.Unmarshal(body, &e) != nil {
		return e, false
	}
	switch e.T {
	case "begin", "done":
		return e, e.Req != ""
	case "ref":
		return e, e.Ref != ""
	case "compacted": // the last line of a compaction (compact.go)
		return e, e.Req != ""
	}
	return e, false
}

// apply updates the state for e, whose JSON is at off (n bytes).
func (j *Journal) apply(e entry, off, n int64) {
	switch e.T {
	case "begin":
		j.begun[e.Req] = true
	case "ref":
		j.refs[e.Ref] = &Ref{URL: e.URL, Deleted: e.Deleted}
	case "done":
		j.answered[e.Req] = [2]int64{off, n}
		delete(j.begun, e.Req)
		if !e.OK {
			return
		}
		switch e.Op {
		case OpInsert:
			j.refs[e.Ref] = &Ref{URL: e.URL}
		case OpDelete:
			if r := j.refs[e.Ref]; r != nil {
				r.Deleted = true
			} else {
				j.refs[e.Ref] = &Ref{Deleted: true}
			}
		}
	}
}

func (j *Journal) append(e entry) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line := appendLine(make([]byte, 0, len(body)+10), body)
	j.mu.Lock()
	if j.failed != nil {
		j.mu.Unlock()
		return j.failed
	}
	off := j.size
	if _, err := j.f.Write(line); err != nil {
		j.failLocked(err)
		j.mu.Unlock()
		return j.failed
	}
	j.size += int64(len(line))
	// Applied with the write, under the same lock: a compaction (which
	// takes it) then never misses a line written before it, and offsets
	// always refer to the file they were written to. A reader may see it
	// before the sync below returns; a sync that fails fails the journal
	// (failed), so nothing is answered from what may not be on disk.
	j.apply(e, off+9, int64(len(body)))
	end := j.size
	due := j.size >= j.compactAt
	j.mu.Unlock()
	if err := j.syncTo(end); err != nil {
		return err
	}
	if due {
		// Maintenance: this line is durable whatever becomes of it. A
		// failed compaction (a full disk, say) is said and tried again
		// once the journal has doubled, not at every append.
		if err := j.compact(); err != nil && j.Warn != nil {
			j.Warn("abis: the journal could not be compacted; it goes on growing", "journal", j.path, "err", err)
		}
	}
	return j.failedErr()
}

// failLocked records the journal's failure (the caller holds mu).
func (j *Journal) failLocked(err error) {
	if j.failed == nil {
		j.failed = fmt.Errorf("abis: journal %s failed (%w): restart the adapter; it replays the journal from disk", j.path, err)
	}
}

// failedErr is the journal's failure, if any.
func (j *Journal) failedErr() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// syncTo returns once the file is durable up to end: one fsync covers
// every line written before it, so requests served beside each other
// share them (a group commit). A failed fsync fails the journal.
func (j *Journal) syncTo(end int64) error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	if j.failed != nil {
		j.mu.Unlock()
		return j.failed
	}
	target := j.size
	j.mu.Unlock()
	if j.synced >= end {
		return nil
	}
	if err := j.f.Sync(); err != nil {
		j.mu.Lock()
		j.failLocked(err)
		j.mu.Unlock()
		return j.failedErr()
	}
	j.synced = target
	return nil
}

// Begin records that a change (insert or delete) of request q is about
// to be sent to the cluster.
func (j *Journal) Begin(q *Request) error {
	return j.append(entry{T: "begin", Req: q.RequestID, Op: q.ID, Ref: q.Ref()})
}

// Begun reports whether a change of requestId was begun and not answered
// (the adapter stopped between the two: the cluster may have done it).
func (j *Journal) Begun(requestID string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.begun[requestID]
}

// Done records the answer to q (ok: a change that took effect).
func (j *Journal) Done(q *Request, ok bool, resp []byte) error {
	e := entry{T: "done", Req: q.RequestID, Op: q.ID, Ref: q.Ref(), OK: ok, Response: resp}
	if q.ID == OpInsert {
		e.URL = q.URL()
	}
	return j.append(e)
}

// Answered returns the answer recorded for requestId, or nil. It reads
// under the lock: a compaction replaces the file and the offsets together.
func (j *Journal) Answered(requestID string) ([]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil {
		return nil, j.failed
	}
	at, ok := j.answered[requestID]
	if !ok {
		return nil, nil
	}
	b := make([]byte, at[1])
	if _, err := j.f.ReadAt(b, at[0]); err != nil {
		return nil, fmt.Errorf("abis: journal: reading an answer: %w", err)
	}
	var e entry
	if err := json.Unmarshal(b, &e); err != nil || e.Req != requestID {
		return nil, errors.New("abis: journal: an answer read back differs from the one written")
	}
	return bytes.Clone(e.Response), nil
}

// Ref returns what the journal knows of a referenceId (nil: never
// inserted through this adapter).
func (j *Journal) Ref(ref string) *Ref {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.refs[ref]; r != nil {
		c := *r
		return &c
	}
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }
