package replicated

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// No share from a single source (issue 44 item 1). Holder i takes s_i
// from holder i-1 alone, and s_(i+1) from holder i+1 alone, when it is
// rebuilt or catches up: the only other copy of each. A peer that planted
// a face in its copy and served it would then make both copies agree, and
// every check would compare that peer with itself. So every share s_j has
// a record kept by the holder that does not hold it (replicated.Recorder):
// a digest salted with a salt that only the two holders of s_j know, bound
// to the cluster, the row's id and j (replicated.Record).
//
// Where records come from:
//   - Sealed enrollment: the operator's client draws the salts and
//     computes the records, and seals to holder i its pair, the salts of
//     its pair and its record of s_(i+2) (the operator signed every part).
//     The vote compares, for every share, the two holders' digests of
//     their copies (with their salts) and the recorder's record.
//   - Reshare: the shares change and so would the records; the recorder
//     cannot compute the new one (it lacks s_j). Each holder writes its
//     new pair with its record unset; once the reshare commits, the
//     recorder asks both holders of s_j for the new record of every row
//     (attestRecords, over each one's own pinned TLS link: no relay) and
//     keeps it only when the two agree.
//   - Rebuild and catch-up: each of the two peers sends, with the share it
//     has in common with the asker, that share's salt, its own record of
//     the share the other peer sends, and a fresh record of the asker's
//     third share (both hold it). The asker checks each share against the
//     other peer's record and the two fresh records against each other
//     (verifyRows), and keeps the agreed record as its own.
//
// A deviating holder that serves a changed share is refused: its share no
// longer matches the other peer's record (finding a salt and share that
// match a SHA-256 record is a second preimage). The refusal names the peer
// that served it; since the other could have changed its record instead,
// it says so, and the asker takes nothing of those rows.

// unitSize is the bytes of a holder's row in its log and on the wire: its
// pair of shares and its trailer.
func unitSize(p *config.Params) int {
	return 2*p.Dim()*p.Ring().Bits/8 + replicated.TrailerSize
}

// trailers are one segment's rows' trailers at a holder (caller holds the
// rows' lock: they change with the shares).
type trailers struct {
	b       []byte       // replicated.TrailerSize bytes a row
	pending map[int]bool // live rows whose record is not attested yet
}

func (t *trailers) put(seq int, b []byte, live bool) error {
	if b != nil && len(b) != replicated.TrailerSize {
		return fmt.Errorf("replicated: a row's trailer of %d bytes, want %d", len(b), replicated.TrailerSize)
	}
	at := seq * replicated.TrailerSize
	if need := at + replicated.TrailerSize; need > len(t.b) {
		t.b = slices.Grow(t.b, need-len(t.b))[:need]
	}
	dst := t.b[at : at+replicated.TrailerSize]
	if b == nil {
		clear(dst)
	} else {
		copy(dst, b)
	}
	tr := t.get(seq)
	if live && !tr.Recorded() {
		if t.pending == nil {
			t.pending = map[int]bool{}
		}
		t.pending[seq] = true
	} else {
		delete(t.pending, seq)
	}
	return nil
}

func (t *trailers) erase(seq int) {
	if at := seq * replicated.TrailerSize; at+replicated.TrailerSize <= len(t.b) {
		clear(t.b[at : at+replicated.TrailerSize])
	}
	delete(t.pending, seq)
}

func (t *trailers) get(seq int) replicated.Trailer {
	at := seq * replicated.TrailerSize
	if at < 0 || at+replicated.TrailerSize > len(t.b) {
		return replicated.Trailer{}
	}
	tr, _ := replicated.ParseTrailer(t.b[at : at+replicated.TrailerSize])
	return tr
}

// unattested is the sorted rows whose record is not attested yet.
func (t *trailers) unattested() []int {
	out := make([]int, 0, len(t.pending))
	for seq := range t.pending {
		out = append(out, seq)
	}
	slices.Sort(out)
	return out
}

// rowRecords fills, for a fetch from holder asker, the salts of the share
// this holder sends (held[which]), its own record (of the share the
// asker's other peer sends) and a fresh record of the asker's third share,
// for row seq of origin seg (caller holds the rows' lock).
func (h *Holder[E]) rowRecords(res *protocol.ReplRows, sh pair[E], seq, which, asker int, row []E) error {
	if !sh.IsLive(seq) {
		res.Salts = append(res.Salts, make([]byte, replicated.SaltSize)...)
		res.Records = append(res.Records, make([]byte, 2*replicated.RecordSize)...)
		return nil
	}
	tr := sh.tr.get(seq)
	res.Salts = append(res.Salts, tr.Salts[which][:]...)
	res.Records = append(res.Records, tr.Record[:]...)
	// The asker's third share: this holder's own if it is the asker's
	// predecessor, its next if its successor.
	third := (asker + 2) % replicated.Holders
	held := replicated.Held(h.Self())
	k := slices.Index(held[:], third)
	st := sh.own
	if k == 1 {
		st = sh.next
	}
	if _, err := st.Row(seq, row); err != nil {
		return err
	}
	rec := replicated.Record(h.p.ClusterID(), h.ID(sh.seg, seq), third, tr.Salts[k][:], additive.ElemBytes(row))
	res.Records = append(res.Records, rec[:]...)
	return nil
}

