package replicated

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
)

// Rebuild. Holder i keeps s_i and s_(i+1); s_i is also holder i-1's next
// share and s_(i+1) holder i+1's own. So a holder whose data is gone gets
// its two shares back from the two others, one share from each: neither
// sends more than the share it holds in common with the asker, and the
// asker learns nothing it did not hold before. Each row's id and liveness
// come from both, which must agree. The rows are written to a fresh log
// through the holder's own engine (rowtxn.Restore), so the rebuilt log
// replays as any other; the holder then starts as usual and gets, from
// the entries' outboxes, whatever was enrolled or deleted while it was
// down and the rebuild did not fetch.
//
// What a deviating peer can do: send a wrong share. Only it holds that
// share besides the lost holder, so each share is checked against the
// record the other peer keeps of it (records.go): a changed share is
// refused, naming the peer that sent it, and nothing is written (the new
// log is removed). A peer can still refuse to answer (a denial, never a
// wrong answer).

// fetchRows answers a rebuilding (or catching up) holder: rows of one
// origin's segment, with the one share of them this holder holds in common
// with the asker, that share's salt, this holder's record of the share the
// asker's other peer sends, and a fresh record of the asker's third share
// (records.go). An Attest fetch gets the salts and records only.
func (h *Holder[E]) fetchRows(_ context.Context, r engine.Request) protocol.Msg {
	m := r.Msg.(*protocol.ReplFetch)
	self, asker := h.Self(), h.p.PartyIndex(r.From.Name)
	var which int // 0: the asker's next share is this holder's own; 1: the asker's own share is this holder's next
	switch asker {
	case (self + 1) % replicated.Holders:
		which = 1
	case (self + 2) % replicated.Holders:
	default:
		return protocol.Errorf(protocol.CodeForbidden, "only another share holder rebuilds from %s", h.env.Self)
	}
	if int(m.Seg) >= replicated.Holders {
		return protocol.Errorf(protocol.CodeBadRequest, "segment %d of %d", m.Seg, replicated.Holders)
	}
	h.RLock()
	defer h.RUnlock()
	sh := h.Shares(int(m.Seg))
	st := sh.own
	if which == 1 {
		st = sh.next
	}
	total := sh.Rows()
	from := min(int(m.From), total)
	to := min(from+int(m.Max), total)
	d := h.p.Dim()
	res := &protocol.ReplRows{Seg: m.Seg, Total: uint32(total), From: uint32(from), Bits: uint8(h.p.Bits), Dim: uint16(d), Epoch: h.EpochLocked(int(m.Seg)),
		Salts: make([]byte, 0, (to-from)*replicated.SaltSize), Records: make([]byte, 0, 2*(to-from)*replicated.RecordSize)}
	if !m.Attest {
		res.Shares = make([]byte, 0, (to-from)*d*h.p.Bits/8)
	}
	row, third := make([]E, d), make([]E, d)
	for seq := from; seq < to; seq++ {
		res.IDs = append(res.IDs, h.ID(int(m.Seg), seq))
		res.Live = append(res.Live, sh.IsLive(seq))
		if !m.Attest {
			if _, err := st.Row(seq, row); err != nil {
				return protocol.Errorf(protocol.CodeInternal, "%v", err)
			}
			res.Shares = append(res.Shares, additive.ElemBytes(row)...)
		}
		if err := h.rowRecords(res, sh, seq, which, asker, third); err != nil {
			return protocol.Errorf(protocol.CodeInternal, "%v", err)
		}
	}
	return res
}

// RebuildReport says what a rebuild restored.
type RebuildReport struct {
	Rows, Live [replicated.Holders]int // per origin segment
}

