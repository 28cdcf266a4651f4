package shard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/shard"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/modes/mpcface"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

const dim = 64

// long bounds the waits of these tests; nothing here depends on it being
// short (a coordinator that waited for a silent shard it should have
// stopped waiting for would fail at it).
const long = time.Minute

func ctx(t *testing.T) context.Context { return inproc.Ctx(t, long) }

// answerFunc is what fake shard s answers to its nth request (from 1);
// nil: it never answers (it waits until the coordinator gives up).
type answerFunc func(s, n int, req protocol.Msg) protocol.Msg

// shards are member p1's S fake shard servers on memnet: each records the
// requests it gets and answers with answer.
type shards struct {
	mu  sync.Mutex
	got [][]protocol.Msg
}

func (f *shards) requests(s int) []protocol.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.Msg(nil), f.got[s]...)
}

// params is the configuration of a cluster of lit's mode with mu parties
// and lit.Shards shards per member (2 when unset).
func params(t *testing.T, lit config.Literal, mu int) *config.Params {
	t.Helper()
	tau := 0.25
	lit.Dim, lit.Tau, lit.MaxTopK = dim, &tau, 10
	if lit.Shards == 0 {
		lit.Shards = 2
	}
	p, err := config.New(inproc.Literal(lit, mu), "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// coordinator is member p1's coordinator over fake shards, of which
// those in up listen (all when up is nil).
func coordinator(t *testing.T, p *config.Params, o shard.Options, answer answerFunc, up ...int) (*shard.Coordinator, *shards) {
	t.Helper()
	net := memnet.New()
	f := &shards{got: make([][]protocol.Msg, p.Shards())}
	if up == nil {
		for s := range p.Shards() {
			up = append(up, s)
		}
	}
	for _, s := range up {
		ln, err := net.Listen(config.ShardName("p1", s))
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			ln.Serve(c, func(_ context.Context, st *network.Stream) {
				b, err := st.ReadFrame(1 << 20)
				if err != nil {
					return
				}
				req, err := protocol.Decode(b)
				if err != nil {
					t.Errorf("shard %d: %v", s, err)
					return
				}
				f.mu.Lock()
				f.got[s] = append(f.got[s], req)
				n := len(f.got[s])
				f.mu.Unlock()
				resp := answer(s, n, req)
				if resp == nil {
					<-st.Abandoned()
					return
				}
				st.WriteFrame(protocol.Marshal(resp))
			})
		}()
		t.Cleanup(func() { cancel(); ln.Close(); <-done })
	}
	env := engine.Env{Params: p, Self: "p1", Shard: config.Coordinator, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(),
		Net: net.Dialer(network.Peer{Name: "p1", Role: network.RoleParty})}
	if !env.Coordinating() {
		t.Fatal("the env is no coordinator's")
	}
	return shard.New(env, o), f
}

func call(t *testing.T, c *shard.Coordinator, m protocol.Msg) protocol.Msg {
	t.Helper()
	rt, ok := c.Routes()[m.Type()]
	if !ok {
		t.Fatalf("the coordinator has no route for %v", m.Type())
	}
	return rt.Handle(ctx(t), engine.Request{From: network.Peer{Name: "client", Role: network.RoleOperator}, Msg: m})
}

// refused fails the test unless resp is an Error of code saying each of
// says.
func refused(t *testing.T, resp protocol.Msg, code protocol.Code, says ...string) *protocol.Error {
	t.Helper()
	e, ok := resp.(*protocol.Error)
	if !ok || e.Code != code {
		t.Fatalf("got %#v, want a refusal %v", resp, code)
	}
	for _, s := range says {
		if !strings.Contains(e.Msg, s) {
			t.Fatalf("%q does not say %q", e.Msg, s)
		}
	}
	return e
}

// idsOf returns n ids that shard s of p holds.
func idsOf(p *config.Params, s, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("id-%d", i); p.ShardOf(id) == s {
			ids = append(ids, id)
		}
	}
	return ids
}

func opts(p *config.Params) shard.Options {
	return shard.Options{Mode: "2pc-coord", Enroll: protocol.TEnroll, EnrollMax: engine.EnrollBound(p)}
}

