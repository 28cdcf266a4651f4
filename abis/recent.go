package abis

import (
	"sync"
	"time"
)

// Templates between an insert and MOSIP's identify of the same
// referenceId. MOSIP's dedupe inserts a record and then identifies it by
// its referenceId; without the template the adapter fetches the record's
// CBEFF again and runs the extractor again (a face model: the most
// expensive step of both). So an inserted record's template stays in
// memory (never on disk) until that identify takes it, its record is
// deleted, it is older than recentTTL, or recentMax newer inserts push it
// out; a template let go is zeroed. Options.Recent < 0 keeps none.

const (
	recentMax = 1024
	recentTTL = 10 * time.Minute
)

type recentEntry struct {
	x  []float32
	at time.Time
}

// recent holds the templates of the latest inserts, by referenceId.
type recent struct {
	mu    sync.Mutex
	max   int
	m     map[string]recentEntry
	order []string // referenceIds in the order put (some taken since)
}

func newRecent(max int) *recent { return &recent{max: max, m: map[string]recentEntry{}} }

// put keeps x for ref (the adapter's own copy), letting go of the oldest
// beyond max and of those older than recentTTL.
func (r *recent) put(ref string, x []float32, now time.Time) {
	if r.max <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(ref)
	r.m[ref] = recentEntry{append([]float32(nil), x...), now}
	r.order = append(r.order, ref)
	for len(r.order) > 0 {
		old := r.order[0]
		e, live := r.m[old]
		if live && len(r.m) <= r.max && now.Sub(e.at) < recentTTL {
			break
		}
		if live {
			r.dropLocked(old)
		}
		r.order = r.order[1:]
	}
	if len(r.order) > 4*r.max { // referenceIds taken behind a live one
		live := r.order[:0]
		for _, ref := range r.order {
			if _, ok := r.m[ref]; ok {
				live = append(live, ref)
			}
		}
		r.order = live
	}
}

// take returns ref's template and lets go of it (nil: none, or too old).
func (r *recent) take(ref string, now time.Time) []float32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[ref]
	if !ok {
		return nil
	}
	delete(r.m, ref)
	if now.Sub(e.at) >= recentTTL {
		clear(e.x)
		return nil
	}
	return e.x
}

// drop lets go of ref's template (its record was deleted).
func (r *recent) drop(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(ref)
}

func (r *recent) dropLocked(ref string) {
	if e, ok := r.m[ref]; ok {
		clear(e.x)
		delete(r.m, ref)
	}
}
