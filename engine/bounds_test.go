package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// TestBoundsFitTheLargestHonestRequest: for each request an engine routes,
// the largest request an honest peer sends fits the route's bound (the
// bounds are computed, not measured, so a field added to a message, like
// the operator's Auth, must be added to its bound).
func TestBoundsFitTheLargestHonestRequest(t *testing.T) {
	const d = 64
	p, err := config.New(inproc.Literal(config.Literal{Mode: config.ModeBlind, Dim: d, Alpha: 24, Beta: 12}, 3), "")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("x", protocol.MaxIDLen)
	auth := protocol.Auth{Signer: id, Sig: make([]byte, protocol.MaxSig)}
	digest := make(protocol.Digest, protocol.MaxParties)
	tmpl := make([]float32, d)
	enroll := &protocol.Enroll{Auth: auth}
	prep := &protocol.Prepare{Dim: d, Auth: auth}
	share := 2 * d // blind shares of 16 bits
	for i := range p.MaxEnrollBatch() {
		enroll.Items = append(enroll.Items, protocol.Item{ID: id, Template: tmpl})
		prep.Ops = append(prep.Ops, protocol.Op{Kind: protocol.OpPut, Seq: uint32(i), ID: id, Share: make([]byte, share)})
	}
	sealed := &protocol.SealedEnroll{Auth: auth, IDs: make([]string, p.MaxEnrollBatch())}
	sprep := &protocol.SealedPrepare{Prepare: protocol.Prepare{Dim: d, Auth: auth}, Hashes: make([][32]byte, p.Mu())}
	part := make([]byte, seal.Overhead+1+p.MaxEnrollBatch()*share)
	for i := range sealed.IDs {
		sealed.IDs[i] = id
		sprep.Prepare.Ops = append(sprep.Prepare.Ops, protocol.Op{Kind: protocol.OpPut, Seq: uint32(i), ID: id})
	}
	for range p.Mu() {
		sealed.Parts = append(sealed.Parts, part)
	}
	sprep.Part = part
	w := template.Words(d)
	pos, coef := make([]int32, d), make([]int8, d)
	for i := range coef {
		pos[i], coef[i] = int32(i), 1
	}
	batch := &protocol.QueryBatch{Dim: d, Beta: 12, Digest: digest, BlockWords: 1}
	for range protocol.MaxQueryBatch {
		batch.Probes = append(batch.Probes, protocol.Probe{Plus: make([]uint64, w), Minus: make([]uint64, w)})
	}
	hidden := &protocol.HiddenIdentify{TopK: protocol.MaxTopK, Auth: auth}
	for range p.Mu() {
		hidden.Parts = append(hidden.Parts, make([]byte, seal.Overhead+4*d)) // a sealed pair of 16-bit shares
	}
	for _, c := range []struct {
		m     protocol.Msg
		bound int
	}{
		{&protocol.Identify{TopK: protocol.MaxTopK, Template: tmpl}, engine.IdentifyBound(p)},
		{enroll, engine.EnrollBound(p)},
		{prep, engine.PrepareBound(p, share)},
		{sealed, engine.SealedEnrollBound(p, share)},
		{sprep, engine.SealedPrepareBound(p, share)},
		{&protocol.Delete{Auth: auth, ID: id}, protocol.Small},
		{&protocol.Query{Dim: d, Beta: 12, Plus: make([]uint64, w), Minus: make([]uint64, w), Digest: digest, BlockWords: 1}, engine.QueryBound(p)},
		{batch, engine.QueryBatchBound(p)},
		{&protocol.BlindQuery{Digest: digest, Pos: pos, Coef: coef}, engine.BlindQueryBound(p)},
		{&protocol.Health{}, protocol.Small},
		{&protocol.HEDelete{Seq: 1, ID: id}, protocol.Small},
		{&protocol.ShardIdentify{TopK: protocol.MaxTopK, Template: tmpl}, engine.ShardIdentifyBound(p)},
		{hidden, engine.HiddenIdentifyBound(p)},
		{&protocol.ShardHidden{Probe: *hidden}, engine.ShardHiddenBound(p)},
	} {
		if n := len(protocol.Marshal(c.m)); n > c.bound {
			t.Errorf("%v: the largest honest request is %d bytes, its bound %d", c.m.Type(), n, c.bound)
		}
	}
}

// TestEveryRouteIsBounded: every engine of every mode declares, for each
// message type it routes, its senders and a size bound (the runtime
// refuses to serve an engine that does not: server.New), so no request is
// read without one.
func TestEveryRouteIsBounded(t *testing.T) {
	for _, mode := range config.Modes() {
		t.Run(string(mode), func(t *testing.T) {
			spec, _ := config.Spec(mode)
			mu := max(spec.DefaultParties, min(3, spec.MaxParties))
			lit := config.Literal{Mode: mode, Dim: 64, Alpha: 24, Beta: 12}
			if mode == config.ModeHE {
				lit.Alpha, lit.Beta = 16, 8
			}
			c := inproc.Start(t, inproc.Literal(lit, mu))
			for _, m := range c.P.Servers() {
				routes := c.Routes(m.Name)
				if len(routes) == 0 {
					t.Fatalf("%s routes nothing", m.Name)
				}
				if err := engine.CheckRoutes(routes); err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
			}
		})
	}
}

func TestCheckRoutesRefusesAnUnboundedRoute(t *testing.T) {
	h := func(context.Context, engine.Request) protocol.Msg { return nil }
	ok := engine.Route{Op: "health", From: engine.Anyone, Handle: h, Max: protocol.Small}
	if err := engine.CheckRoutes(map[protocol.Type]engine.Route{protocol.THealth: ok}); err != nil {
		t.Fatal(err)
	}
	noMax := ok
	noMax.Max = 0
	if err := engine.CheckRoutes(map[protocol.Type]engine.Route{protocol.THealth: noMax}); err == nil || !strings.Contains(err.Error(), "Health") {
		t.Fatalf("a route without a bound: %v", err)
	}
}
