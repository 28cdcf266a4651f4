package client

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// A Journal is an operator's record of its own changes to one cluster's
// gallery, kept on the operator's host because a protected cluster never
// gives templates back: for every enrollment and deletion it sends, the
// ids (with a hash of each template) before the request and the outcome
// after it. From it `enroll --resume` knows which ids this operator
// enrolled and with which template, and which changes got no answer.
//
// The format is JSON lines: a header {"idface_journal":1,"cluster":HEX},
// then per change one line per id {"b":N,"op":"+","id":ID,"h":HASH} (or
// "op":"-" for a deletion), fsynced before the request is sent, and
// {"b":N,"ok":true|false} once the cluster answered. A batch without an
// outcome got no answer. A torn last line (a crash while writing) is cut.
// The journal knows nothing of other operators' changes.
type Journal struct {
	mu      sync.Mutex // a bulk enrollment with requests in flight calls End concurrently
	path    string
	f       *os.File
	w       *bufio.Writer
	next    uint64
	ids     map[string]Entry
	pending map[uint64][]pendingItem
	// open is each id's latest change without an outcome.
	open map[string]Entry
}

// State is what a journal knows of an id.
type State int

const (
	// Unknown: the journal has no change of the id.
	Unknown State = iota
	// Enrolled: its last change, an enrollment of the template with
	// Entry.Hash, was committed.
	Enrolled
	// Deleted: its last change, a deletion, was committed.
	Deleted
	// InDoubt: its last change (Entry.Op) was sent and got no answer;
	// Entry.Batch names it.
	InDoubt
)

// Entry is a journal's knowledge of one id.
type Entry struct {
	State State
	Op    byte     // '+' or '-': the last change sent
	Hash  [16]byte // the template of an enrollment
	Batch uint64
}

type pendingItem struct {
	id   string
	op   byte
	hash [16]byte
}