// TestRoutes: a coordinator answers health, identify, enroll and delete
// (the hidden identify where probes are hidden), holds no rows and names
// itself in health answers.
func TestRoutes(t *testing.T) {
	p := params(t, config.Literal{Mode: config.Mode2PC}, 2)
	c, _ := coordinator(t, p, opts(p), nil)
	rs := c.Routes()
	for typ, op := range map[protocol.Type]string{protocol.THealth: "health", protocol.TIdentify: "identify", protocol.TEnroll: "enroll", protocol.TDelete: "delete"} {
		if rs[typ].Op != op || rs[typ].Max == 0 {
			t.Errorf("route %v: %+v", typ, rs[typ])
		}
	}
	if len(rs) != 4 {
		t.Errorf("%d routes, want 4", len(rs))
	}
	if err := engine.CheckRoutes(rs); err != nil {
		t.Fatal(err)
	}
	if h, ok := call(t, c, &protocol.Health{}).(*protocol.HealthOK); !ok || h.Name != "p1" || h.Mode != "2pc-coord" {
		t.Fatalf("health: %#v", h)
	}
	if st := c.Stats(); st != (engine.Stats{}) {
		t.Fatalf("a coordinator's stats: %+v", st)
	}
	hp := params(t, config.Literal{Mode: config.ModeReplicated, HideProbes: true}, 3)
	hc, _ := coordinator(t, hp, opts(hp), nil)
	if rt, ok := hc.Routes()[protocol.THiddenIdentify]; !ok || rt.Op != "identify" {
		t.Fatalf("hidden identify route: %+v", rt)
	}
}

// TestForward: an enrollment or a deletion goes, as sent, to the one
// shard that holds its ids, and its answer comes back; a batch of ids of
// two shards, or of none, is refused before any shard sees it; a shard's
// refusal comes back with its code, naming the shard.
func TestForward(t *testing.T) {
	p := params(t, config.Literal{Mode: config.Mode2PC}, 2)
	c, f := coordinator(t, p, opts(p), func(s, _ int, req protocol.Msg) protocol.Msg {
		if d, ok := req.(*protocol.Delete); ok && d.ID == "gone" {
			return protocol.Errorf(protocol.CodeUnknownID, "no id %q", d.ID)
		}
		return &protocol.EnrollOK{Count: uint32(10 + s)}
	})
	sent := map[int][]protocol.Msg{}
	for s := range p.Shards() {
		ids := idsOf(p, s, 3)
		m := &protocol.Enroll{Auth: protocol.Auth{Signer: "client", Nonce: [16]byte{byte(s)}}}
		for _, id := range ids {
			m.Items = append(m.Items, protocol.Item{ID: id, Template: make([]float32, dim)})
		}
		if ok, _ := call(t, c, m).(*protocol.EnrollOK); ok == nil || ok.Count != uint32(10+s) {
			t.Fatalf("an enrollment for shard %d answered %#v", s, ok)
		}
		del := &protocol.Delete{ID: ids[1]}
		if ok, _ := call(t, c, del).(*protocol.EnrollOK); ok == nil || ok.Count != uint32(10+s) {
			t.Fatalf("a deletion for shard %d answered %#v", s, ok)
		}
		sent[s] = []protocol.Msg{m, del}
	}
	for s := range p.Shards() {
		got := f.requests(s)
		if len(got) != len(sent[s]) {
			t.Fatalf("shard %d got %d requests, want %d", s, len(got), len(sent[s]))
		}
		for i := range got {
			if !bytes.Equal(protocol.Marshal(got[i]), protocol.Marshal(sent[s][i])) {
				t.Fatalf("shard %d got %#v, sent %#v", s, got[i], sent[s][i])
			}
		}
	}

	a, b := idsOf(p, 0, 1)[0], idsOf(p, 1, 1)[0]
	spanning := &protocol.Enroll{Items: []protocol.Item{{ID: a, Template: make([]float32, dim)}, {ID: b, Template: make([]float32, dim)}}}
	refused(t, call(t, c, spanning), protocol.CodeBadRequest, a, b, "one shard")
	refused(t, call(t, c, &protocol.Enroll{}), protocol.CodeBadRequest, "no ids")
	for s := range p.Shards() {
		if n := len(f.requests(s)); n != len(sent[s]) {
			t.Fatalf("a refused request reached shard %d", s)
		}
	}

	// A sealed enrollment (blind mode's) is placed by its ids alike.
	so := opts(p)
	so.Enroll = protocol.TSealedEnroll
	sc, sf := coordinator(t, p, so, func(int, int, protocol.Msg) protocol.Msg { return &protocol.EnrollOK{Count: 1} })
	if ok, _ := call(t, sc, &protocol.SealedEnroll{IDs: []string{b}, Parts: [][]byte{{1}}}).(*protocol.EnrollOK); ok == nil || len(sf.requests(1)) != 1 || len(sf.requests(0)) != 0 {
		t.Fatalf("a sealed enrollment: %#v, shards got %d and %d", ok, len(sf.requests(0)), len(sf.requests(1)))
	}
	refused(t, call(t, sc, &protocol.SealedEnroll{IDs: []string{a, b}, Parts: [][]byte{{1}, {2}}}), protocol.CodeBadRequest, "one shard")

	gone := "gone"
	s := p.ShardOf(gone)
	refused(t, call(t, c, &protocol.Delete{ID: gone}), protocol.CodeUnknownID, fmt.Sprintf("p1#%d (shard %d of 2): no id", s, s))

	// A shard that cannot be reached: the request fails, naming it.
	dc, _ := coordinator(t, p, opts(p), nil, 1-s)
	refused(t, call(t, dc, &protocol.Delete{ID: gone}), protocol.CodeUnavailable, fmt.Sprintf("p1#%d (shard %d of 2)", s, s))
}

