package abis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/idface/idface/internal/codec/store"
)

// keepAnswers is how many of the last answers a compaction keeps for
// redeliveries: a request is redelivered when the adapter stopped before
// its acknowledgement reached the broker, so only the requests of the
// last moments before a stop come again. compactMin is the least size at
// which the journal is compacted. (Variables for tests.)
var (
	keepAnswers       = 1 << 16
	compactMin  int64 = 64 << 20
)

// compactPath is where a compaction writes the new journal before it
// replaces the old one.
func compactPath(path string) string { return path + ".compact" }

// compact rewrites the journal with what is still needed: the last
// keepAnswers answers (their lines as written), the changes begun and not
// answered, and one line per referenceId with its state now, in that
// order (a kept answer to an insert would otherwise undo a later
// deletion), then a marker line. The new file is written and synced beside the old one, then
// renamed over it, and the directory synced: a crash at any point leaves
// one whole journal, the old or the new. Appends wait meanwhile.
func (j *Journal) compact() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.size < j.compactAt || j.failed != nil {
		return nil // another append compacted it meanwhile
	}
	tmp := compactPath(j.path)
	// Whatever happens now, the next try waits until the journal has
	// doubled: a compaction that fails (a full disk) is not retried at
	// every append, each a rewrite under the locks.
	j.compactAt = max(compactMin, 2*j.size)
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("abis: journal: compacting: %w", err)
	}
	fail := func(err error) error {
		nf.Close()
		os.Remove(tmp)
		return fmt.Errorf("abis: journal: compacting %s: %w", j.path, err)
	}
	answered, size, err := j.writeCompacted(nf)
	if err != nil {
		return fail(err)
	}
	if err := nf.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fail(err)
	}
	// The new file is the journal now (the old one is unlinked): appends
	// go to it. The referenceIds and the changes begun are as before; the
	// answers kept are at their new offsets (writing them was cheaper
	// than a replay: a reopen replays the new file).
	old := j.f
	j.f = nf
	old.Close()
	j.answered, j.size = answered, size
	j.synced = j.size
	j.compactAt = max(compactMin, 4*j.size)
	if err := store.SyncDir(filepath.Dir(j.path)); err != nil {
		// The rename may not survive a crash: what is appended from now
		// on could be lost with the new file. Fail the journal.
		j.failLocked(err)
		return j.failed
	}
	return nil
}

// writeCompacted writes the compacted journal to f (the caller holds
// both locks) and returns where the kept answers are in it, and its size.
func (j *Journal) writeCompacted(f *os.File) (map[string][2]int64, int64, error) {
	w := bufio.NewWriterSize(f, 1<<20)
	type kept struct {
		req string
		at  [2]int64
	}
	answers := make([]kept, 0, len(j.answered))
	for req, at := range j.answered {
		answers = append(answers, kept{req, at})
	}
	slices.SortFunc(answers, func(a, b kept) int { return int(a.at[0] - b.at[0]) })
	answers = answers[max(0, len(answers)-keepAnswers):]
	var buf []byte
	var size int64
	line := func(body []byte) error {
		buf = appendLine(buf[:0], body)
		_, err := w.Write(buf)
		size += int64(len(buf))
		return err
	}
	entryLine := func(e entry) error {
		body, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return line(body)
	}
	answered := make(map[string][2]int64, len(answers))
	for _, a := range answers {
		body := make([]byte, a.at[1])
		if _, err := j.f.ReadAt(body, a.at[0]); err != nil { // the old file: f is the new one
			return nil, 0, fmt.Errorf("reading the answer to %s: %w", a.req, err)
		}
		if e, ok := parseLine(appendLine(nil, body)); !ok || e.Req != a.req {
			return nil, 0, fmt.Errorf("the answer to %s read back differs from the one written", a.req)
		}
		answered[a.req] = [2]int64{size + 9, a.at[1]}
		if err := line(body); err != nil {
			return nil, 0, err
		}
	}
	for _, req := range sortedKeys(j.begun) {
		if err := entryLine(entry{T: "begin", Req: req}); err != nil {
			return nil, 0, err
		}
	}
	for _, ref := range sortedKeys(j.refs) {
		r := j.refs[ref]
		if ref == "" { // never made (a request without a referenceId is refused), and no ref line can hold it
			continue
		}
		if err := entryLine(entry{T: "ref", Ref: ref, URL: r.URL, Deleted: r.Deleted}); err != nil {
			return nil, 0, err
		}
	}
	// A last line that a build before compaction reads as intact: the
	// ref lines before it are then damage followed by more, and that
	// build refuses the journal instead of cutting a last ref line as
	// torn (found by review).
	if err := entryLine(entry{T: "compacted", Req: "-"}); err != nil {
		return nil, 0, err
	}
	return answered, size, w.Flush()
}

// sortedKeys is m's keys in order (a compacted journal is the same for
// the same state).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
