package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Row-map digests and health.
//
// A server that holds rows keeps a digest of them (protocol.Digest): per
// origin, the rows, the live rows and a set hash over the live (row, id)
// pairs, keyed with the cluster id (internal/codec/rowmap). Every client holds
// the cluster id, so whoever saw a set hash could test a guess such as
// "alice.smith was enrolled at p3 as row 5" by toggling the row's hash in
// and out. So the set hash never leaves a server as it is: a digest sent
// to another server carries HMAC-SHA256(pair key, segment, rows, live,
// hash) in its place (SealDigest), under the key the two servers share
// (Env.PairKeys, host/pairkey), and clients get no digest at all.
// Row counts go to servers only too. An operator who wants to know whether
// the servers agree asks each one (Health.Peers): it compares its row map
// with each peer's, server to server, and reports agreement, difference
// or an unreachable peer.

// digestLabel separates this HMAC from any other use of the pair key.
const digestLabel = "idface row digest v1\x00"

// SealDigest is g as this server sends it to peer, or compares it with
// what peer sent: each segment's set hash replaced by its HMAC under the
// pair key. Rows and live counts stay as they are (a query plans its
// blocks by them).
func (env Env) SealDigest(peer string, g protocol.Digest) (protocol.Digest, error) {
	key, ok := env.PairKeys[peer]
	if !ok {
		if peer == env.Self {
			return nil, fmt.Errorf("%s does not compare its rows with itself", env.Self)
		}
		return nil, fmt.Errorf("%s shares no key with %s, so it cannot compare row maps with it: the server was started without its identity key, or %s's certificate in the cluster config is not a PEM ECDSA P-256 certificate", env.Self, peer, peer)
	}
	out := make(protocol.Digest, len(g))
	var b [9]byte
	for i, s := range g {
		m := hmac.New(sha256.New, key[:])
		m.Write([]byte(digestLabel))
		b[0] = byte(i)
		binary.BigEndian.PutUint32(b[1:], s.Rows)
		binary.BigEndian.PutUint32(b[5:], s.Live)
		m.Write(b[:])
		m.Write(s.Hash[:])
		out[i] = protocol.SegDigest{Rows: s.Rows, Live: s.Live}
		copy(out[i].Hash[:], m.Sum(nil))
	}
	return out, nil
}

// HealthOf is what a server that holds rows knows of itself, for Health.
type HealthOf struct {
	Mode      string
	Unsettled int
	// Digest returns the committed row map (it takes the engine's lock).
	Digest func() protocol.Digest
	// Peers are the other servers that hold rows.
	Peers []string
	// Segment names a digest's segment in a note ("" for none).
	Segment func(i int) string
}

// Health answers a health request at a server that holds rows, by the
// asker's role: another server gets the row map sealed for the two of
// them and the unsettled count; an operator gets the unsettled count and,
// if it asked, how each peer's row map compares with this one; a device
// gets only the name and mode (and from the runtime, the configuration).
func (env Env) Health(ctx context.Context, r Request, h HealthOf) protocol.Msg {
	ok := &protocol.HealthOK{Name: env.Self, Mode: h.Mode}
	switch r.From.Role {
	case network.RoleParty, network.RoleHelper:
		g, err := env.SealDigest(r.From.Name, h.Digest())
		if err != nil {
			return protocol.Errorf(protocol.CodeForbidden, "%v", err)
		}
		ok.Digest, ok.InDoubt = g, uint32(h.Unsettled)
	case network.RoleOperator:
		ok.InDoubt = uint32(h.Unsettled)
		live := 0
		for _, sd := range h.Digest() {
			live += int(sd.Live)
		}
		ok.Empty, ok.Live = live == 0, uint32(live) // what an operator, who enrolls, knows anyway
		if m, _ := r.Msg.(*protocol.Health); m != nil && m.Peers {
			ok.Peers = env.ComparePeers(ctx, h)
		}
	}
	return ok
}

// ComparePeers asks every peer for its row map (sealed for the pair) and
// compares it with this server's own, all peers at once. A difference is
// looked at again every 50 ms until the digest wait has passed: a commit
// may be on its way to one of the two.
func (env Env) ComparePeers(ctx context.Context, h HealthOf) []protocol.PeerState {
	out := make([]protocol.PeerState, len(h.Peers))
	var wg sync.WaitGroup
	for i, name := range h.Peers {
		wg.Go(func() { out[i] = env.comparePeer(ctx, name, h) })
	}
	wg.Wait()
	return out
}

func (env Env) comparePeer(ctx context.Context, name string, h HealthOf) protocol.PeerState {
	wait := env.Params.Timeouts().DigestWait
	deadline := time.Now().Add(wait)
	unreachable := func(err error) protocol.PeerState {
		return protocol.PeerState{Name: name, State: protocol.PeerUnreachable, Note: shorten(err.Error())}
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, max(wait, 3*time.Second))
		resp, err := rpc.Call(cctx, env.Net, name, &protocol.Health{})
		cancel()
		if err != nil {
			return unreachable(err)
		}
		theirs, ok := resp.(*protocol.HealthOK)
		if !ok {
			return unreachable(fmt.Errorf("answered health with %v", resp.Type()))
		}
		mine, err := env.SealDigest(name, h.Digest())
		if err != nil {
			return unreachable(err)
		}
		if mine.Equal(theirs.Digest) {
			return protocol.PeerState{Name: name, State: protocol.PeerAgrees}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var segs []string
			for _, i := range mine.Differing(theirs.Digest) {
				if h.Segment != nil && h.Segment(i) != "" {
					segs = append(segs, h.Segment(i))
				}
			}
			note := "its rows differ from ours"
			if len(segs) > 0 {
				note = "rows of origin " + strings.Join(segs, ", ") + " differ from ours"
			}
			env.Log.Warn("a peer's rows differ from ours", "peer", name, "diff", mine.Diff(theirs.Digest))
			return protocol.PeerState{Name: name, State: protocol.PeerDiffers, Note: note}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// shorten keeps a note readable in a status table.
func shorten(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "..."
}
