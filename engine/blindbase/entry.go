// Package blindbase is what blind mode (modes/blind) and replicated
// blind mode (modes/replicated) do the same way, beneath both so that
// neither mode imports the other: the entry's query and its snapshot of
// the row map, its send of score shares to the decider and the decider's
// acknowledgements, a permuted position mapped back to a row, the
// decider's check of a share's header, the share ring's width for the
// communication tables, and a rebalance that keeps the ring.
package blindbase

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/template"
)

// Query is an entry's new query: y (as a Query and as its coefficients),
// a fresh sigma and a fresh query id, both from the env's randomness.
type Query struct {
	Q     *additive.Query
	Pos   []int32
	Coef  []int8
	Sigma additive.Seed
	ID    [16]byte
}

// NewQuery checks an identify request and starts its query: Q(y) with the
// cluster's query levels, sigma and the query id.
func NewQuery(env engine.Env, p *config.Params, tr *engine.LevelTransformers, m *protocol.Identify) (*Query, *protocol.Error) {
	if perr := engine.CheckTopK(p, int(m.TopK)); perr != nil {
		return nil, perr
	}
	t := tr.Get()
	y := make([]int8, p.Dim())
	err := template.ApplyLevels(t, m.Template, y)
	tr.Put(t)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	q := &Query{}
	if q.Q, err = additive.DenseQuery(y); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	q.Pos, q.Coef = q.Q.Coefficients()
	if q.Sigma, err = additive.NewSeed(env.RandReader()); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	if _, err := env.RandReader().Read(q.ID[:]); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "%v", err)
	}
	return q, nil
}

// View is a snapshot of the row map for one query: the digest the helpers
// must match, each segment's first global row, the live bits over all
// rows.
type View struct {
	Digest protocol.Digest
	Off    []int // Off[s]: first global row of segment s; Off[len] = n
	Live   []uint64
}

// NewView takes the committed row map g and each segment's live bits;
// the caller holds the read lock until it has scored the rows, so that
// the scores and the live bits are of one state (a deletion between them
// would leave a row live here whose share another holder has erased).
func NewView(g protocol.Digest, live func(seg int) []uint64) View {
	v := View{Digest: g, Off: []int{0}}
	for s, sd := range g {
		v.Off = append(v.Off, v.Off[s]+int(sd.Rows))
	}
	v.Live = make([]uint64, template.Words(v.Rows()))
	for s := range g {
		appendBits(v.Live, v.Off[s], live(s), int(g[s].Rows))
	}
	return v
}

// Rows is the number of rows over all segments.
func (v View) Rows() int { return v.Off[len(v.Off)-1] }

// Locate returns a global row's segment and sequence, and whether it is
// live.
func (v View) Locate(row int) (seg, seq int, live bool) {
	for row >= v.Off[seg+1] {
		seg++
	}
	return seg, row - v.Off[seg], v.Live[row/64]>>(row%64)&1 == 1
}

// CheckQuery checks a helper's query: y of the cluster's dimension and
// query levels. A query of another form would show this cluster's helpers
// more of a probe, or the entry more than its protocol gives it.
func CheckQuery(p *config.Params, m *protocol.BlindQuery) (*additive.Query, *protocol.Error) {
	q, err := additive.NewQuery(p.Dim(), m.Pos, m.Coef)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "query: %v", err)
	}
	if err := template.CheckLevels(m.Coef, p.QueryLevels()); err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "query: %v; this cluster queries with levels %s", err, p.QueryLevels())
	}
	return q, nil
}

// Unpermute maps the decider's permuted positions back to global rows: the
// permutation is evaluated at those positions alone (about 10 AES blocks
// each), never rebuilt for the n rows.
func Unpermute(perm *additive.Permuter, positions []uint32, sigma *additive.Seed, n int) ([]int, *protocol.Error) {
	pos := make([]int, len(positions))
	for i, q := range positions {
		pos[i] = int(q)
	}
	rows := make([]int, len(pos))
	if err := perm.Unpermute(rows, pos, sigma, n); err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "the decider's positions: %v", err)
	}
	return rows, nil
}

// SendShares opens a stream to the decider and sends a holder's score
// shares: the header m, then the raw bulk blocks. The entry's stream then
// carries the decider's answer; a failure is explained by the decider's
// refusal when it sent one.
//
// A decider that restarted since the connection was made
// (network.ErrPeerRestarted while the shares are written) gets them again
// on a new connection.
func SendShares(ctx context.Context, d network.Dialer, dec string, m protocol.Msg, bulk ...[]byte) (*network.Stream, error) {
	s, err := sendShares(ctx, d, dec, m, bulk...)
	if errors.Is(err, network.ErrPeerRestarted) {
		s, err = sendShares(ctx, d, dec, m, bulk...)
	}
	return s, err
}

