package replicated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/rowtxn"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/replicated"
)

// Currency (issue 35 item 4). A holder restored from a copy older than
// the other holders' rows (a backup taken before the last deletions)
// answered every query with rows that differ, so every query was refused,
// and it was neither caught up nor counted down.
//
// A segment's changes are its enrollments and deletions, 2*rows - live:
// they only grow, and two holders that applied the same changes of an
// origin count the same (a reshare adds none, but the segment's epoch).
// So a holder compares its count per origin with each peer's (the row
// counts of the row map they send each other), at start and then every
// currencyEvery until it has compared with both. Behind both on an
// origin (never on one peer's word: a deviating holder would make a
// current one stand down and have its own shares go unchecked), it stands
// down: it answers no query and no change as the entry, and answers the
// other servers' health requests, and its peers' queries, with
// rowtxn.StandDown, so that entries, helpers and the decider count it
// down by their own contact and the others answer degraded without it.
// It still takes the transactions the entries deliver to it, which is how
// a holder that was only down catches up, within seconds; one refused for
// lack of what it missed is answered StandDown too, and held for it.
//
// After catchUpAfter still behind (a restored copy: nobody holds what it
// missed, and deleted shares are erased everywhere), it fetches the
// difference from the two other holders as a rebuild does (ReplFetch):
// the ids and liveness of the origin's rows, which both must send alike,
// and its own two shares of the rows it lacks, one from each. It deletes
// the rows both deleted and appends the rows it lacks (rowtxn.Revoke,
// rowtxn.Restore), then compares again and serves. The fetch carries its
// shares of every row of the origin when a deletion was missed (the
// liveness of each row is needed), else of the missing rows only. A copy
// that is not an older state of theirs (a row with another id, a row
// live there and deleted here) or missed a reshare (its shares are of an
// older epoch) cannot be caught up: it stays down and says to rebuild it.

const (
	// currencyEvery is how often a holder that has not compared its rows
	// with both other holders yet, or stands down, looks again.
	currencyEvery = time.Second
	// catchUpAfter is how long a holder found behind waits for the
	// entries to deliver what they held for it before it fetches the
	// difference from the other holders.
	catchUpAfter = 3 * time.Second
	// catchUpRetry is how long after a failed catch-up the next begins
	// (each fetches the origin's rows again).
	catchUpRetry = 30 * time.Second
	// startWait bounds the comparison before a holder serves.
	startWait = time.Second
)

// changes counts a segment's enrollments and deletions.
func changes(s protocol.SegDigest) int64 { return 2*int64(s.Rows) - int64(s.Live) }

// lag is how far this holder's rows of one origin are behind a peer's.
type lag struct {
	peer    string
	origin  int
	missing int64 // the peer's changes of the origin that this holder lacks
	reshare bool  // the peer's rows of the origin were reshared since (a later epoch)
}

// look is what comparing this holder's rows with one peer's found: the
// origins it is behind on, or why it could not compare.
type look struct {
	peer   string
	digest protocol.Digest // the peer's row map, sealed for the two (its counts are plain)
	lags   []lag
	err    error
}

// survey compares row map mine (epochs: its segments' reshare epochs)
// with each peer's, all at once, as server env.Self.
func survey(ctx context.Context, env engine.Env, p *Params, mine protocol.Digest, epochs []uint32, peers []string) []look {
	out := make([]look, len(peers))
	var wg sync.WaitGroup
	for i, name := range peers {
		wg.Go(func() { out[i] = compareWith(ctx, env, p, mine, epochs, name) })
	}
	wg.Wait()
	return out
}

