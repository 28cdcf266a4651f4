package engine

import (
	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
)

// The answer policy of identify, the same in every mode: a device learns
// the accepted ids or a rejection, never a score; a research cluster
// (reveal_scores) answers with scores and candidates below the threshold
// too. Every entry checks the request with CheckTopK and assembles its
// answer with an Answer.

// CheckTopK refuses a top-K the cluster does not answer, before any work.
func CheckTopK(p *config.Params, topK int) *protocol.Error {
	if topK < 1 || topK > p.MaxTopK() {
		return protocol.Errorf(protocol.CodeBadRequest, "top %d: this cluster answers with 1 to %d candidates", topK, p.MaxTopK())
	}
	return nil
}

// ScoreFloor is the lowest score a scoring entry keeps: the threshold, or
// in a research cluster every score (-beta, the lowest a row can have).
func ScoreFloor(p *config.Params) int {
	if p.RevealScores() {
		return -p.Beta()
	}
	return p.Threshold()
}

// Answer assembles one identify answer.
type Answer struct {
	p    *config.Params
	topK int
	resp *protocol.IdentifyOK
}

// NewAnswer starts the answer to a query for topK candidates.
func NewAnswer(p *config.Params, topK int) *Answer {
	return &Answer{p: p, topK: topK, resp: &protocol.IdentifyOK{Alpha: uint16(p.Alpha()), Beta: uint16(p.Beta()), ScoresHidden: !p.RevealScores()}}
}

// Scored adds a candidate with its score, best first: kept if it reaches
// the threshold, or in a research cluster with its score whatever it is.
// The first candidate decides whether the query is accepted.
func (a *Answer) Scored(id string, score int) {
	if len(a.resp.Candidates) >= a.topK {
		return
	}
	accepted := score >= a.p.Threshold()
	if !accepted && !a.p.RevealScores() {
		return
	}
	c := protocol.Candidate{ID: id}
	if a.p.RevealScores() {
		c.Score = int32(score)
	}
	if len(a.resp.Candidates) == 0 {
		a.resp.Accepted = accepted
	}
	a.resp.Candidates = append(a.resp.Candidates, c)
}

// Passed adds a candidate that a server which never reveals scores (the HE
// key server, the blind decider) found at or above the threshold.
func (a *Answer) Passed(id string) {
	if len(a.resp.Candidates) >= a.topK {
		return
	}
	a.resp.Accepted = true
	a.resp.Candidates = append(a.resp.Candidates, protocol.Candidate{ID: id})
}

// Bytes records the application bytes of the query: what the entry sent
// and received, and what moved between all servers.
func (a *Answer) Bytes(sent, recv, total uint64) {
	a.resp.BytesSent, a.resp.BytesRecv, a.resp.BytesTotal = sent, recv, total
}

// Degraded flags the answer as computed without some of the mode's checks
// (a server was down).
func (a *Answer) Degraded() { a.resp.Degraded = true }

// Done returns the answer.
func (a *Answer) Done() *protocol.IdentifyOK { return a.resp }