// Rebuild restores holder env.Self into a new log at path (there must be
// none) from the two other holders, reached through env.Net as env.Self.
// progress, when set, is told after every batch of rows.
func Rebuild(ctx context.Context, env engine.Env, path string, progress func(seg, done, total int)) (*RebuildReport, error) {
	p, err := NewParams(env.Params)
	if err != nil {
		return nil, err
	}
	self := p.PartyIndex(env.Self)
	if self < 0 {
		return nil, fmt.Errorf("replicated: %s is not a share holder of this cluster", env.Self)
	}
	if exists, err := store.Exists(path); err != nil {
		return nil, fmt.Errorf("replicated: %w", err)
	} else if exists {
		return nil, fmt.Errorf("replicated: %s already exists: rebuild writes a new log; move the old one aside first", path)
	}
	eng, err := New(env)
	if err != nil {
		return nil, err
	}
	h, ok := eng.(interface {
		Restore(k, base int, ids []string, live []bool, shares [][]byte, epoch uint32) error
		Start(engine.Log) error
	})
	if !ok {
		return nil, fmt.Errorf("replicated: the holder engine cannot restore rows")
	}
	l, err := engine.OpenLog(env, path, engine.Binding(p.Params, env.Bound(), Kind, [32]byte{}), eng.Replay)
	if err != nil {
		return nil, err
	}
	rep, err := restoreAll(ctx, env, p, self, h, l, progress)
	if cerr := l.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil { // nothing half-made stays: the next rebuild starts afresh
		if rerr := store.Remove(path); rerr != nil {
			return nil, fmt.Errorf("%w (and the new log %s could not be removed: %v; remove it before rebuilding again)", err, path, rerr)
		}
		return nil, err
	}
	return rep, nil
}

// restoreAll fetches every origin's rows for holder self from the two
// other holders, checks them (verifyRows) and restores them into h.
func restoreAll(ctx context.Context, env engine.Env, p *Params, self int, h interface {
	Restore(k, base int, ids []string, live []bool, shares [][]byte, epoch uint32) error
	Start(engine.Log) error
}, l engine.Log, progress func(seg, done, total int)) (*RebuildReport, error) {
	if err := h.Start(l); err != nil {
		return nil, err
	}
	prev := p.Party((self + 2) % replicated.Holders).Name // holds s_self as its next share
	next := p.Party((self + 1) % replicated.Holders).Name // holds s_(self+1) as its own
	rep := &RebuildReport{}
	for seg := range replicated.Holders {
		total := -1
		var epoch uint32
		for from := 0; total < 0 || from < total; {
			a, b, err := fetchBoth(ctx, env.Net, p, prev, next, seg, from, protocol.MaxFetchRows, false)
			if err != nil {
				return nil, err
			}
			if total < 0 {
				total = int(min(a.Total, b.Total)) // both at a transaction's end: the smaller is all the other has
				epoch = a.Epoch
			}
			if a.Epoch != epoch || b.Epoch != epoch {
				return nil, fmt.Errorf("replicated: origin %s's rows were reshared during the rebuild (epochs %d, %d, %d): move the new log aside and rebuild again", p.Party(seg).Name, epoch, a.Epoch, b.Epoch)
			}
			if from >= total {
				break // an empty segment
			}
			n := min(len(a.IDs), len(b.IDs), total-from)
			if n <= 0 {
				return nil, fmt.Errorf("replicated: %s and %s sent no rows of origin %s from %d of %d", prev, next, p.Party(seg).Name, from, total)
			}
			shares, err := verifyRows(p, self, prev, next, a, b, n)
			if err != nil {
				return nil, fmt.Errorf("replicated: %w", err)
			}
			if err := h.Restore(seg, from, a.IDs[:n], a.Live[:n], shares, epoch); err != nil {
				return nil, err
			}
			for _, live := range a.Live[:n] {
				if live {
					rep.Live[seg]++
				}
			}
			rep.Rows[seg] += n
			from += n
			if progress != nil {
				progress(seg, from, total)
			}
		}
	}
	return rep, nil
}

