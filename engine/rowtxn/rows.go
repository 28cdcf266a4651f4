// Package rowtxn is the row bookkeeping that the share-holding engines
// have in common (2PCFace/MPCFace in modes/mpcface, blind mode in
// modes/blind): every party holds one share of every enrolled row, rows
// are addressed by (origin party, sequence) and kept at the same place at
// every party by two-phase transactions that the origin coordinates
// (prepare, vote, decide, presumed abort), deletions erase a row's share in
// memory and in the log, and parties compare row-map digests before they
// answer together. What a share is and how a query uses the shares is the
// engine's business: it plugs a Shares store in.
package rowtxn

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/idface/idface/engine/rowtxn/txnlog"
	"github.com/idface/idface/engine/txnbase"
	"github.com/idface/idface/internal/codec/rowmap"
	"github.com/idface/idface/protocol"
)

// Shares is one origin segment's share store.
type Shares interface {
	Rows() int
	Live() int
	IsLive(seq int) bool
	// Put stores share (ShareSize bytes) at row seq, seq <= Rows(); a nil
	// share (lost to damage) stores zeros.
	Put(seq int, share []byte, live bool) error
	// Erase zeroes row seq's share and marks it dead.
	Erase(seq int) error
}

// RowsPutter is a Shares store that stores many new rows faster at once
// (a batch's rows are consecutive).
type RowsPutter interface {
	PutRows(seq0 int, shares [][]byte) error
}

// segment is the rows one origin party enrolled, in its order (their ids
// are the row map's segment of the same index). Only the origin appends
// to or deletes from its segment, so every party applies a segment's
// transactions in one order.
type segment[S Shares] struct {
	shares S
	// batches locate committed rows' shares in this party's log: row seq
	// of a batch starting at seq0 is unit seq-seq0 of the tail at tail
	// (sorted by seq0, not overlapping).
	batches []batch
	// epoch counts the reshare transactions applied to the segment; the
	// digest carries it, so that holders compare shares of one epoch only.
	epoch uint32
}

// replaceBatches makes nb the batch of its rows (a reshare's new units)
// and returns the spans of the units it supersedes, to erase.
func (s *segment[S]) replaceBatches(nb batch) (stale []tail) {
	var out []batch
	end := nb.seq0 + nb.n
	for _, b := range s.batches {
		lo, hi := max(b.seq0, nb.seq0), min(b.seq0+b.n, end)
		if lo >= hi {
			out = append(out, b)
			continue
		}
		stale = append(stale, tail{b.tail + int64((lo-b.seq0)*b.unit), (hi - lo) * b.unit})
		if b.seq0 < lo {
			out = append(out, batch{b.seq0, lo - b.seq0, b.tail, b.unit})
		}
		if hi < b.seq0+b.n {
			out = append(out, batch{hi, b.seq0 + b.n - hi, b.tail + int64((hi-b.seq0)*b.unit), b.unit})
		}
	}
	out = append(out, nb)
	sort.Slice(out, func(i, j int) bool { return out[i].seq0 < out[j].seq0 })
	s.batches = out
	return stale
}