// answer is a shard's answer of candidates ids with these scores (nil: a
// ranked shard's) and ranks.
func answer(ids []string, scores []int32, ranks []uint16) *protocol.ShardAnswer {
	if ranks == nil {
		ranks = make([]uint16, len(ids))
	}
	return &protocol.ShardAnswer{IDs: ids, Scores: scores, Ranks: ranks, Bytes: 100, Sent: 10, Recv: 20}
}

func candidates(r *protocol.IdentifyOK) []string {
	var ids []string
	for _, c := range r.Candidates {
		ids = append(ids, c.ID)
	}
	return ids
}

// TestMerge: the coordinator asks every shard under one query id for the
// client's query and merges their answers: by score, best first, a
// shard's order kept among equal scores and shards in their order; by
// rank where a decider ranked them; the answer policy (threshold, top K,
// accepted) applied as unsharded; the bytes of all shards summed; a
// degraded shard makes the answer degraded. Answers no honest shard gives
// are refused.
func TestMerge(t *testing.T) {
	scored := params(t, config.Literal{Mode: config.Mode2PC, RevealScores: true, Shards: 3}, 2)
	th := int32(scored.Threshold())
	blind := params(t, config.Literal{Mode: config.ModeBlind}, 2)
	ranked := func(p *config.Params) shard.Options {
		o := opts(p)
		o.Ranked, o.Merged = true, true
		return o
	}
	for _, tc := range []struct {
		name    string
		p       *config.Params
		o       shard.Options
		topK    int
		answers []*protocol.ShardAnswer
		want    []string // the candidates, or
		refuse  protocol.Code
		says    string
	}{
		{name: "by score", p: scored, o: opts(scored), topK: 4, answers: []*protocol.ShardAnswer{
			answer([]string{"a", "b"}, []int32{th + 5, th - 1}, nil),
			answer([]string{"c", "d"}, []int32{th + 9, th + 5}, nil),
			answer(nil, nil, nil)},
			want: []string{"c", "a", "d", "b"}},
		{name: "top K", p: scored, o: opts(scored), topK: 1, answers: []*protocol.ShardAnswer{
			answer([]string{"a"}, []int32{th}, nil), answer([]string{"b"}, []int32{th}, nil), answer(nil, nil, nil)},
			want: []string{"a"}},
		{name: "not best first", p: scored, o: opts(scored), topK: 3, answers: []*protocol.ShardAnswer{
			answer([]string{"a", "b"}, []int32{th, th + 1}, nil), answer(nil, nil, nil), answer(nil, nil, nil)},
			refuse: protocol.CodeInternal, says: "not best first"},
		{name: "scores missing", p: scored, o: opts(scored), topK: 3, answers: []*protocol.ShardAnswer{
			answer([]string{"a", "b"}, nil, nil), answer(nil, nil, nil), answer(nil, nil, nil)},
			refuse: protocol.CodeInternal, says: "2 ids, 2 ranks and 0 scores"},
		{name: "by rank", p: blind, o: ranked(blind), topK: 3, answers: []*protocol.ShardAnswer{
			answer([]string{"a", "b"}, nil, []uint16{2, protocol.NoRank}),
			answer([]string{"c", "d"}, nil, []uint16{0, 1})},
			want: []string{"c", "d", "a"}},
		{name: "two shards' rank 0", p: blind, o: ranked(blind), topK: 3, answers: []*protocol.ShardAnswer{
			answer([]string{"a"}, nil, []uint16{0}), answer([]string{"c"}, nil, []uint16{0})},
			refuse: protocol.CodeInternal, says: "rank 0"},
		{name: "more than top K kept", p: blind, o: ranked(blind), topK: 2, answers: []*protocol.ShardAnswer{
			answer([]string{"a", "b"}, nil, []uint16{0, 1}), answer([]string{"c"}, nil, []uint16{2})},
			refuse: protocol.CodeInconsistent, says: "decider may be faulty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := coordinator(t, tc.p, tc.o, func(s, _ int, _ protocol.Msg) protocol.Msg { return tc.answers[s] })
			probe := make([]float32, dim)
			probe[3] = 1
			resp := call(t, c, &protocol.Identify{TopK: uint16(tc.topK), Template: probe})
			if tc.refuse != 0 {
				refused(t, resp, tc.refuse, tc.says)
				return
			}
			r, ok := resp.(*protocol.IdentifyOK)
			if !ok {
				t.Fatalf("answered %#v", resp)
			}
			if got := candidates(r); fmt.Sprint(got) != fmt.Sprint(tc.want) || !r.Accepted {
				t.Fatalf("candidates %v (accepted %v), want %v", got, r.Accepted, tc.want)
			}
			S := uint64(tc.p.Shards())
			if r.BytesTotal != 100*S || r.BytesSent != 10*S || r.BytesRecv != 20*S || r.Degraded {
				t.Fatalf("bytes %d/%d/%d degraded %v: not the sum of %d shards'", r.BytesSent, r.BytesRecv, r.BytesTotal, r.Degraded, S)
			}
			var qid [16]byte
			for s := range tc.p.Shards() {
				got := f.requests(s)
				m, ok := got[0].(*protocol.ShardIdentify)
				if len(got) != 1 || !ok || int(m.TopK) != tc.topK || m.Template[3] != 1 {
					t.Fatalf("shard %d got %#v", s, got)
				}
				if s > 0 && m.Query != qid || m.Query == [16]byte{} {
					t.Fatal("the shards ran the query under different query ids")
				}
				qid = m.Query
			}
		})
	}

	// Below the threshold: nothing where scores are not revealed.
	p := params(t, config.Literal{Mode: config.Mode2PC}, 2)
	th = int32(p.Threshold())
	c, _ := coordinator(t, p, opts(p), func(s, _ int, _ protocol.Msg) protocol.Msg {
		a := answer([]string{fmt.Sprint("x", s)}, []int32{th - 1}, nil)
		a.Degraded = s == 1
		return a
	})
	r, ok := call(t, c, &protocol.Identify{TopK: 2, Template: make([]float32, dim)}).(*protocol.IdentifyOK)
	if !ok || r.Accepted || len(r.Candidates) != 0 || !r.ScoresHidden || !r.Degraded {
		t.Fatalf("below the threshold, one shard degraded: %#v", r)
	}

	// A query the cluster does not answer is refused before any shard
	// sees it.
	c, f := coordinator(t, p, opts(p), func(int, int, protocol.Msg) protocol.Msg { return answer(nil, nil, nil) })
	refused(t, call(t, c, &protocol.Identify{TopK: 1, Template: make([]float32, dim-1)}), protocol.CodeBadRequest, "dimension")
	refused(t, call(t, c, &protocol.Identify{TopK: 11, Template: make([]float32, dim)}), protocol.CodeBadRequest, "top 11")
	if len(f.requests(0))+len(f.requests(1)) != 0 {
		t.Fatal("a refused query reached a shard")
	}
}

