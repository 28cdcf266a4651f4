package engine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

// TestAnswerPolicy: the one answer path keeps scores and rows below the
// threshold from devices, keeps both in research clusters, decides on the
// best candidate and caps the candidates at top-K.
func TestAnswerPolicy(t *testing.T) {
	tau := 0.3
	for _, reveal := range []bool{false, true} {
		p, err := config.New(inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64, Alpha: 24, Beta: 12, Tau: &tau, MaxTopK: 3, RevealScores: reveal}, 2), "")
		if err != nil {
			t.Fatal(err)
		}
		thr := p.Threshold()
		if err := engine.CheckTopK(p, 4); err == nil {
			t.Fatal("top 4 of 3 accepted")
		}
		a := engine.NewAnswer(p, 2)
		a.Scored("best", thr)
		a.Scored("below", thr-1)
		a.Scored("third", thr-2)
		r := a.Done()
		switch {
		case !r.Accepted || r.ScoresHidden == reveal || r.Candidates[0].ID != "best":
			t.Fatalf("reveal %v: %+v", reveal, r)
		case !reveal && (len(r.Candidates) != 1 || r.Candidates[0].Score != 0):
			t.Fatalf("a device's answer: %+v", r)
		case reveal && (len(r.Candidates) != 2 || r.Candidates[1].Score != int32(thr-1)):
			t.Fatalf("a research answer: %+v", r)
		}
		b := engine.NewAnswer(p, 2)
		b.Scored("stranger", thr-1)
		if r := b.Done(); r.Accepted || (!reveal && len(r.Candidates) != 0) {
			t.Fatalf("a rejection (reveal %v): %+v", reveal, r)
		}
		if engine.ScoreFloor(p) != map[bool]int{false: thr, true: -p.Beta()}[reveal] {
			t.Fatal("score floor")
		}
	}
}

// TestRelayedCodes: a refusal relayed from a peer keeps its code, but for
// the codes a server only sets about itself and its own shards: a
// deviating peer's CodeShardDown or CodeCountedDown, relayed, would make a
// client ask another entry or a coordinator run a query again.
func TestRelayedCodes(t *testing.T) {
	for code, want := range map[protocol.Code]protocol.Code{
		protocol.CodeShardDown:    protocol.CodeUnavailable,
		protocol.CodeCountedDown:  protocol.CodeUnavailable,
		protocol.CodeInconsistent: protocol.CodeInconsistent,
		protocol.CodeUnavailable:  protocol.CodeUnavailable,
	} {
		err := fmt.Errorf("p2: %w", protocol.Errorf(code, "refused"))
		if got := engine.AsError(err, protocol.CodeInternal); got.Code != want || got.Msg != "refused" {
			t.Errorf("relayed %v: %v %q, want %v", code, got.Code, got.Msg, want)
		}
	}
	if got := engine.AsError(errors.New("x"), protocol.CodeShardDown); got.Code != protocol.CodeShardDown {
		t.Errorf("a server's own code: %v", got.Code)
	}
}