// epochMark is what a segment's reshare epoch adds to its digest's hash.
func epochMark(cluster [16]byte, seg int, epoch uint32) [16]byte {
	h := sha256.New()
	h.Write([]byte("idface/rowtxn/epoch"))
	h.Write(cluster[:])
	h.Write([]byte{byte(seg)})
	h.Write(binary.BigEndian.AppendUint32(nil, epoch))
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

type batch struct {
	seq0, n int
	tail    int64
	unit    int // bytes of one unit: a share or a seed, and its checksum
}

// unitAt returns the log offset and size of row seq's share, or -1 if
// unknown.
func (s *segment[S]) unitAt(seq int) (int64, int) {
	i := sort.Search(len(s.batches), func(i int) bool { return s.batches[i].seq0+s.batches[i].n > seq })
	if i == len(s.batches) || s.batches[i].seq0 > seq {
		return -1, 0
	}
	b := s.batches[i]
	return b.tail + int64((seq-b.seq0)*b.unit), b.unit
}

// pendingTxn is a prepared, undecided transaction and where its prepare
// record's tail (this party's shares) lies in the log.
type pendingTxn struct {
	prep *protocol.Prepare
	tail int64
}

// state is a party's row map and shares. Fields are guarded by mu; gathers
// hold the read lock, commits the write lock (lock, unlock).
type state[S Shares] struct {
	mu sync.RWMutex
	// seen is what a health request reports, published at every release
	// of the write lock: health answers never wait for the lock, so a peer
	// that holds it (a long query, a change queued behind one) cannot make
	// this party look down to the others (modes/replicated's degraded
	// service counts a late health answer as an outage).
	seen    atomic.Pointer[snapshot]
	changed chan struct{} // closed (and replaced) on every commit
	dim     int
	share   int                          // bytes of one share
	seed    int                          // bytes of a seed that expands to a share (0: none)
	expand  func([]byte) ([]byte, error) // a seed's share
	cluster [16]byte
	segs    []*segment[S]
	rows    *txnbase.RowMap // ids by segment, live ids, the digest
	pending map[protocol.TxnID]*pendingTxn
	// auth checks operators' signatures and holds every operator nonce
	// prepared here (from the log at start), so that no signed change
	// applies twice.
	auth *txnbase.Operators
	// owns, in a shard, refuses an id of another shard (nil: every id).
	owns func(id string) *protocol.Error
}

// snapshot is the committed row map and the count of undecided
// transactions at the last release of the write lock.
type snapshot struct {
	digest  protocol.Digest
	pending int
}

// lock takes the write lock; unlock publishes what changed under it and
// releases it.
func (st *state[S]) lock() { st.mu.Lock() }

func (st *state[S]) unlock() {
	st.publish()
	st.mu.Unlock()
}

// publish makes the current row map what health requests see (caller
// holds mu, or owns st alone).
func (st *state[S]) publish() {
	st.seen.Store(&snapshot{digest: st.digest(), pending: len(st.pending)})
}

func newState[S Shares](dim, share, mu int, cluster [16]byte, newShares func() (S, error)) (*state[S], error) {
	st := &state[S]{dim: dim, share: share, cluster: cluster, changed: make(chan struct{}), pending: map[protocol.TxnID]*pendingTxn{},
		rows: txnbase.NewRowMap(cluster, mu), auth: txnbase.NewOperators(nil, cluster)}
	st.expand = func(b []byte) ([]byte, error) { return b, nil }
	for range mu {
		s, err := newShares()
		if err != nil {
			return nil, err
		}
		st.segs = append(st.segs, &segment[S]{shares: s})
	}
	st.publish()
	return st, nil
}

// digest summarises the committed row map (caller holds mu).
func (st *state[S]) digest() protocol.Digest {
	g := st.rows.Digest()
	for i, s := range st.segs {
		if s.epoch != 0 {
			h := rowmap.Hash(g[i].Hash)
			h.Toggle(epochMark(st.cluster, i, s.epoch))
			g[i].Hash = h
		}
	}
	return g
}

// totals counts row slots and live rows (caller holds mu).
func (st *state[S]) totals() (rows, live int) {
	for i := range st.segs {
		rows += st.rows.Len(i)
		live += st.rows.Live(i)
	}
	return rows, live
}

// validate checks a Prepare against the committed state and the other
// pending transactions (caller holds mu). It is the same check at the
// origin and at every other party, so all vote alike on honest input.
func (st *state[S]) validate(p *protocol.Prepare, sealed [][32]byte) *protocol.Error {
	if int(p.Origin) >= len(st.segs) {
		return protocol.Errorf(protocol.CodeBadRequest, "origin %d outside the %d parties", p.Origin, len(st.segs))
	}
	if int(p.Dim) != st.dim {
		return protocol.Errorf(protocol.CodeBadRequest, "dimension %d, cluster uses %d", p.Dim, st.dim)
	}
	if len(p.Ops) == 0 {
		return protocol.Errorf(protocol.CodeBadRequest, "empty transaction")
	}
	if err := st.authorized(p, sealed); err != nil {
		return err
	}
	seg := st.segs[p.Origin]
	if int(p.Base) != seg.shares.Rows() {
		return protocol.Errorf(protocol.CodeInconsistent, "origin %d segment has %d rows here, the origin built on %d", p.Origin, seg.shares.Rows(), p.Base)
	}
	inUse := map[string]bool{}
	for _, q := range st.pending {
		if q.prep.Origin == p.Origin {
			return protocol.Errorf(protocol.CodeUnavailable, "an earlier transaction of origin %d is still undecided here", p.Origin)
		}
		for _, op := range q.prep.Ops {
			inUse[op.ID] = true
		}
	}
	next := int(p.Base)
	isSeeded := txnlog.Seeded(p)
	for _, op := range p.Ops {
		check := protocol.CheckID // a new id: NFC too
		if op.Kind == protocol.OpDelete {
			check = protocol.CheckStoredID // rows enrolled before ids had to be NFC stay deletable
		}
		if err := check(op.ID); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		if st.owns != nil {
			if err := st.owns(op.ID); err != nil {
				return err
			}
		}
		if inUse[op.ID] {
			return protocol.Errorf(protocol.CodeDuplicate, "id %q is used twice or by a concurrent request", op.ID)
		}
		inUse[op.ID] = true
		switch op.Kind {
		case protocol.OpPut:
			if int(op.Seq) != next {
				return protocol.Errorf(protocol.CodeInconsistent, "row %d where %d was due", op.Seq, next)
			}
			next++
			if _, ok := st.rows.Lookup(op.ID); ok {
				return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled", op.ID)
			}
			want := st.share
			if op.Seeded {
				want = st.seed
			}
			if op.Seeded != isSeeded || want == 0 || len(op.Share) != want {
				return protocol.Errorf(protocol.CodeBadRequest, "a share of %d bytes (seeded %v); this cluster's are %d (seeds %d, all or none)", len(op.Share), op.Seeded, st.share, st.seed)
			}
		case protocol.OpDelete:
			ref, ok := st.rows.Lookup(op.ID)
			if !ok || ref.Seg != int(p.Origin) || ref.Seq != int(op.Seq) {
				return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled at row %d of origin %d", op.ID, op.Seq, p.Origin)
			}
		}
	}
	if next > protocol.MaxRows {
		return protocol.Errorf(protocol.CodeBadRequest, "segment full")
	}
	return nil
}

// authorized checks that an operator signed exactly the prepare's ops
// (one kind, these ids in this order; for a sealed enrollment, with parts
// of these hashes) for this cluster, with a nonce never
// prepared here before (caller holds mu).
func (st *state[S]) authorized(p *protocol.Prepare, sealed [][32]byte) *protocol.Error {
	kind := p.Ops[0].Kind
	ids := make([]string, len(p.Ops))
	for i, op := range p.Ops {
		if op.Kind != kind {
			return protocol.Errorf(protocol.CodeBadRequest, "a transaction mixes enrollments and deletions")
		}
		ids[i] = op.ID
	}
	return st.auth.Check(p.Auth, kind, ids, sealed) // sealed: the operator signed the parts' hashes, not the shares
}

// apply commits a prepared transaction's ops (caller holds mu for
// writing). A put whose share is nil (lost at replay) is stored as zeros;
// the caller checks that such a row is deleted later. Deleted rows' shares
// are erased from memory here; it returns the deleted rows so that the
// caller erases them from the log too.
func (st *state[S]) apply(t *pendingTxn) (deleted []rowmap.Ref, stale []tail, err error) {
	p := t.prep
	seg := st.segs[p.Origin]
	if p.Reshare != nil && len(p.Ops) > 0 && p.Ops[0].Kind == protocol.OpReplace {
		stale, err = st.replace(seg, t)
		return nil, stale, err
	}
	if err := st.putAll(seg, p); err != nil {
		return nil, nil, err
	}
	puts := 0
	for _, op := range p.Ops {
		ref := rowmap.Ref{Seg: int(p.Origin), Seq: int(op.Seq)}
		switch op.Kind {
		case protocol.OpPut:
			st.rows.Reserve(ref.Seg, op.ID)
			st.rows.Commit(ref)
			puts++
		case protocol.OpDelete:
			if err := seg.shares.Erase(int(op.Seq)); err != nil { // erase, not just tombstone
				return nil, nil, err
			}
			st.rows.Remove(ref, op.ID)
			deleted = append(deleted, ref)
		}
	}
	if puts > 0 && t.tail >= 0 {
		seg.batches = append(seg.batches, batch{seq0: int(p.Base), n: puts, tail: t.tail, unit: st.unit(p)})
	}
	if p.Reshare != nil { // a rebuild's restore carries the segment's epoch
		seg.epoch = p.Reshare.Epoch
	}
	close(st.changed)
	st.changed = make(chan struct{})
	return deleted, nil, nil
}

// replace applies a reshare: every live row of the ops gets its new share,
// the prepare's units become the rows' units (the old ones are returned to
// erase) and the segment reaches the reshare's epoch.
func (st *state[S]) replace(seg *segment[S], t *pendingTxn) ([]tail, error) {
	p := t.prep
	for _, op := range p.Ops {
		// A nil share is a unit erased by a later reshare (or damaged: the
		// replay reports a live row whose last unit is bad): keep the row.
		if op.Share != nil && seg.shares.IsLive(int(op.Seq)) {
			if err := seg.shares.Put(int(op.Seq), op.Share, true); err != nil {
				return nil, err
			}
		}
	}
	var stale []tail
	if t.tail >= 0 {
		stale = seg.replaceBatches(batch{seq0: int(p.Ops[0].Seq), n: len(p.Ops), tail: t.tail, unit: st.unit(p)})
	}
	seg.epoch = p.Reshare.Epoch
	close(st.changed)
	st.changed = make(chan struct{})
	return stale, nil
}

// validateReshare checks a reshare's prepare: the next epoch of the
// origin's segment, consecutive committed rows with their ids, a share of
// the cluster's size for every row (the party filled them), nothing of
// the origin's undecided.
func (st *state[S]) validateReshare(p *protocol.Prepare) *protocol.Error {
	if int(p.Origin) >= len(st.segs) || len(p.Ops) == 0 || int(p.Dim) != st.dim {
		return protocol.Errorf(protocol.CodeBadRequest, "a reshare of %d rows of origin %d, dimension %d", len(p.Ops), p.Origin, p.Dim)
	}
	seg := st.segs[p.Origin]
	if p.Reshare.Epoch != seg.epoch+1 {
		return protocol.Errorf(protocol.CodeInconsistent, "a reshare to epoch %d of origin %d, whose segment is at %d here", p.Reshare.Epoch, p.Origin, seg.epoch)
	}
	for _, q := range st.pending {
		if q.prep.Origin == p.Origin {
			return protocol.Errorf(protocol.CodeUnavailable, "an earlier transaction of origin %d is still undecided here", p.Origin)
		}
	}
	for i, op := range p.Ops {
		seq := int(p.Ops[0].Seq) + i
		switch {
		case op.Kind != protocol.OpReplace || int(op.Seq) != seq:
			return protocol.Errorf(protocol.CodeBadRequest, "a reshare op %v at row %d where row %d was due", op.Kind, op.Seq, seq)
		case seq >= seg.shares.Rows() || st.rows.ID(int(p.Origin), seq) != op.ID:
			return protocol.Errorf(protocol.CodeInconsistent, "a reshare of row %d of origin %d (%q), which this party does not hold", seq, p.Origin, op.ID)
		case len(op.Share) != st.share:
			return protocol.Errorf(protocol.CodeBadRequest, "a reshared share of %d bytes; this cluster's are %d", len(op.Share), st.share)
		}
	}
	return nil
}

// unit is the bytes of one of a prepare's tail units.
func (st *state[S]) unit(p *protocol.Prepare) int {
	if txnlog.Seeded(p) {
		return txnlog.UnitSize(st.seed)
	}
	return txnlog.UnitSize(st.share)
}

// putAll stores a transaction's new rows (consecutive, from Base), seeds
// expanded, in one batch when the store can.
func (st *state[S]) putAll(seg *segment[S], p *protocol.Prepare) error {
	var shares [][]byte
	next := st.rows.Len(int(p.Origin))
	for _, op := range p.Ops {
		if op.Kind != protocol.OpPut {
			continue
		}
		if int(op.Seq) != next {
			return fmt.Errorf("rowtxn: row %d of origin %d applied out of order (%d rows)", op.Seq, p.Origin, next)
		}
		next++
		share := op.Share
		if share == nil { // lost to damage: zeros; the row must be deleted
			share = make([]byte, st.share)
		} else if op.Seeded {
			var err error
			if share, err = st.expand(share); err != nil {
				return err
			}
		}
		shares = append(shares, share)
	}
	if len(shares) == 0 {
		return nil
	}
	if b, ok := any(seg.shares).(RowsPutter); ok {
		return b.PutRows(int(p.Base), shares)
	}
	for i, sh := range shares {
		if err := seg.shares.Put(int(p.Base)+i, sh, true); err != nil {
			return err
		}
	}
	return nil
}