// TestShardFailures: a shard that cannot be reached fails the query with
// CodeShardDown, naming it; one that refuses fails it at once, naming
// the shards that had not answered, whose waits end; a shard that counted
// a holder down gets the query once more under a fresh query id (twice:
// unavailable); a refusal the mode says as unsharded (Options.Bare) comes
// back as it is.
func TestShardFailures(t *testing.T) {
	p := params(t, config.Literal{Mode: config.Mode2PC, Shards: 3}, 2)
	q := &protocol.Identify{TopK: 1, Template: make([]float32, dim)}
	ok := answer(nil, nil, nil)

	c, _ := coordinator(t, p, opts(p), func(int, int, protocol.Msg) protocol.Msg { return ok }, 0, 2)
	refused(t, call(t, c, q), protocol.CodeShardDown, "p1#1 (shard 1 of 3)")

	c, _ = coordinator(t, p, opts(p), func(s, _ int, _ protocol.Msg) protocol.Msg {
		switch s {
		case 0:
			return protocol.Errorf(protocol.CodeInconsistent, "rows differ")
		case 1:
			return nil // silent
		}
		return ok
	})
	refused(t, call(t, c, q), protocol.CodeInconsistent, "p1#0 (shard 0 of 3): rows differ", "p1#1", "had not answered yet")

	c, f := coordinator(t, p, opts(p), func(s, n int, _ protocol.Msg) protocol.Msg {
		if s == 2 && n == 1 {
			return protocol.Errorf(protocol.CodeCountedDown, "p2 counted down")
		}
		return ok
	})
	if r, isOK := call(t, c, q).(*protocol.IdentifyOK); !isOK || r.Accepted {
		t.Fatalf("after a counted-down shard: %#v", r)
	}
	// The other shards may not have got the first run (it stopped at the
	// refusal); every shard got the second, under a fresh id.
	runs := f.requests(2)
	if len(runs) != 2 {
		t.Fatalf("the counted-down shard got %d requests, want 2 (the query once more)", len(runs))
	}
	again := runs[1].(*protocol.ShardIdentify).Query
	if runs[0].(*protocol.ShardIdentify).Query == again {
		t.Fatal("the query ran again under the same query id")
	}
	for s := range 2 {
		got := f.requests(s)
		if len(got) == 0 || got[len(got)-1].(*protocol.ShardIdentify).Query != again {
			t.Fatalf("shard %d did not get the query's second run", s)
		}
	}

	c, _ = coordinator(t, p, opts(p), func(s, _ int, _ protocol.Msg) protocol.Msg {
		if s == 2 {
			return protocol.Errorf(protocol.CodeCountedDown, "p2 counted down")
		}
		return ok
	})
	refused(t, call(t, c, q), protocol.CodeUnavailable, "p1#2 (shard 2 of 3)")

	const bare = "the key server refused the query"
	o := opts(p)
	o.Bare = []string{bare}
	c, _ = coordinator(t, p, o, func(s, _ int, _ protocol.Msg) protocol.Msg {
		if s == 1 {
			return protocol.Errorf(protocol.CodeForbidden, bare)
		}
		return nil
	})
	if e := refused(t, call(t, c, q), protocol.CodeForbidden); e.Msg != bare {
		t.Fatalf("a bare refusal came back as %q", e.Msg)
	}

	c, _ = coordinator(t, p, opts(p), func(int, int, protocol.Msg) protocol.Msg { return &protocol.EnrollOK{} })
	refused(t, call(t, c, q), protocol.CodeShardDown, "answered EnrollOK")
}

