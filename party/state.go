package party

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
)

// rowRef addresses a row: its origin party's segment and its sequence
// number there. Every party places a row at the same address.
type rowRef struct {
	seg int
	seq int
}

// segment is the rows that one origin party enrolled, in its order.
type segment struct {
	store  *sharing.Store
	idData []byte   // every row's id back to back, kept after deletion
	idEnd  []uint64 // idEnd[seq] is the end of row seq's id in idData
	hash   [16]byte // XOR of rowHash over live rows
}

// id returns the id of row seq.
func (s *segment) id(seq int) string {
	var start uint64
	if seq > 0 {
		start = s.idEnd[seq-1]
	}
	return string(s.idData[start:s.idEnd[seq]])
}

// state is a party's row map and shares. All fields are guarded by mu;
// gathers hold the read lock, commits the write lock.
type state struct {
	mu      sync.RWMutex
	changed *sync.Cond // broadcast on every commit (waiters hold mu.RLocker)
	dim     int
	segs    []*segment
	ids     *idIndex // live ids
	pending map[protocol.TxnID]*protocol.Prepare
}

func newState(dim, mu int) (*state, error) {
	st := &state{dim: dim, pending: map[protocol.TxnID]*protocol.Prepare{}}
	st.ids = newIDIndex(func(r rowRef) string { return st.segs[r.seg].id(r.seq) })
	st.changed = sync.NewCond(st.mu.RLocker())
	for range mu {
		s, err := sharing.NewStore(dim, 0)
		if err != nil {
			return nil, err
		}
		st.segs = append(st.segs, &segment{store: s})
	}
	return st, nil
}

// rowHash binds a live row's address to its id for the digest.
func rowHash(seg int, seq int, id string) [16]byte {
	h := sha256.New()
	var b [5]byte
	b[0] = byte(seg)
	binary.BigEndian.PutUint32(b[1:], uint32(seq))
	h.Write(b[:])
	h.Write([]byte(id))
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

func xor16(a *[16]byte, b [16]byte) {
	for i := range a {
		a[i] ^= b[i]
	}
}

// digest summarises the committed row map (caller holds mu).
func (st *state) digest() protocol.Digest {
	g := make(protocol.Digest, len(st.segs))
	for i, s := range st.segs {
		g[i] = protocol.SegDigest{Rows: uint32(s.store.Rows()), Live: uint32(s.store.Live()), Hash: s.hash}
	}
	return g
}

// CheckID validates an identifier supplied by a user.
func CheckID(id string) error {
	if id == "" {
		return fmt.Errorf("empty id")
	}
	if len(id) > protocol.MaxIDLen {
		return fmt.Errorf("id of %d bytes, limit %d", len(id), protocol.MaxIDLen)
	}
	if strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
		return fmt.Errorf("id %q contains control or invalid characters", id)
	}
	return nil
}

// validate checks a Prepare against the committed state and the other
// pending transactions (caller holds mu). It is the same check at the
// origin and at every other party, so all vote alike on honest input.
func (st *state) validate(p *protocol.Prepare) *protocol.Error {
	if int(p.Origin) >= len(st.segs) {
		return protocol.Errorf(protocol.CodeBadRequest, "origin %d outside the %d parties", p.Origin, len(st.segs))
	}
	if int(p.Dim) != st.dim {
		return protocol.Errorf(protocol.CodeBadRequest, "dimension %d, cluster uses %d", p.Dim, st.dim)
	}
	seg := st.segs[p.Origin]
	if int(p.Base) != seg.store.Rows() {
		return protocol.Errorf(protocol.CodeInconsistent, "origin %d segment has %d rows here, the origin built on %d", p.Origin, seg.store.Rows(), p.Base)
	}
	inUse := map[string]bool{}
	for _, q := range st.pending {
		if q.Origin == p.Origin {
			return protocol.Errorf(protocol.CodeUnavailable, "an earlier transaction of origin %d is still undecided here", p.Origin)
		}
		for _, op := range q.Ops {
			inUse[op.ID] = true
		}
	}
	next := int(p.Base)
	for _, op := range p.Ops {
		if err := CheckID(op.ID); err != nil {
			return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
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
			if _, ok := st.ids.lookup(op.ID); ok {
				return protocol.Errorf(protocol.CodeDuplicate, "id %q is already enrolled", op.ID)
			}
			if err := (sharing.Share{Plus: op.Plus, Minus: op.Minus}).Check(st.dim); err != nil {
				return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
			}
		case protocol.OpDelete:
			ref, ok := st.ids.lookup(op.ID)
			if !ok || ref.seg != int(p.Origin) || ref.seq != int(op.Seq) {
				return protocol.Errorf(protocol.CodeUnknownID, "id %q is not enrolled at row %d of origin %d", op.ID, op.Seq, p.Origin)
			}
		}
	}
	if next > protocol.MaxRows {
		return protocol.Errorf(protocol.CodeBadRequest, "segment full")
	}
	return nil
}

// apply commits a prepared transaction's ops (caller holds mu for writing).
func (st *state) apply(p *protocol.Prepare) error {
	seg := st.segs[p.Origin]
	for _, op := range p.Ops {
		switch op.Kind {
		case protocol.OpPut:
			if int(op.Seq) != len(seg.idEnd) {
				return fmt.Errorf("party: row %d of origin %d applied out of order (%d rows)", op.Seq, p.Origin, len(seg.idEnd))
			}
			if err := seg.store.Put(int(op.Seq), sharing.Share{Plus: op.Plus, Minus: op.Minus}, true); err != nil {
				return err
			}
			seg.idData = append(seg.idData, op.ID...)
			seg.idEnd = append(seg.idEnd, uint64(len(seg.idData)))
			st.ids.insert(op.ID, rowRef{seg: int(p.Origin), seq: int(op.Seq)})
		case protocol.OpDelete:
			if err := seg.store.Delete(int(op.Seq)); err != nil {
				return err
			}
			st.ids.remove(op.ID)
		}
		xor16(&seg.hash, rowHash(int(p.Origin), int(op.Seq), op.ID))
	}
	return nil
}

// decide resolves a pending transaction; unknown ones are already resolved.
func (st *state) decide(txn protocol.TxnID, commit bool) (*protocol.Prepare, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	p, ok := st.pending[txn]
	if !ok {
		return nil, nil
	}
	delete(st.pending, txn)
	if commit {
		if err := st.apply(p); err != nil {
			return p, err
		}
		st.changed.Broadcast()
	}
	return p, nil
}
