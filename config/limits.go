package config

import (
	"github.com/idface/idface/network"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// Limits bound what any one peer can make a server hold. Over a limit the
// peer gets a clear error and every other peer is still served.
type Limits struct {
	// StreamsPerPeer is how many requests one peer may have in progress.
	StreamsPerPeer int
	// Streams is how many requests the server has in progress in all.
	Streams int
	// ConnsPerPeer caps one certificate's open connections.
	ConnsPerPeer int
}

// Limits returns the concurrency limits.
func (p *Params) Limits() Limits {
	return Limits{StreamsPerPeer: 64, Streams: 512, ConnsPerPeer: 8}
}

// small is the bound of every request that carries no template or share.
const small = 4096

// MaxRequest is the largest request frame of type t that a peer of role r
// may send, or 0 if it may not send t at all. It is checked against the
// announced length before anything is allocated.
func (p *Params) MaxRequest(t protocol.Type, r network.Role) int {
	d := p.lit.Dim
	w := template.Words(d)
	switch t {
	case protocol.THealth:
		return small
	case protocol.TIdentify: // a template from a client: a few KB
		if r != network.RoleOperator && r != network.RoleDevice {
			return 0
		}
		return 2 + 2 + 4 + 4*d
	case protocol.TEnroll, protocol.TDelete: // from an operator, or forwarded by a party
		if r != network.RoleOperator && r != network.RoleParty {
			return 0
		}
		if t == protocol.TDelete {
			return small
		}
		return 2 + 4 + protocol.MaxBatch*(2+protocol.MaxIDLen+4+4*d)
	case protocol.THESync: // the HE key server asks the sequencer to bring it up to date
		if r != network.RoleParty && r != network.RoleHelper {
			return 0
		}
		return small
	}
	if r != network.RoleParty { // helpers and clients send nothing else
		return 0
	}
	switch t {
	case protocol.TPrepare: // a batch of shares (or HE rows) for one peer
		share := max(16*w, 2*d) // XOR bits or HE rows; blind shares of up to 16 bits
		return 2 + 16 + 1 + 2 + 4 + 4 + protocol.MaxBatch*(1+4+2+protocol.MaxIDLen+1+4+share)
	case protocol.TQuery:
		return 2 + 4 + 16*w + 4 + 24*MaxParties + 4
	case protocol.TDecide, protocol.THEDecide, protocol.THEDelete, protocol.TPublicKeyRequest, protocol.THEQuery, protocol.TDecideShare:
		return small
	case protocol.TBlindQuery: // the query's coefficients and the digest
		return 2 + 16 + 32 + 4 + 24*MaxParties + 4 + 3*d
	}
	return 0
}