func compareWith(ctx context.Context, env engine.Env, p *Params, mine protocol.Digest, epochs []uint32, peer string) look {
	l := look{peer: peer}
	cctx, cancel := context.WithTimeout(ctx, contactWait(p))
	resp, err := rpc.Call(cctx, env.Net, peer, &protocol.Health{})
	cancel()
	if err != nil {
		l.err = err
		return l
	}
	h, ok := resp.(*protocol.HealthOK)
	if !ok || len(h.Digest) != len(mine) {
		l.err = fmt.Errorf("%s answered health without its row map", env.Peer(peer))
		return l
	}
	l.digest = h.Digest
	var sealed protocol.Digest // nil without the pair key: counts only
	if _, ok := env.PairKeys[peer]; ok {
		sealed, _ = env.SealDigest(peer, mine)
	}
	for k := range mine {
		have, theirs := changes(mine[k]), changes(h.Digest[k])
		switch {
		case theirs > have:
			// Missing changes: a reshare missed too cannot be caught up,
			// and the advice must say so (a rebuild).
			g := lag{peer: peer, origin: k, missing: theirs - have}
			cctx, cancel := context.WithTimeout(ctx, contactWait(p))
			e, err := epochAt(cctx, env.Net, peer, k)
			cancel()
			g.reshare = err == nil && e > epochs[k]
			l.lags = append(l.lags, g)
		case theirs == have && sealed != nil && sealed[k] != h.Digest[k]:
			// As many changes and other rows: a reshare this copy missed
			// shows in the epoch (anything else is a difference, for
			// 'cluster status' to show, not an older copy).
			cctx, cancel := context.WithTimeout(ctx, contactWait(p))
			e, err := epochAt(cctx, env.Net, peer, k)
			cancel()
			if err == nil && e > epochs[k] {
				l.lags = append(l.lags, lag{peer: peer, origin: k, reshare: true})
			}
		}
	}
	return l
}

// epochAt is origin k's reshare epoch at peer (a fetch of no row).
func epochAt(ctx context.Context, d network.Dialer, peer string, k int) (uint32, error) {
	resp, err := rpc.Call(ctx, d, peer, &protocol.ReplFetch{Seg: uint8(k), From: math.MaxUint32, Max: 1})
	if err != nil {
		return 0, err
	}
	rows, ok := resp.(*protocol.ReplRows)
	if !ok {
		return 0, fmt.Errorf("%s answered a fetch with %v", peer, resp.Type())
	}
	return rows.Epoch, nil
}

// behindAll is the lags of the origins on which every peer of looks is
// ahead, and whether every peer could be compared.
func behindAll(looks []look) (lags []lag, all bool) {
	all = true
	for k := range replicated.Holders {
		var ls []lag
		for _, l := range looks {
			if l.err != nil {
				all = false
				ls = nil
				break
			}
			if i := slices.IndexFunc(l.lags, func(g lag) bool { return g.origin == k }); i >= 0 {
				ls = append(ls, l.lags[i])
			}
		}
		if len(ls) == len(looks) && len(ls) > 0 {
			lags = append(lags, ls...)
		}
	}
	return lags, all
}

// reshared reports whether both peers say that this holder missed a
// reshare of one origin (lags: behindAll's, every peer's of each origin):
// never on one peer's word, since a holder that stands down until rebuilt
// is counted down, and a deviating peer would then have its own vectors
// go unchecked (the degraded path).
func reshared(lags []lag) bool {
	for k := range replicated.Holders {
		n, r := 0, 0
		for _, g := range lags {
			if g.origin == k {
				n++
				if g.reshare {
					r++
				}
			}
		}
		if n > 1 && r == n {
			return true
		}
	}
	return false
}

// describe says what lags are, by origin: "behind p1 and p2 on origin p3's
// changes (2 missing)".
func describe(p *Params, lags []lag) string {
	type key struct {
		origin  int
		missing int64
		reshare bool
	}
	var keys []key
	peers := map[key][]string{}
	for _, g := range lags {
		k := key{g.origin, g.missing, g.reshare}
		if _, ok := peers[k]; !ok {
			keys = append(keys, k)
		}
		peers[k] = append(peers[k], g.peer)
	}
	var parts []string
	for _, k := range keys {
		what := fmt.Sprintf("changes (%d missing)", k.missing)
		switch {
		case k.reshare && k.missing > 0:
			what = fmt.Sprintf("changes (%d missing) and reshares (its shares are of an older epoch)", k.missing)
		case k.reshare:
			what = "reshares (its shares are of an older epoch)"
		}
		parts = append(parts, fmt.Sprintf("behind %s on origin %s's %s", strings.Join(peers[k], " and "), p.Party(k.origin).Name, what))
	}
	return strings.Join(parts, ", ")
}