func sendShares(ctx context.Context, d network.Dialer, dec string, m protocol.Msg, bulk ...[]byte) (*network.Stream, error) {
	s, err := d.Open(ctx, dec)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	err = s.WriteFrame(protocol.Marshal(m))
	for _, b := range bulk {
		if err == nil {
			_, err = s.Write(b)
		}
	}
	s.CloseWrite()
	if err != nil {
		if _, rerr := rpc.ReadReply(ctx, s, dec); rerr != nil {
			err = rerr // the decider's refusal explains
		}
		s.Finish()
		return nil, err
	}
	return s, nil
}

// RunAgain reports whether an entry may run a query that failed by who
// once more under a fresh id (blind and replicated mode): the decider
// dec restarted during it or said to ask again (a helper stopped between
// its part and the decider's fetch of the answer's tags), or a helper's
// rows moved on while it waited for a pass (RowsMoved). A helper's other
// refusals, relayed, never do.
func RunAgain(who, dec string, err error) bool {
	var pe *protocol.Error
	askAgain := errors.As(err, &pe) && pe.Code == protocol.CodeCountedDown
	if who == dec {
		return askAgain || errors.Is(err, network.ErrPeerRestarted)
	}
	return askAgain
}

// RowsMoved is a helper's refusal of a query whose rows a commit moved
// past the entry's snapshot while it waited for a pass: its entry runs
// the query again (RunAgain).
func RowsMoved(self string) *protocol.Error {
	return protocol.Errorf(protocol.CodeCountedDown, "%s's rows changed during the query (a commit while it waited for a pass); run it again", self)
}

// Acks are the decider's acknowledgements a holder still awaits of the
// shares it sent as a helper. A helper answers the entry before the
// decider acknowledges its shares (the entry then waits 1.5 round trips,
// entry, helper, decider, entry, not 2), so a helper that stops must not
// exit before they are acknowledged: the shares would be lost in its
// send buffers and the query with them (Wait, at the end of its Run).
// A counter, not a sync.WaitGroup: a handler may still send while the
// holder waits.
type Acks struct {
	mu   sync.Mutex
	n    int
	none chan struct{} // closed when n comes to 0, for a Wait
}

// Await reads, in the background, the decider's acknowledgement of a
// helper's shares and logs a refusal: a refused share fails the query at
// the decider, from which the entry hears why. It returns the bytes of
// the stream, the acknowledgement counted before it arrives.
//
// A decider that restarted since the connection was made is found here,
// not while writing (the shares fit in the transport's buffers): resend
// then sends the same shares, under the same query id, to the process
// that runs now (the one that died saw them at most once), and done runs
// once the shares are no longer needed.
func (a *Acks) Await(s *network.Stream, dec string, log *slog.Logger, resend func() (*network.Stream, error), done func()) uint64 {
	sent := s.Sent()
	a.mu.Lock()
	a.n++
	a.mu.Unlock()
	go func() {
		defer a.done()
		defer done()
		_, err := readAck(s, dec)
		if errors.Is(err, network.ErrPeerRestarted) {
			if s, err = resend(); err == nil {
				_, err = readAck(s, dec)
			}
		}
		if err != nil {
			log.Warn("the decider refused this holder's score shares", "err", err)
		}
	}()
	return uint64(sent) + ackBytes
}

func (a *Acks) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n--; a.n == 0 && a.none != nil {
		close(a.none)
		a.none = nil
	}
}

// AckGrace is the longest a stopping holder waits for the decider's
// acknowledgements (at most its shutdown grace): a live decider sends
// each within a round trip of the shares' arrival, and the queries of
// one that does not are lost anyway.
const AckGrace = 2 * time.Second

// Wait waits for the acknowledgements awaited, at most d, and logs those
// that did not come.
func (a *Acks) Wait(d time.Duration, log *slog.Logger) {
	a.mu.Lock()
	if a.n == 0 {
		a.mu.Unlock()
		return
	}
	if a.none == nil {
		a.none = make(chan struct{})
	}
	none := a.none
	a.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-none:
	case <-t.C:
		a.mu.Lock()
		n := a.n
		a.mu.Unlock()
		log.Warn("stopping before the decider acknowledged this holder's score shares: those queries may fail", "unacknowledged", n, "waited", d)
	}
}

func readAck(s *network.Stream, dec string) (protocol.Msg, error) {
	defer s.Finish()
	return rpc.ReadReply(context.Background(), s, dec)
}

// ackBytes is the decider's acknowledgement of a helper's shares on the
// wire.
var ackBytes = uint64(protocol.FramedSize(&protocol.DecideShareOK{}))

// appendBits copies the first n bits of src into dst at bit offset at.
func appendBits(dst []uint64, at int, src []uint64, n int) {
	for i := 0; i < n; i += 64 {
		w := src[i/64]
		if k := n - i; k < 64 {
			w &= 1<<uint(k) - 1
		}
		b := at + i
		dst[b/64] |= w << uint(b%64)
		if b%64 != 0 && b/64+1 < len(dst) {
			dst[b/64+1] |= w >> uint(64-b%64)
		}
	}
}