// fetchBoth fetches up to max rows from row from of origin seg's segment
// from both peers (attest: their records only), again while they disagree
// on the segment's rows (but for records) or on the rows' liveness (a
// change between the two fetches). Two peers that keep disagreeing on
// the rows are refused: taking the smaller count would let one peer cut a
// rebuild short.
func fetchBoth(ctx context.Context, d network.Dialer, p *Params, prev, next string, seg, from, max int, attest bool) (a, b *protocol.ReplRows, err error) {
	for try := 0; ; try++ {
		if a, err = fetch(ctx, d, p, prev, seg, from, max, attest); err != nil {
			return nil, nil, err
		}
		if b, err = fetch(ctx, d, p, next, seg, from, max, attest); err != nil {
			return nil, nil, err
		}
		n := min(len(a.IDs), len(b.IDs))
		// (Records of rows both have need no count: a peer that missed a
		// decision of later rows may have fewer.)
		same := attest || a.Total == b.Total && len(a.IDs) == len(b.IDs)
		if same && slices.Equal(a.Live[:n], b.Live[:n]) {
			return a, b, nil
		}
		if try == 5 {
			if !same {
				return nil, nil, fmt.Errorf("replicated: %s says origin %s has %d rows (sent %d from %d), %s says %d (sent %d): one of them is faulty, or changes keep coming; try again", prev, p.Party(seg).Name, a.Total, len(a.IDs), from, next, b.Total, len(b.IDs))
			}
			return nil, nil, fmt.Errorf("replicated: %s and %s disagree on which rows of origin %s from %d are deleted", prev, next, p.Party(seg).Name, from)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func fetch(ctx context.Context, d network.Dialer, p *Params, peer string, seg, from, max int, attest bool) (*protocol.ReplRows, error) {
	rows, err := fetchFrom(ctx, d, p, peer, seg, from, max, attest)
	if err != nil {
		return nil, &peerFault{peer: peer, err: err}
	}
	return rows, nil
}

// peerFault is a fetch that failed at, or was answered wrongly by, peer:
// the holder that fetched counts it against that peer (a peer that keeps
// a stale holder out by garbling its catch-up is named).
type peerFault struct {
	peer string
	err  error
}

func (e *peerFault) Error() string { return e.err.Error() }
func (e *peerFault) Unwrap() error { return e.err }

func fetchFrom(ctx context.Context, d network.Dialer, p *Params, peer string, seg, from, max int, attest bool) (*protocol.ReplRows, error) {
	resp, err := rpc.Call(ctx, d, peer, &protocol.ReplFetch{Seg: uint8(seg), From: uint32(from), Max: uint32(max), Attest: attest})
	if err != nil {
		return nil, fmt.Errorf("replicated: fetching rows from %s: %w", peer, err)
	}
	rows, ok := resp.(*protocol.ReplRows)
	if !ok {
		return nil, fmt.Errorf("replicated: %s answered a fetch with %v", peer, resp.Type())
	}
	if int(rows.Seg) != seg || int(rows.From) != from {
		return nil, fmt.Errorf("replicated: %s sent rows %d of origin %d for %d of %d", peer, rows.From, rows.Seg, from, seg)
	}
	if int(rows.Bits) != p.Bits || int(rows.Dim) != p.Dim() { // (the decoder checked the sizes against these)
		return nil, fmt.Errorf("replicated: %s sent shares of %d elements of %d bits; this cluster has %d of %d", peer, rows.Dim, rows.Bits, p.Dim(), p.Bits)
	}
	if len(rows.IDs) > max || attest != (len(rows.Shares) == 0 && len(rows.IDs) > 0) && len(rows.IDs) > 0 {
		return nil, fmt.Errorf("replicated: %s sent %d rows (shares: %v) for a fetch of %d (records only: %v)", peer, len(rows.IDs), len(rows.Shares) > 0, max, attest)
	}
	return rows, nil
}

// rebuildInto is the mode's Rebuild: Rebuild with a report to out.
func rebuildInto(ctx context.Context, env engine.Env, path string, out io.Writer) error {
	last := time.Now()
	rep, err := Rebuild(ctx, env, path, func(seg, done, total int) {
		if time.Since(last) > 2*time.Second || done == total {
			last = time.Now()
			fmt.Fprintf(out, "origin %s: %d of %d rows\n", env.Params.Party(seg).Name, done, total)
		}
	})
	if err != nil {
		return err
	}
	for seg := range replicated.Holders {
		name := env.Params.Party(seg).Name
		if rep.Rows[seg] == 0 { // not a failure: rows are segmented by the holder they were enrolled through
			fmt.Fprintf(out, "origin %s: no rows (none were enrolled through %s): nothing to restore\n", name, name)
			continue
		}
		fmt.Fprintf(out, "origin %s: %d rows restored from the two other holders, %d live\n", name, rep.Rows[seg], rep.Live[seg])
	}
	return nil
}