// TestHidden: where probes are hidden a template is refused before any
// shard sees it, and a hidden probe runs once: a shard that counted a
// holder down fails it, telling the device to make a new one.
func TestHidden(t *testing.T) {
	p := params(t, config.Literal{Mode: config.ModeReplicated, HideProbes: true}, 3)
	c, f := coordinator(t, p, opts(p), func(s, _ int, req protocol.Msg) protocol.Msg {
		if s == 1 {
			return protocol.Errorf(protocol.CodeCountedDown, "p3 counted down")
		}
		return answer(nil, nil, nil)
	})
	refused(t, call(t, c, &protocol.Identify{TopK: 1, Template: make([]float32, dim)}), protocol.CodeBadRequest, "hides probes")
	if len(f.requests(0))+len(f.requests(1)) != 0 {
		t.Fatal("a template reached a shard of a cluster that hides probes")
	}
	h := &protocol.HiddenIdentify{TopK: 1, Nonce: [16]byte{7}, Parts: [][]byte{{1}, {2}, {3}}, Auth: protocol.Auth{Signer: "device", Nonce: [16]byte{7}}}
	refused(t, call(t, c, h), protocol.CodeUnavailable, "p1#1 (shard 1 of 2)", "new probe")
	for s := range p.Shards() {
		got := f.requests(s)
		if len(got) > 1 || s == 1 && len(got) != 1 { // shard 0's may have stopped at the refusal
			t.Fatalf("shard %d got the hidden probe %d times, want once", s, len(got))
		}
		for _, m := range got {
			if m, ok := m.(*protocol.ShardHidden); !ok || m.Probe.Nonce != h.Nonce {
				t.Fatalf("shard %d got %#v", s, m)
			}
		}
	}
}