// currency is what a holder knows of its rows against its peers'.
type currency struct {
	mu  sync.Mutex
	why string // why it stands down ("": it serves)
	// rebuild: it stands down until an operator rebuilds it (its shares
	// are of an older epoch than both peers'), and the others count it
	// down; otherwise it is catching up, and they wait for it.
	rebuild bool
	since   time.Time // when it was found behind
	failed  error     // why its last catch-up failed (nil: none since it was found behind)
	retry   time.Time // no catch-up before then, after one failed
	done    bool      // compared with both peers, behind neither
	// suspect is, by origin, the changes both peers had when this holder
	// was last found behind them and did not stand down yet (suspectAt):
	// a change in flight puts a current holder behind for a moment, so
	// it stands down only if it has not reached those counts within
	// staleAfter.
	suspect   map[int]int64
	suspectAt time.Time
}

// staleAfter is how long a holder found behind may take to reach what
// its peers had then before it stands down (deliveries in flight).
const staleAfter = 3 * time.Second

// settled reports whether lags (found now, mine: this holder's changes
// per origin) have lasted staleAfter: false while a lag may be a change
// in flight. It keeps the suspicion in c (locked by the caller).
func (c *currency) settled(lags []lag, mine []int64) bool {
	if len(lags) == 0 {
		c.suspect = nil
		return false
	}
	for k, target := range c.suspect {
		if k >= len(mine) || mine[k] >= target {
			delete(c.suspect, k) // reached what the peers had: that lag was in flight
		}
	}
	if len(c.suspect) == 0 {
		c.suspect, c.suspectAt = map[int]int64{}, time.Now()
		for _, l := range lags {
			if l.origin < len(mine) {
				c.suspect[l.origin] = max(c.suspect[l.origin], mine[l.origin]+l.missing)
			}
		}
		return false
	}
	return time.Since(c.suspectAt) >= staleAfter
}

// standing is why this holder stands down, or "".
func (h *Holder[E]) standing() string {
	h.cur.mu.Lock()
	defer h.cur.mu.Unlock()
	return h.cur.why
}

// look compares this holder's rows with its peers' once: behind both on
// an origin, it stands down and, with fetch, once catchUpAfter has passed
// (and catchUpRetry since a failed catch-up), catches up from them. It
// reports whether it is done: compared with both and behind neither. At
// start (before it serves) it stands down at once when behind both: a
// running holder waits staleAfter first, as a change may be in flight,
// but one that has not served yet would answer from its older rows
// meanwhile, and every query it helps would be refused.
func (h *Holder[E]) look(ctx context.Context, fetch, start bool) bool {
	looks := h.survey(ctx)
	lags, all := behindAll(looks)
	counts := h.changeCounts() // not under cur.mu: health answers take it, never the rows' lock
	h.cur.mu.Lock()
	standing := h.cur.why != ""
	wait := !standing && !start && !h.cur.settled(lags, counts)
	h.cur.mu.Unlock()
	if wait && len(lags) > 0 {
		return false // perhaps a change in flight: look again
	}
	if len(lags) > 0 && fetch && h.dueToCatchUp() {
		err := h.catchUp(ctx, lags, looks)
		var pf *peerFault
		if errors.As(err, &pf) && ctx.Err() == nil {
			h.m.catchUpFailed.WithLabelValues(pf.peer).Inc()
			h.env.Log.Warn("a catch-up failed at a peer: it keeps this holder out while it does", "peer", h.env.Peer(pf.peer), "err", pf.err.Error())
		}
		h.cur.mu.Lock()
		if h.cur.failed = err; err != nil {
			h.cur.retry = time.Now().Add(catchUpRetry)
		}
		h.cur.mu.Unlock()
		if err == nil {
			lags, all = behindAll(h.survey(ctx))
		}
	}
	if len(lags) > 0 {
		h.standDown(lags)
		return false
	}
	c := &h.cur
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.why != "" {
		h.env.Log.Info("this holder's rows have caught up with the other holders'; serving again")
	}
	c.why, c.failed, c.done = "", nil, all
	return all
}

// changeCounts are this holder's changes per origin.
func (h *Holder[E]) changeCounts() []int64 {
	h.RLock()
	defer h.RUnlock()
	var out []int64
	for _, seg := range h.Digest() {
		out = append(out, changes(seg))
	}
	return out
}

// survey compares this holder's rows with its peers'.
func (h *Holder[E]) survey(ctx context.Context) []look {
	h.RLock()
	mine := h.Digest()
	epochs := make([]uint32, len(mine))
	for k := range epochs {
		epochs[k] = h.EpochLocked(k)
	}
	h.RUnlock()
	return survey(ctx, h.env, h.p, mine, epochs, h.Peers())
}

