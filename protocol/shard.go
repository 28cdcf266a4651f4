package protocol

import "github.com/idface/idface/internal/codec/wire"

// Messages of sharded members (config: Literal.Shards). A coordinator
// asks each of its member's shards to run one identify over its rows
// (ShardIdentify, answered by ShardAnswer); in blind mode every decider
// shard reports its best scores to the decider's coordinator (DecideMerge)
// and learns which of them make the answer and at which rank
// (DecideMergeOK), so that the shards' answers merge into the one an
// unsharded cluster gives.

// NoRank marks a shard's candidate that is not in the merged answer.
const NoRank = 0xFFFF

// ShardIdentify asks a member's shard, from its coordinator, to run an
// identify over the shard's rows under the coordinator's query id: every
// shard's query of one identify has the same id, by which the decider's
// shards merge their answers.
type ShardIdentify struct {
	Query    [16]byte
	TopK     uint16
	Template []float32
}

func (m *ShardIdentify) Type() Type { return TShardIdentify }
func (m *ShardIdentify) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.U16(m.TopK)
	e.F32s(m.Template)
}
func (m *ShardIdentify) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.TopK = d.U16()
	m.Template = d.F32s(MaxDim)
	if d.Err == nil && (m.TopK < 1 || m.TopK > MaxTopK) {
		d.Fail("top-k %d outside 1..%d", m.TopK, MaxTopK)
	}
}

// ShardHidden asks a member's shard, from its coordinator, to run a
// device's hidden probe (replicated mode with hide_probes) over the
// shard's rows under the coordinator's query id: the device's request as
// it came, which the shard and the same shard of every other holder check
// and open as unsharded.
type ShardHidden struct {
	Query [16]byte
	Probe HiddenIdentify
}

func (m *ShardHidden) Type() Type { return TShardHidden }
func (m *ShardHidden) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	m.Probe.marshal(e)
}
func (m *ShardHidden) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.Probe.unmarshal(d)
}

// ShardAnswer is a shard's part of the answer: its candidates (ids), best
// first, with their ranks (in blind mode their places in the merged
// answer; where the entry scores, in the shard's own order) and their
// scores (where the entry knows them, or the cluster reveals them); the
// bytes its query moved between servers (and of them, where the mode
// counts them, what its entry sent and received); and whether it was
// answered without some of the mode's checks (replicated mode, a holder
// down).
type ShardAnswer struct {
	IDs        []string
	Ranks      []uint16
	Scores     []int32
	Bytes      uint64
	Degraded   bool
	Sent, Recv uint64
	Verdict    []byte // a hidden probe's, sealed to the device (ReplResult.Verdict)
}

func (m *ShardAnswer) Type() Type { return TShardAnswer }
func (m *ShardAnswer) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.IDs)))
	for i, id := range m.IDs {
		e.Str(id)
		e.U16(m.Ranks[i])
	}
	e.U32(uint32(len(m.Scores)))
	for _, s := range m.Scores {
		e.U32(uint32(s))
	}
	e.U64(m.Bytes)
	e.Bool(m.Degraded)
	e.U64(m.Sent)
	e.U64(m.Recv)
	e.Bytes32(m.Verdict)
}
func (m *ShardAnswer) unmarshal(d *wire.Dec) {
	n := d.Count(MaxTopK, 5) // a one-byte id, its length and its rank
	for range n {
		m.IDs = append(m.IDs, d.Str(MaxIDLen))
		m.Ranks = append(m.Ranks, d.U16())
	}
	k := d.Count(MaxTopK, 4)
	for range k {
		m.Scores = append(m.Scores, int32(d.U32()))
	}
	m.Bytes = d.U64()
	m.Degraded = d.Bool()
	m.Sent, m.Recv = d.U64(), d.U64()
	m.Verdict = d.Bytes32(VerdictSize)
	if d.Err == nil && len(m.Verdict) != 0 && len(m.Verdict) != VerdictSize {
		d.Fail("a verdict of %d bytes", len(m.Verdict))
	}
	if d.Err == nil && k != 0 && k != n {
		d.Fail("%d scores for %d candidates", k, n)
	}
}

// DecideMerge is a decider shard's best scores of one query (at most
// TopK, best first, each at the threshold unless the cluster reveals
// scores), sent to the decider's coordinator.
type DecideMerge struct {
	Query  [16]byte
	Shard  uint16
	TopK   uint16
	Scores []int32
}

func (m *DecideMerge) Type() Type { return TDecideMerge }
func (m *DecideMerge) marshal(e *wire.Enc) {
	e.Raw(m.Query[:])
	e.U16(m.Shard)
	e.U16(m.TopK)
	e.U32(uint32(len(m.Scores)))
	for _, s := range m.Scores {
		e.U32(uint32(s))
	}
}
func (m *DecideMerge) unmarshal(d *wire.Dec) {
	d.Fixed(m.Query[:])
	m.Shard, m.TopK = d.U16(), d.U16()
	n := d.Count(MaxTopK, 4)
	for range n {
		m.Scores = append(m.Scores, int32(d.U32()))
	}
	if d.Err == nil && (m.TopK < 1 || m.TopK > MaxTopK || len(m.Scores) > int(m.TopK)) {
		d.Fail("%d scores for top %d", len(m.Scores), m.TopK)
	}
}

// DecideMergeOK gives each of a decider shard's scores its rank in the
// merged answer, or NoRank.
type DecideMergeOK struct{ Ranks []uint16 }

func (m *DecideMergeOK) Type() Type { return TDecideMergeOK }
func (m *DecideMergeOK) marshal(e *wire.Enc) {
	e.U32(uint32(len(m.Ranks)))
	for _, r := range m.Ranks {
		e.U16(r)
	}
}
func (m *DecideMergeOK) unmarshal(d *wire.Dec) {
	n := d.Count(MaxTopK, 2)
	for range n {
		m.Ranks = append(m.Ranks, d.U16())
	}
}