// TestServer: shard.Server opens a coordinator where the process is one
// and the mode's own engine where it is a shard.
func TestServer(t *testing.T) {
	p := params(t, config.Literal{Mode: config.Mode2PC}, 2)
	opened := errors.New("the mode's own engine")
	srv := shard.Server(engine.Server{Open: func(context.Context, engine.Env, string) (engine.Engine, []func() error, error) {
		return nil, nil, opened
	}}, opts)
	env := engine.Env{Params: p, Self: "p1", Shard: config.Coordinator, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()}
	eng, _, err := srv.Open(ctx(t), env, t.TempDir())
	if _, ok := eng.(*shard.Coordinator); !ok || err != nil {
		t.Fatalf("the coordinator's process opened %T, %v", eng, err)
	}
	env.Shard = 1
	if _, _, err := srv.Open(ctx(t), env, t.TempDir()); err != opened {
		t.Fatalf("a shard's process: %v", err)
	}
}

// TestRebalanceRefusals: Rebalance moves rows within one cluster only,
// and only a row-holding member's, from as many directories as shards.
func TestRebalanceRefusals(t *testing.T) {
	two := params(t, config.Literal{Mode: config.Mode2PC, Shards: 2}, 2)
	three := params(t, config.Literal{Mode: config.Mode2PC, Shards: 3}, 2)
	other := params(t, config.Literal{Mode: config.Mode2PC, Shards: 3, Alpha: 30}, 2)
	dirs := func(n int) []string {
		d := make([]string, n)
		for i := range d {
			d[i] = t.TempDir()
		}
		return d
	}
	var out bytes.Buffer
	for _, tc := range []struct {
		name     string
		next     *config.Params
		self     string
		from, to int
		says     string
	}{
		{"directories", three, "p1", 2, 2, "for 3"},
		{"another cluster", other, "p1", 2, 3, "within one cluster"},
		{"no rows", three, "client", 2, 3, "holds no rows"},
	} {
		err := shard.Rebalance(ctx(t), mpcface.Mode2PC.Server(two, tc.self), two, tc.next, tc.self, dirs(tc.from), dirs(tc.to), &out)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.says)
		}
	}
	if out.Len() != 0 {
		t.Fatalf("a refused rebalance wrote %q", out.String())
	}
}

// TestPlacement runs a real sharded 2PC cluster: the client's batches,
// split by shard, reach through each member's coordinator the shard of
// their ids only; a deletion through the other member's coordinator
// reaches its shard; an identify through either coordinator finds an
// enrolled row, and the shards refuse what is not theirs.
func TestPlacement(t *testing.T) {
	tau := 0.25
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: dim, Tau: &tau, Shards: 3, MaxTopK: 10,
		Timeout: config.Duration(long)}, 2))
	xs := inproc.Templates(30, dim, 71)
	items := inproc.Items(xs, "r")
	if err := c.Client("client", "p1").Enroll(ctx(t), items); err != nil {
		t.Fatal(err)
	}
	c.CheckShards(t, "p1", items)
	c.CheckShards(t, "p2", items)
	victim := items[4].ID
	s := c.P.ShardOf(victim)
	before, err := c.Client("client", "").Health(ctx(t), config.ShardName("p2", s))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client("client", "p2").Delete(ctx(t), victim); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"p1", "p2"} {
		h, err := c.Client("client", "").Health(ctx(t), config.ShardName(m, s))
		if err != nil || h.Live != before.Live-1 {
			t.Fatalf("%s's shard %d after the deletion: %+v %v (%d live before)", m, s, h, err, before.Live)
		}
	}
	for _, entry := range []string{"p1", "p2"} {
		r, err := c.Client("device", entry).Identify(ctx(t), xs[9], 3)
		if err != nil || !r.Accepted || r.Candidates[0].ID != items[9].ID {
			t.Fatalf("identify at %s: %+v %v", entry, r, err)
		}
		if r, err := c.Client("device", entry).Identify(ctx(t), xs[4], 3); err != nil || r.Accepted && r.Candidates[0].ID == victim {
			t.Fatalf("identify of the deleted row at %s: %+v %v", entry, r, err)
		}
	}
	c.CheckShardRefusals(t, "p1", "p2", items[0].ID, xs[0])
}
