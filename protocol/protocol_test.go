package protocol

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func samples() []Msg {
	return []Msg{
		&Error{Code: CodeDuplicate, Msg: "id alice is already enrolled"},
		&Enroll{Items: []Item{{ID: "alice", Template: []float32{1, -2, float32(math.Inf(1))}}, {ID: "bob", Template: []float32{0.5}}}},
		&Enroll{},
		&EnrollOK{Count: 7},
		&Identify{TopK: 3, Template: []float32{1, 2, 3}},
		&IdentifyOK{Candidates: []Candidate{{"alice", 44}, {"bob", -3}}, Accepted: true, Alpha: 341, Beta: 63, BytesSent: 1, BytesRecv: 2, BytesTotal: 3},
		&Delete{ID: "alice"},
		&DeleteOK{},
		&Health{Peers: true},
		&HealthOK{Name: "p1", Mode: "2pc", Digest: Digest{{Rows: 3, Live: 2, Hash: [16]byte{1}}}, InDoubt: 1, ConfigSerial: 3, ConfigHash: [8]byte{9},
			Peers: []PeerState{{Name: "p2", State: PeerAgrees}, {Name: "p3", State: PeerUnreachable, Note: "timeout"}}, Live: 7, DegradedLimit: 40},
		&Prepare{Txn: TxnID{9}, Origin: 1, Dim: 70, Base: 5, Ops: []Op{
			{Kind: OpPut, Seq: 5, ID: "x", Share: []byte{1, 2, 3, 4}},
			{Kind: OpPut, Seq: 6, ID: "s", Seeded: true, Share: make([]byte, 32)},
			{Kind: OpDelete, Seq: 2, ID: "y"},
		}},
		&BlindQuery{Query: [16]byte{1}, Sigma: [32]byte{2}, Digest: Digest{{Rows: 5, Live: 4}}, Pos: []int32{3, 70}, Coef: []int8{1, -2}},
		&BlindQueryOK{Bytes: 1234},
		&DecideShare{Query: [16]byte{3}, Rows: 1000, Bits: 8, TopK: 2, Entry: true},
		&DecideShareOK{},
		&DecideResult{Positions: []uint32{5, 9}},
		&DecideResult{Positions: []uint32{5}, Scores: []int32{-3}},
		&DecideResult{Positions: []uint32{5, 2}, Ranks: []uint16{0, 3}},
		&ShardIdentify{Query: [16]byte{5}, TopK: 2, Template: []float32{0.5, -1}},
		&ShardHidden{Query: [16]byte{6}, Probe: HiddenIdentify{TopK: 1, Nonce: [16]byte{3}, Time: 1_790_000_001, Parts: [][]byte{{1}, {2}, {3}}, Auth: Auth{Signer: "device", Nonce: [16]byte{3}, Sig: []byte{7}}}},
		&ShardAnswer{IDs: []string{"a", "b"}, Ranks: []uint16{1, NoRank}, Bytes: 99},
		&ShardAnswer{IDs: []string{"a"}, Ranks: []uint16{0}, Scores: []int32{-7}, Bytes: 1},
		&ShardAnswer{IDs: []string{"a"}, Ranks: []uint16{0}, Scores: []int32{9}, Bytes: 2, Degraded: true},
		&ShardAnswer{IDs: []string{"a"}, Ranks: []uint16{0}, Scores: []int32{9}, Bytes: 30, Sent: 10, Recv: 20},
		&DecideMerge{Query: [16]byte{6}, Shard: 3, TopK: 2, Scores: []int32{40, 12}},
		&DecideMergeOK{Ranks: []uint16{0, NoRank}},
		&ReplQueryOK{Bytes: 77, TagKey: [32]byte{7}},
		&ReplShare{Query: [16]byte{4}, Rows: 1000, Bits: 16, TopK: 3, Entry: 2, Tags: true, Digest: [32]byte{5}, Down: 2},
		&ReplResult{Positions: []uint32{5, 9}, Values: []uint16{200, 3}, Tags: []uint32{1 << 31, 9}},
		&ReplResult{Positions: []uint32{5}, Scores: []int32{-3}, Values: []uint16{1}, Tags: []uint32{2}, Fetched: 1400},
		&TagAsk{Query: [16]byte{9}, List: true, Select: [][]byte{{1, 2}, {3, 4}}},
		&TagAnswers{List: []byte{1, 2, 3}, Rows: [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}}},
		&TagAnswers{ListDigest: [32]byte{7}, Rows: [][]byte{{1, 2, 3, 4}}},
		&Vote{Txn: TxnID{1, 2}},
		&Decide{Txn: TxnID{3}, Origin: 2, Commit: true, Proof: [32]byte{9, 8}},
		&Prepare{Txn: TxnID{7}, Origin: 1, Dim: 8, Base: 2, Ops: []Op{{Kind: OpDelete, Seq: 0, ID: "r"}}, Relay: [32]byte{4, 5}},
		&DecideOK{},
		&Working{},
		&Query{Dim: 128, Beta: 2, Plus: []uint64{1, 0}, Minus: []uint64{0, 1}, Digest: Digest{{}, {Rows: 1}}, BlockWords: 1024},
		&QueryBatch{Dim: 128, Beta: 2, Probes: []Probe{{Plus: []uint64{1, 0}, Minus: []uint64{0, 1}}, {Plus: []uint64{3, 0}, Minus: []uint64{0, 0}}}, Digest: Digest{{Rows: 1}}, BlockWords: 512},
		&Block{Seg: 1, W0: 2, NW: 3},
		&BlocksEnd{},
		&PublicKeyRequest{},
		&PublicKey{Key: []byte{1, 2, 3}},
		&HEQuery{Key: [32]byte{1, 2}, Groups: 2, Rows: 70000, TopK: 1, CtBytes: 131000, Query: [16]byte{7}},
		&HEResult{Rows: []uint32{5, 9}, Ranks: []uint16{0, NoRank}},
		&HEDecide{Seq: 4, Txn: TxnID{5}, Commit: true, Base: 10, N: 2},
		&HEDelete{Seq: 5, ID: "gone", Row: 11},
		&HESync{Seq: 5},
		&HESyncOK{Seq: 3},
		&IdentifyOK{ScoresHidden: true, Candidates: []Candidate{{"x", 0}}},
		&IdentifyOK{ScoresHidden: true, Accepted: true, Candidates: []Candidate{{"y", 0}}, Degraded: true},
		&ReplFetch{Seg: 2, From: 4096, Max: 2048, Attest: true},
		&ReplAttest{Seg: 1},
		&ListIDs{Limit: 1000},
		&ListIDs{After: "person-7/sample-0", Limit: 2},
		&IDList{IDs: []string{"alice", "bob"}, More: true},
		&IDList{},
		&HasID{ID: "alice"},
		&HasIDOK{Enrolled: true},
		&HasIDOK{},
		&ReshareRequest{},
		&ReshareOK{Epoch: 3, Rows: 9},
		&HiddenIdentify{TopK: 2, Nonce: [16]byte{9}, Time: 1_790_000_000, Parts: [][]byte{{1}, {2, 3}, {4}}, Auth: Auth{Signer: "device", Nonce: [16]byte{9}, Sig: []byte{4, 5}}},
		&HiddenQuery{Digest: Digest{{Rows: 2, Live: 2}}, Items: []HiddenItem{
			{Query: [16]byte{7}, Sigma: [32]byte{8}, Nonce: [16]byte{3}, Time: 1_790_000_001, Sealed: []byte{5, 6, 7},
				Probe: ProbeAuth{TopK: 2, Hashes: [][32]byte{{1}, {2}, {3}}, Auth: Auth{Signer: "device", Nonce: [16]byte{3}, Sig: []byte{6}}}},
			{Query: [16]byte{8}, Nonce: [16]byte{4}, Time: 1_790_000_002, Sealed: []byte{1}, Probe: ProbeAuth{TopK: 1, Auth: Auth{Signer: "d", Nonce: [16]byte{4}}}}}},
		&HiddenQueryOK{Items: []HiddenResult{{Bytes: 7, TagKey: [32]byte{4}}, {Err: &Error{Code: CodeForbidden, Msg: "no"}}}},
		&HiddenVector{Query: [16]byte{1, 2}, Rows: 300, Bits: 16},
		&HiddenVector{Query: [16]byte{3}, Bits: 8, None: true, Why: "p2: its part does not open"},
		&HiddenVectorOK{},
		&ReplShare{Query: [16]byte{4}, Rows: 10, Bits: 8, TopK: 1, Entry: 1, Hidden: true, QueryDigests: [2][32]byte{{1}, {2}}, VerdictKeys: [2][32]byte{{3}, {4}}, SigmaDigest: [32]byte{5}},
		&ReplResult{Positions: []uint32{5}, Values: []uint16{1}, Tags: []uint32{2}, Fetched: 7},
		&ReplResult{Fetched: 7, Verdict: SealVerdict([32]byte{1}, 0, true)},
		&IdentifyOK{ScoresHidden: true, Verdicts: [][]byte{SealVerdict([32]byte{2}, 0, false), SealVerdict([32]byte{2}, 1, false)}},
		&ShardAnswer{IDs: []string{"a"}, Ranks: []uint16{0}, Bytes: 2, Verdict: SealVerdict([32]byte{3}, 2, false)},
		&Prepare{Txn: TxnID{7}, Origin: 1, Dim: 8, Base: 2, Ops: []Op{{Kind: OpReplace, Seq: 0, ID: "a"}, {Kind: OpReplace, Seq: 1, ID: "b", Share: []byte{1, 2}}}, Reshare: &Reshare{Epoch: 2, Key: [32]byte{5}}},
		&Prepare{Txn: TxnID{6}, Origin: 2, Dim: 8, Base: 1, Ops: []Op{{Kind: OpDelete, Seq: 0, ID: "z"}}, Prior: Decide{Txn: TxnID{5}, Origin: 2, Commit: true}},
		&ReplRows{Seg: 1, Total: 9, From: 7, Bits: 8, Dim: 3, IDs: []string{"a", "b"}, Live: []bool{true, false}, Shares: []byte{1, 2, 3, 0, 0, 0}, Epoch: 4, Salts: bytes.Repeat([]byte{5}, 2*SaltSize), Records: bytes.Repeat([]byte{6}, 4*RecordSize)},
		&BlindQuery{Query: [16]byte{7}, Sigma: [32]byte{8}, Digest: Digest{{Rows: 2, Live: 2}}, Pos: []int32{1}, Coef: []int8{-1}, Down: 3},
		&ReplShare{Query: [16]byte{9}, Rows: 10, Bits: 8, TopK: 1, Entry: 0, Tags: true, Digest: [32]byte{}, Down: 2, Next: true},
		&SealedEnroll{Auth: Auth{Signer: "ops", Nonce: [16]byte{7}, Sig: []byte{1, 2}}, IDs: []string{"alice", "bob"}, Parts: [][]byte{{1, 2, 3}, {4, 5}}},
		&SealedEnroll{},
		&SealedPrepare{Prepare: Prepare{Txn: TxnID{9}, Origin: 1, Dim: 70, Base: 5, Ops: []Op{{Kind: OpPut, Seq: 5, ID: "x"}, {Kind: OpPut, Seq: 6, ID: "y"}}},
			Part: []byte{9, 8, 7}, Hashes: [][32]byte{{1}, {2}}},
		&SealedPrepare{Prepare: Prepare{Txn: TxnID{9}, Origin: 1, Dim: 70, Base: 5, Ops: []Op{{Kind: OpPut, Seq: 5, ID: "x"}}},
			Part: []byte{9, 8, 7}, Hashes: [][32]byte{{1}, {2}, {3}}, Held: []byte{6, 5}},
		&Prepared{Txn: TxnID{4, 2}, Origin: 2},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range samples() {
		b := Marshal(m)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !bytes.Equal(Marshal(got), b) {
			t.Fatalf("%T: round trip differs", m)
		}
		// Every strict prefix is rejected, never a panic.
		for i := 0; i < len(b); i++ {
			if _, err := Decode(b[:i]); err == nil && i < len(b) {
				if _, ok := m.(*DeleteOK); !ok || i < 2 {
					t.Fatalf("%T: prefix of %d bytes accepted", m, i)
				}
			}
		}
		if _, err := Decode(append(b, 0)); err == nil {
			t.Fatalf("%T: trailing byte accepted", m)
		}
	}
}

func TestRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"version":       {1, byte(THealth)},
		"type":          {Version, 200},
		"short":         {Version},
		"topk":          Marshal(&Identify{TopK: 0, Template: []float32{1}}),
		"hugecount":     {Version, byte(TEnroll), 0xff, 0xff, 0xff, 0xff},
		"query":         Marshal(&Query{Dim: 128, Beta: 0, Plus: []uint64{0, 0}, Minus: []uint64{0, 0}}),
		"batch of one":  Marshal(&QueryBatch{Dim: 128, Beta: 1, Probes: []Probe{{Plus: []uint64{1, 0}, Minus: []uint64{0, 0}}}, BlockWords: 1}),
		"block too big": Marshal(&QueryBatch{Dim: 128, Beta: 1, Probes: []Probe{{Plus: []uint64{1, 0}, Minus: []uint64{0, 0}}, {Plus: []uint64{2, 0}, Minus: []uint64{0, 0}}}, BlockWords: 1 << 23}),
		"page of none":  Marshal(&ListIDs{Limit: 0}),
		"page too big":  Marshal(&ListIDs{Limit: MaxListIDs + 1}),
		"after a tab":   Marshal(&ListIDs{After: "a\tb", Limit: 1}),
		"ids unsorted":  Marshal(&IDList{IDs: []string{"bob", "alice"}}),
		"ids twice":     Marshal(&IDList{IDs: []string{"bob", "bob"}}),
		"empty id":      Marshal(&IDList{IDs: []string{""}}),
		"has no id":     Marshal(&HasID{}),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	agreement := Marshal(&HealthOK{Peers: []PeerState{{Name: "p2", State: PeerAgrees}}})
	agreement[len(agreement)-12] = 9 // the peer's agreement: before its empty note (2), Empty (1), Live (4) and DegradedLimit (4)
	if _, err := Decode(agreement); !errors.Is(err, ErrMalformed) {
		t.Errorf("agreement 9 accepted: %v", err)
	}
	for name, op := range map[string]Op{
		"share":  {Kind: OpPut, ID: "x", Share: []byte{1}},
		"seeded": {Kind: OpPut, ID: "x", Seeded: true},
		"delete": {Kind: OpDelete, ID: "x"},
	} {
		b := Marshal(&SealedPrepare{Prepare: Prepare{Dim: 1, Ops: []Op{op}}})
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("a sealed prepare with a %s op: %v", name, err)
		}
	}
	bad := Marshal(&Decide{})
	bad[len(bad)-1-32] = 7 // Commit, before the proof
	if _, err := Decode(bad); err == nil {
		t.Error("boolean 7 accepted")
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range samples() {
		f.Add(Marshal(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		if out := Marshal(m); !bytes.Equal(out, b) {
			t.Fatalf("%T: decode then encode changed the bytes:\n%x\n%x", m, b, out)
		}
	})
}

// TestStoredSealedPrepareBeforeHeld: a held record that a build of wire 15
// logged (a SealedPrepare without the Held field) still reads, as one
// without a held part.
func TestStoredSealedPrepareBeforeHeld(t *testing.T) {
	m := &SealedPrepare{Prepare: Prepare{Txn: TxnID{3}, Origin: 0, Dim: 4, Base: 1, Ops: []Op{{Kind: OpPut, Seq: 1, ID: "a"}}}, Part: []byte{1}, Hashes: [][32]byte{{1}, {2}, {3}}}
	b := Marshal(m)
	old := append([]byte{15}, b[1:len(b)-4-32]...) // version 15 had no Held length, nor a Relay proof
	got, err := DecodeStored(old)
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := got.(*SealedPrepare); !ok || sp.Held != nil || !bytes.Equal(Marshal(sp), b) {
		t.Fatalf("a wire-15 sealed prepare read as %+v", got)
	}
	if _, err := Decode(old); err == nil {
		t.Fatal("a wire-15 message accepted on the wire")
	}
	// Version 17 (a Held part, no Relay proof), and a plain prepare of 17.
	m.Held = []byte{9}
	b = Marshal(m)
	if got, err := DecodeStored(append([]byte{17}, b[1:len(b)-32]...)); err != nil || !bytes.Equal(Marshal(got), b) {
		t.Fatalf("a wire-17 sealed prepare read as %+v (%v)", got, err)
	}
	b = Marshal(&m.Prepare)
	if got, err := DecodeStored(append([]byte{17}, b[1:len(b)-32]...)); err != nil || !bytes.Equal(Marshal(got), b) {
		t.Fatalf("a wire-17 prepare read as %+v (%v)", got, err)
	}
}