// fetchRefusal is a refusal of rows taken from a peer: they do not match
// what the other peer keeps of them.
type fetchRefusal struct {
	peer, recorder string // the peer that served them, and the one whose records refused them
	err            error
}

func (e *fetchRefusal) Error() string { return e.err.Error() }

// verifyRows checks rows fetched for holder self from its predecessor a
// (its own share s_self) and its successor b (its next share s_(self+1)),
// n rows from the first of both answers: each share against the other
// peer's record of it, and the two fresh records of self's third share
// against each other, after the two peers' ids of every row. It returns
// each live row's unit (pair and trailer, nil for a deleted row), or an
// error: a *fetchRefusal naming the peer whose rows were refused.
func verifyRows(p *Params, self int, prev, next string, a, b *protocol.ReplRows, n int) ([][]byte, error) {
	half := p.Dim() * p.Bits / 8
	units := make([][]byte, n)
	cluster := p.ClusterID()
	rec := func(r *protocol.ReplRows, i, k int) []byte {
		return r.Records[(2*i+k)*replicated.RecordSize : (2*i+k+1)*replicated.RecordSize]
	}
	for i := range n {
		if a.IDs[i] != b.IDs[i] {
			return nil, fmt.Errorf("%s and %s disagree on row %d of origin %s (%q, %q): they are inconsistent; check 'idface cluster status'", prev, next, int(a.From)+i, p.Party(int(a.Seg)).Name, a.IDs[i], b.IDs[i])
		}
	}
	for i := range n {
		if !a.Live[i] {
			continue
		}
		id := a.IDs[i]
		sa, sb := a.Shares[i*half:(i+1)*half], b.Shares[i*half:(i+1)*half]
		salta, saltb := a.Salts[i*replicated.SaltSize:(i+1)*replicated.SaltSize], b.Salts[i*replicated.SaltSize:(i+1)*replicated.SaltSize]
		row := int(a.From) + i
		for _, c := range []struct {
			share, salt, record []byte
			j                   int
			peer, recorder      string
		}{
			{sa, salta, rec(b, i, 0), self, prev, next},
			{sb, saltb, rec(a, i, 0), (self + 1) % replicated.Holders, next, prev},
		} {
			if slices.Equal(c.record, make([]byte, replicated.RecordSize)) {
				return nil, &fetchRefusal{peer: c.peer, recorder: c.recorder, err: fmt.Errorf("row %d of origin %s (%q): %s has no record of the share %s sends yet (a reshare's records are attested after it commits): try again in a few seconds", row, p.Party(int(a.Seg)).Name, id, c.recorder, c.peer)}
			}
			if got := replicated.Record(cluster, id, c.j, c.salt, c.share); string(got[:]) != string(c.record) {
				return nil, &fetchRefusal{peer: c.peer, recorder: c.recorder, err: fmt.Errorf("row %d of origin %s (%q): the share %s sent does not match the record %s keeps of it: refused, nothing of it was taken. One of them is faulty or compromised (%s served the share)", row, p.Party(int(a.Seg)).Name, id, c.peer, c.recorder, c.peer)}
			}
		}
		third := rec(a, i, 1)
		if string(third) != string(rec(b, i, 1)) {
			return nil, &fetchRefusal{peer: prev, recorder: next, err: fmt.Errorf("row %d of origin %s (%q): %s and %s attest different records of the share they both hold: refused; one of them is faulty or compromised", row, p.Party(int(a.Seg)).Name, id, prev, next)}
		}
		var tr replicated.Trailer
		copy(tr.Salts[0][:], salta)
		copy(tr.Salts[1][:], saltb)
		copy(tr.Record[:], third)
		units[i] = tr.Append(slices.Concat(sa, sb))
	}
	return units, nil
}

// refusedRows counts a refusal of fetched rows against the pair of peers
// one of which is faulty (the one that served them, and the one whose
// record refused them; or the two whose attestations differ: this holder
// cannot tell which), and logs it.
func (h *Holder[E]) refusedRows(err error) {
	if fr, ok := err.(*fetchRefusal); ok {
		h.m.fetchRefused.WithLabelValues(pairLabel(h.p, h.p.PartyIndex(fr.peer), h.p.PartyIndex(fr.recorder))).Inc()
		h.env.Log.Warn("rows taken from the other holders were refused: a share does not match the other holder's record of it, or the two attest different records; one of the two is faulty or compromised", "served_by", fr.peer, "records_of", fr.recorder, "why", fr.err.Error())
	}
}