// dueToCatchUp reports whether this holder, found behind, has waited
// long enough for the entries' deliveries (or since a failed catch-up).
func (h *Holder[E]) dueToCatchUp() bool {
	h.cur.mu.Lock()
	defer h.cur.mu.Unlock()
	return h.cur.why != "" && time.Since(h.cur.since) >= catchUpAfter && time.Now().After(h.cur.retry)
}

// standDown makes this holder stand down for lags, saying why (and why
// it could not catch up, if it tried), and logs it when that is news.
func (h *Holder[E]) standDown(lags []lag) {
	c := &h.cur
	c.mu.Lock()
	defer c.mu.Unlock()
	rebuild := reshared(lags)
	why := fmt.Sprintf("stale, %s (its rows are older than theirs: a restored backup, or changes it missed while down); it serves nothing until it has caught up, and the others refuse queries meanwhile rather than answer without it (one of them may be what keeps it out). ", describe(h.p, lags))
	if rebuild {
		why = fmt.Sprintf("stale, %s (its rows are older than theirs: a restored backup, or a reshare it missed while down); it serves nothing until it is rebuilt, and the others answer degraded without it meanwhile. ", describe(h.p, lags))
	}
	if c.failed != nil {
		why += fmt.Sprintf("It cannot catch up: %v", c.failed)
	} else {
		why += "It catches up by itself, from what either other holder kept for it or else from the two of them; if it has not within a minute, move its data directory aside and rebuild it: idface party rebuild (docs/DEPLOY.md)"
	}
	if h.env.Sharded() {
		why = fmt.Sprintf("(shard %d) %s", h.env.Shard, why)
	}
	if c.why == "" {
		c.since = time.Now()
	}
	if c.why != why {
		args := []any{"behind", describe(h.p, lags)}
		if c.failed != nil {
			args = append(args, "cannot_catch_up", c.failed.Error())
		}
		h.env.Log.Warn("this holder stands down: its rows are older than the other holders'", args...)
	}
	c.why, c.done, c.rebuild = why, false, rebuild
}

// lookAtStart is the comparison at start, before the holder serves (the
// mode's Open): what the entries kept for it reaches it once it serves.
// It waits at most startWait (peers that start with it are not up yet;
// watchCurrency looks again). An engine opened offline (a rebalance) has
// no network and compares nothing.
func (h *Holder[E]) lookAtStart(ctx context.Context) {
	if h.env.Net == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, min(startWait, contactWait(h.p)))
	defer cancel()
	h.look(ctx, false, true)
}