type journalLine struct {
	Version int    `json:"idface_journal,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	Batch   uint64 `json:"b,omitempty"`
	Op      string `json:"op,omitempty"`
	ID      string `json:"id,omitempty"`
	Hash    string `json:"h,omitempty"`
	OK      *bool  `json:"ok,omitempty"`
}

// JournalPath is the default journal of an operator whose home is dir
// for the cluster with the given id.
func JournalPath(dir string, cluster [16]byte) string {
	return filepath.Join(dir, "journal-"+hex.EncodeToString(cluster[:])+".jsonl")
}

// TemplateHash identifies a template as sent (its float32 values).
func TemplateHash(x []float32) [16]byte {
	h := sha256.New()
	var b [4]byte
	for _, v := range x {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// OpenJournal opens (or creates) the journal at path for the cluster,
// holding an exclusive lock on it until Close, and reads it.
func OpenJournal(path string, cluster [16]byte) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w (give another file with --journal)", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s is in use by another idface command: wait for it to finish", path)
	}
	j := &Journal{path: path, f: f, next: 1, ids: map[string]Entry{}, pending: map[uint64][]pendingItem{}, open: map[string]Entry{}}
	if err := j.replay(cluster); err != nil {
		f.Close()
		return nil, err
	}
	j.w = bufio.NewWriterSize(f, 1<<16)
	return j, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

func (j *Journal) replay(cluster [16]byte) error {
	want := hex.EncodeToString(cluster[:])
	r := bufio.NewReader(j.f)
	var off int64
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 { // a torn last line: cut it
				if err := j.f.Truncate(off); err != nil {
					return err
				}
			}
			break
		}
		if err != nil {
			return fmt.Errorf("journal %s: %w", j.path, err)
		}
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil || (n == 1) != (l.Version != 0) {
			return fmt.Errorf("journal %s line %d is damaged: move the file away to start a new journal (what it recorded is then unknown to --resume)", j.path, n)
		}
		off += int64(len(line))
		if n == 1 {
			if l.Version != 1 {
				return fmt.Errorf("journal %s has format %d; this build reads format 1", j.path, l.Version)
			}
			if l.Cluster != want {
				return fmt.Errorf("%s is the journal of cluster %s, not of this cluster (%s): give --journal another file", j.path, l.Cluster, want)
			}
			continue
		}
		if err := j.apply(l); err != nil {
			return fmt.Errorf("journal %s line %d: %w", j.path, n, err)
		}
	}
	if off == 0 {
		b, _ := json.Marshal(journalLine{Version: 1, Cluster: want})
		if _, err := j.f.Write(append(b, '\n')); err != nil {
			return err
		}
		if err := j.f.Sync(); err != nil {
			return err
		}
	}
	_, err := j.f.Seek(0, io.SeekEnd)
	return err
}

func (j *Journal) apply(l journalLine) error {
	j.next = max(j.next, l.Batch+1)
	switch {
	case l.OK != nil:
		for _, it := range j.pending[l.Batch] {
			switch {
			case !*l.OK:
				continue
			case it.op == '+':
				j.ids[it.id] = Entry{State: Enrolled, Op: '+', Hash: it.hash, Batch: l.Batch}
			default:
				j.ids[it.id] = Entry{State: Deleted, Op: '-', Batch: l.Batch}
			}
		}
		for _, it := range j.pending[l.Batch] {
			if e, ok := j.open[it.id]; ok && e.Batch == l.Batch {
				delete(j.open, it.id)
			}
		}
		delete(j.pending, l.Batch)
	case l.Op == "+" || l.Op == "-":
		it := pendingItem{id: l.ID, op: l.Op[0]}
		if l.Op == "+" {
			b, err := hex.DecodeString(l.Hash)
			if err != nil || len(b) != 16 {
				return errors.New("bad template hash")
			}
			copy(it.hash[:], b)
		}
		j.add(l.Batch, it)
	default:
		return errors.New("neither a change nor an outcome")
	}
	return nil
}

// add records a change of batch b without an outcome yet.
func (j *Journal) add(b uint64, it pendingItem) {
	j.pending[b] = append(j.pending[b], it)
	j.open[it.id] = Entry{State: InDoubt, Op: it.op, Hash: it.hash, Batch: b}
}

// Lookup returns what the journal knows of id.
func (j *Journal) Lookup(id string) Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.ids[id]
	if o, ok := j.open[id]; ok && o.Batch > e.Batch {
		return o
	}
	return e
}

// Unanswered lists the batches sent without an answer, with their ids.
func (j *Journal) Unanswered() map[uint64][]string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[uint64][]string{}
	for b, items := range j.pending {
		for _, it := range items {
			out[b] = append(out[b], it.id)
		}
	}
	return out
}

// RefuseUnanswered records every batch of op ('+' or '-') sent without
// an answer as refused, and returns how many ids they held: for a member
// whose role may not make the change, which every server refused
// before reading it (RoleError), whatever the run that sent it was told.
func (j *Journal) RefuseUnanswered(op byte) (int, error) {
	j.mu.Lock()
	var batches []uint64
	n := 0
	for b, items := range j.pending {
		if len(items) > 0 && items[0].op == op { // a batch is one change
			batches = append(batches, b)
			n += len(items)
		}
	}
	j.mu.Unlock()
	slices.Sort(batches)
	for _, b := range batches {
		if err := j.End(b, false); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Begin records a change about to be sent: op '+' enrolls ids with the
// templates of hashes, '-' deletes ids (hashes nil). It returns the
// batch number for End and is durable when it returns.
func (j *Journal) Begin(op byte, ids []string, hashes [][16]byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := j.next
	j.next++
	for i, id := range ids {
		l := journalLine{Batch: b, Op: string(op), ID: id}
		if op == '+' {
			l.Hash = hex.EncodeToString(hashes[i][:])
		}
		if err := j.write(l); err != nil {
			return 0, err
		}
	}
	if err := j.sync(); err != nil {
		return 0, err
	}
	for i, id := range ids {
		it := pendingItem{id: id, op: op}
		if op == '+' {
			it.hash = hashes[i]
		}
		j.add(b, it)
	}
	return b, nil
}

// End records the outcome of batch b: committed, or refused (rolled
// back). It is written at once and made durable by the next Begin or by
// Close; an outcome lost in a crash leaves the batch in doubt, which
// --resume settles by asking the cluster again.
func (j *Journal) End(b uint64, committed bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	ok := committed
	l := journalLine{Batch: b, OK: &ok}
	if err := j.write(l); err != nil {
		return err
	}
	return j.apply(l)
}

func (j *Journal) write(l journalLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := j.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

func (j *Journal) sync() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

// Close makes every record durable and releases the journal.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}