// unattested counts the live rows whose record is not attested yet.
func (h *Holder[E]) unattested() float64 {
	h.RLock()
	defer h.RUnlock()
	n := 0
	for k := range replicated.Holders {
		n += len(h.Shares(k).tr.pending)
	}
	return float64(n)
}

// recordsEvery is how often a holder looks for records to attest.
const recordsEvery = time.Second

// attestRecords runs while the holder runs: whenever rows have no
// attested record (after a reshare), it asks both holders of the share it
// records for the new record and keeps it where the two agree.
func (h *Holder[E]) attestRecords(ctx context.Context) {
	if h.env.Net == nil {
		return
	}
	engine.Every(ctx, recordsEvery, func() {
		for k := range replicated.Holders {
			if err := h.attestSegment(ctx, k); err != nil && ctx.Err() == nil {
				h.refusedRows(err)
				h.env.Log.Warn("records of reshared rows not attested yet", "origin", h.p.Party(k).Name, "err", err)
			}
		}
	})
}

// attestSegment attests the unattested records of origin k's rows, one
// run of consecutive rows per fetch.
func (h *Holder[E]) attestSegment(ctx context.Context, k int) error {
	h.attesting.Lock()
	defer h.attesting.Unlock()
	h.RLock()
	seqs := h.Shares(k).tr.unattested()
	epoch := h.EpochLocked(k)
	h.RUnlock()
	self := h.Self()
	prev := h.p.Party((self + 2) % replicated.Holders).Name
	next := h.p.Party((self + 1) % replicated.Holders).Name
	for len(seqs) > 0 {
		lo := seqs[0]
		hi := lo + 1
		for _, s := range seqs[1:] {
			if s != hi || hi-lo >= protocol.MaxFetchRows {
				break
			}
			hi++
		}
		seqs = seqs[hi-lo:]
		a, b, err := fetchBoth(ctx, h.env.Net, h.p, prev, next, k, lo, hi-lo, true)
		if err != nil {
			return err
		}
		if a.Epoch != epoch || b.Epoch != epoch {
			return fmt.Errorf("origin %s's rows are at epoch %d at %s and %d at %s, %d here", h.p.Party(k).Name, a.Epoch, prev, b.Epoch, next, epoch)
		}
		n := min(len(a.IDs), len(b.IDs), hi-lo)
		if err := h.keepRecords(k, lo, a, b, n, epoch); err != nil {
			return err
		}
	}
	return nil
}

// keepRecords rewrites rows [lo, lo+n) of origin k with the records both
// peers attested (each row's pair and salts as they are here).
func (h *Holder[E]) keepRecords(k, lo int, a, b *protocol.ReplRows, n int, epoch uint32) error {
	units := make([][]byte, n)
	ids := make([]string, n)
	zero := make([]byte, unitSize(h.p.Params))
	h.RLock()
	sh := h.Shares(k)
	for i := range n {
		seq := lo + i
		ids[i] = h.ID(k, seq)
		if ids[i] != a.IDs[i] || ids[i] != b.IDs[i] {
			h.RUnlock()
			return fmt.Errorf("row %d of origin %s is %q here, %q and %q at the peers", seq, h.p.Party(k).Name, ids[i], a.IDs[i], b.IDs[i])
		}
		if !sh.IsLive(seq) {
			units[i] = zero
			continue
		}
		third := a.Records[(2*i+1)*replicated.RecordSize : (2*i+2)*replicated.RecordSize]
		if a.Live[i] && b.Live[i] && string(third) != string(b.Records[(2*i+1)*replicated.RecordSize:(2*i+2)*replicated.RecordSize]) {
			h.RUnlock()
			return &fetchRefusal{peer: h.p.Party((h.Self() + 2) % replicated.Holders).Name, recorder: h.p.Party((h.Self() + 1) % replicated.Holders).Name,
				err: fmt.Errorf("row %d of origin %s (%q): the two holders of the share this holder records attest different records of it: one of them is faulty or compromised; the row keeps no record", seq, h.p.Party(k).Name, ids[i])}
		}
		u, err := sh.unit(seq)
		if err != nil {
			h.RUnlock()
			return err
		}
		if a.Live[i] && b.Live[i] {
			copy(u[len(u)-replicated.RecordSize:], third) // the trailer ends with the record
		}
		units[i] = u
	}
	h.RUnlock()
	return h.Rewrite(k, lo, ids, units, epoch)
}