// watchCurrency looks again every currencyEvery until this holder has
// compared with both peers and is behind neither.
func (h *Holder[E]) watchCurrency(ctx context.Context) {
	h.cur.mu.Lock()
	done := h.cur.done
	h.cur.mu.Unlock()
	if done || h.env.Net == nil {
		return
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	engine.Every(ctx, currencyEvery, func() {
		if h.look(ctx, true, false) {
			stop() // compared with both, behind neither: done
		}
	})
}

// catchUp fetches, from the two other holders, what this holder lacks of
// the origins of lags (looks: what comparing with them found).
func (h *Holder[E]) catchUp(ctx context.Context, lags []lag, looks []look) error {
	if reshared(lags) {
		for _, g := range lags {
			if g.reshare {
				return fmt.Errorf("origin %s's rows were reshared after this copy was made, and shares of an older epoch cannot be caught up: move this holder's data directory aside and rebuild it from the other two: idface party rebuild (docs/DEPLOY.md)", h.p.Party(g.origin).Name)
			}
		}
	}
	var deleted, added int
	for k := range replicated.Holders {
		if !slices.ContainsFunc(lags, func(g lag) bool { return g.origin == k }) {
			continue
		}
		d, a, err := h.catchUpOrigin(ctx, k, looks)
		if err != nil {
			return err
		}
		deleted, added = deleted+d, added+a
	}
	h.env.Log.Info("caught up from the other holders", "deleted", deleted, "added", added)
	return nil
}

// catchUpOrigin fetches origin k's rows from both other holders and
// applies what this holder lacks: the rows both deleted, and the rows it
// does not have (its two shares of them, one from each holder). It
// returns the rows deleted and added.
func (h *Holder[E]) catchUpOrigin(ctx context.Context, k int, looks []look) (deleted, added int, err error) {
	self := h.Self()
	prev := h.p.Party((self + 2) % replicated.Holders).Name // holds this holder's own share as its next
	next := h.p.Party((self + 1) % replicated.Holders).Name // holds this holder's next share as its own
	origin := h.p.Party(k).Name
	h.RLock()
	mine := h.Digest()[k]
	epoch := h.EpochLocked(k)
	h.RUnlock()
	// Whether a deletion was missed: the peers' deleted rows, from their
	// row maps, against this holder's. If not, only the rows it lacks.
	from := int(mine.Rows)
	for _, l := range looks {
		if d := l.digest[k]; d.Rows-d.Live != mine.Rows-mine.Live {
			from = 0
		}
	}
	for total := -1; total < 0 || from < total; {
		a, b, err := fetchBoth(ctx, h.env.Net, h.p, prev, next, k, from, protocol.MaxFetchRows, false)
		if err != nil {
			return deleted, added, err
		}
		if total < 0 {
			total = int(min(a.Total, b.Total)) // both at a transaction's end: the smaller is what both have
		}
		if a.Epoch != b.Epoch { // one peer's word against the other's: name the odd one out
			odd := prev
			if a.Epoch == epoch {
				odd = next
			}
			return deleted, added, &peerFault{odd, fmt.Errorf("origin %s's rows are at reshare epoch %d at %s and %d at %s, %d here: the peers disagree, and %s is the one that differs from this holder", origin, a.Epoch, h.env.Peer(prev), b.Epoch, h.env.Peer(next), epoch, h.env.Peer(odd))}
		}
		if a.Epoch != epoch {
			return deleted, added, fmt.Errorf("origin %s's rows are at reshare epoch %d at %s and %s, %d here, and shares of another epoch cannot be caught up: move this holder's data directory aside and rebuild it from the other two: idface party rebuild (docs/DEPLOY.md)", origin, a.Epoch, h.env.Peer(prev), h.env.Peer(next), epoch)
		}
		if from >= total {
			break
		}
		n := min(len(a.IDs), len(b.IDs), total-from)
		if n <= 0 {
			return deleted, added, fmt.Errorf("%s and %s sent no rows of origin %s from %d of %d", h.env.Peer(prev), h.env.Peer(next), origin, from, total)
		}
		units, err := verifyRows(h.p, self, prev, next, a, b, n)
		if err != nil {
			h.refusedRows(err)
			return deleted, added, err
		}
		var seqs []int
		var gone, newIDs []string
		var live []bool
		var shares [][]byte
		h.RLock()
		sh := h.Shares(k)
		rows := sh.Rows() // more than at the survey if a delivery came meanwhile
		base := max(from, rows)
		for i := range n {
			seq := from + i
			if seq < rows {
				id, isLive := h.ID(k, seq), sh.IsLive(seq)
				if id != a.IDs[i] || !isLive && a.Live[i] {
					h.RUnlock()
					return deleted, added, fmt.Errorf("row %d of origin %s is %q (live %v) here and %q (live %v) at %s and %s: this copy is not an older state of theirs; move this holder's data directory aside and rebuild it from the other two: idface party rebuild (docs/DEPLOY.md)",
						seq, origin, id, isLive, a.IDs[i], a.Live[i], h.env.Peer(prev), h.env.Peer(next))
				}
				if isLive && !a.Live[i] {
					seqs, gone = append(seqs, seq), append(gone, id)
				}
				continue
			}
			newIDs, live = append(newIDs, a.IDs[i]), append(live, a.Live[i])
			shares = append(shares, units[i])
		}
		h.RUnlock()
		if len(seqs) > 0 {
			if err := h.Revoke(k, seqs, gone); err != nil {
				return deleted, added, err
			}
			deleted += len(seqs)
		}
		if len(newIDs) > 0 {
			if err := h.Restore(k, base, newIDs, live, shares, epoch); err != nil {
				return deleted, added, err
			}
			added += len(newIDs)
		}
		from += n
	}
	return deleted, added, nil
}

// standDownRoutes makes r's handlers answer as a holder that stands down
// must, while it does (currency, above).
func (h *Holder[E]) standDownRoutes(r map[protocol.Type]engine.Route) {
	refuse := func(why string) *protocol.Error {
		h.cur.mu.Lock()
		rebuild := h.cur.rebuild
		h.cur.mu.Unlock()
		if rebuild {
			return rowtxn.StandDownUntilRebuilt(h.env.Self, why)
		}
		return rowtxn.StandDown(h.env.Self, why)
	}
	for t, rt := range r {
		next := rt.Handle
		switch t {
		case protocol.TDecide, protocol.TPrepared:
			continue
		case protocol.TIdentify, protocol.THiddenIdentify:
			// A client tries the next holder only when its entry cannot
			// be reached: this one answers nothing, as a holder down.
			rt.Handle = func(ctx context.Context, req engine.Request) protocol.Msg {
				if why := h.standing(); why != "" {
					h.env.Log.Debug("an identification not answered: this holder stands down", "why", why)
					return nil
				}
				return next(ctx, req)
			}
		case protocol.THealth:
			// To the other servers, which count it down by this answer,
			// and to an operator comparing row maps ('cluster status').
			rt.Handle = func(ctx context.Context, req engine.Request) protocol.Msg {
				m, _ := req.Msg.(*protocol.Health)
				if why := h.standing(); why != "" && (req.From.Role == network.RoleParty || req.From.Role == network.RoleHelper || m != nil && m.Peers) {
					return refuse(why)
				}
				return next(ctx, req)
			}
		case protocol.TSealedEnroll, protocol.TDelete, protocol.TReshareRequest:
			// A definite refusal: the operator's client may send it again
			// elsewhere (an unavailable entry leaves a change in doubt).
			rt.Handle = func(ctx context.Context, req engine.Request) protocol.Msg {
				if why := h.standing(); why != "" {
					return protocol.Errorf(protocol.CodeAborted, "%s; nothing was changed: send the change through another share holder (--entry)", refuse(why).Msg)
				}
				return next(ctx, req)
			}
		case protocol.TPrepare, protocol.TSealedPrepare:
			// What the entries deliver is how it catches up; a change it
			// lacks the rows for is held for it instead of refused.
			rt.Handle = func(ctx context.Context, req engine.Request) protocol.Msg {
				resp := next(ctx, req)
				if e, ok := resp.(*protocol.Error); ok && (e.Code == protocol.CodeInconsistent || e.Code == protocol.CodeUnknownID) {
					if why := h.standing(); why != "" {
						return refuse(why)
					}
				}
				return resp
			}
		default: // queries as a helper or a shard, fetches
			rt.Handle = func(ctx context.Context, req engine.Request) protocol.Msg {
				if why := h.standing(); why != "" {
					return refuse(why)
				}
				return next(ctx, req)
			}
		}
		r[t] = rt
	}
}

// fsckCurrency is fsck's comparison of a replayed (stopped) holder's rows
// with the other holders': a copy behind both on an origin is a problem.
func (h *Holder[E]) fsckCurrency(out io.Writer) []string {
	if h.env.Net == nil {
		fmt.Fprintln(out, "  not compared with the other holders' rows (no identity to reach them with)")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*contactWait(h.p))
	defer cancel()
	looks := h.survey(ctx)
	var reached []look
	var failed []string
	for _, l := range looks {
		if l.err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", h.env.Peer(l.peer), l.err))
			continue
		}
		reached = append(reached, l)
		if len(l.lags) == 0 {
			fmt.Fprintf(out, "  compared with %s: not behind it\n", h.env.Peer(l.peer))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(out, "  could not compare with %s: whether this copy is older than their rows is unknown (run fsck again while they run)\n", strings.Join(failed, "; "))
	}
	if len(reached) == 0 {
		return nil
	}
	lags, _ := behindAll(reached)
	if len(lags) == 0 {
		for _, l := range reached {
			if len(l.lags) > 0 { // one peer ahead, not the other: a change on its way, or a faulty peer
				fmt.Fprintf(out, "  %s is ahead of this copy and of the other holder: %s\n", h.env.Peer(l.peer), describe(h.p, l.lags))
			}
		}
		return nil
	}
	then := "started, it stands down and catches up from them before it serves (the others answer degraded meanwhile; 'idface cluster status' shows it)"
	if reshared(lags) {
		then = "a reshare cannot be caught up: move the data directory aside and rebuild it from the other two: idface party rebuild (docs/DEPLOY.md)"
	}
	return []string{fmt.Sprintf("stale: %s. This copy is older than the other holders' rows (restored from an older backup, or changes reached them while it was stopped): %s", describe(h.p, lags), then)}
}
