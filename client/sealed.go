package client

import (
	"context"
	"crypto"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/device"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/protocol"
)

// enrollSealed enrolls a batch with the shares made here: the gallery
// vector G(x) of each template (the cluster's gallery levels), the mode's
// shares of it, each holder's shares sealed to that holder's
// key (internal/codec/seal) and bound to this request; the operator signs the
// ids and every part's hash. The entry relays the parts it cannot read and
// never sees x, G(x) or another holder's share.
func (c *Client) enrollSealed(ctx context.Context, items []protocol.Item) error {
	if err := c.operator(protocol.OpPut); err != nil {
		return err
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return notSent{err}
	}
	entry := c.Entry() // the parts are made for it
	parts, err := SealShares(c.p, c.p.PartyIndex(entry), nonce, items)
	if err != nil {
		return notSent{err}
	}
	hashes := make([][32]byte, len(parts))
	for k, part := range parts {
		hashes[k] = protocol.PartHash(part)
	}
	auth, err := protocol.SignSealed(c.key, c.name, c.p.ClusterID(), nonce, ids, hashes)
	if err != nil {
		return notSent{err}
	}
	resp, err := c.call(ctx, entry, &protocol.SealedEnroll{Auth: auth, IDs: ids, Parts: parts}, protocol.TEnrollOK)
	if err != nil {
		return err
	}
	if n := resp.(*protocol.EnrollOK).Count; int(n) != len(items) {
		return fmt.Errorf("the entry acknowledged %d of %d enrollments", n, len(items))
	}
	return nil
}

// SealShares makes every holder's sealed part of an enrollment of items
// (party order): the mode's shares of G(x) (its device.Sealer: blind
// mode's additive shares, replicated mode's pairs), each part sealed
// to its holder for this request (nonce, ids).
func SealShares(p *config.Params, entry int, nonce [16]byte, items []protocol.Item) ([][]byte, error) {
	shares := device.Of(p.Mode()).Seal
	if !p.Spec().Sealed || shares == nil {
		return nil, fmt.Errorf("client: mode %s does not enroll sealed shares", p.Mode())
	}
	if entry < 0 || entry >= p.Mu() {
		return nil, fmt.Errorf("client: entry %d of %d holders", entry, p.Mu())
	}
	pts, err := shares.SealedShares(p, entry, items)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	ctx := protocol.SealContext(nonce, ids)
	parts := make([][]byte, len(pts))
	for k, pt := range pts {
		key, ok := p.SealKey(k)
		if !ok {
			return nil, fmt.Errorf("client: share holder %s has no seal key in the cluster configuration: assemble it again from the holder's current descriptor", p.Party(k).Name)
		}
		b := seal.Binding{Cluster: p.ClusterID(), Holder: p.Party(k).Name, Mode: string(p.Mode()), Context: ctx}
		parts[k], err = seal.Seal(key, b, pt)
		clear(pt)
		if err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// HideProbe makes a hidden-probe identify of tmpl (config.Params.HideProbes):
// the mode's shares of the query vector Q(tmpl)
// (its device.ProbeHider), each holder's pair sealed to it for a
// fresh request nonce, and the probe signed as the client name with key
// (protocol.SignProbe). No server, the entry included, can open another's
// part, and holders run only probes their clients signed. The decider's
// verdict on it opens under the probe's VerdictKey (CheckVerdicts).
func HideProbe(p *config.Params, key crypto.Signer, name string, tmpl []float32, topK int) (*Probe, error) {
	if device.Of(p.Mode()).Hide == nil {
		return nil, fmt.Errorf("client: mode %s does not hide probes", p.Mode())
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	return SealProbe(p, key, name, nonce, time.Now().Unix(), tmpl, topK)
}

// Probe is a hidden-probe identify and the key its verdict opens under.
type Probe struct {
	*protocol.HiddenIdentify
	VerdictKey [32]byte
}

// SealProbe is HideProbe with the request nonce and time (Unix seconds)
// given (tests, and callers that keep their own request ids); a holder
// refuses a nonce it has seen, or a time outside its window.
func SealProbe(p *config.Params, key crypto.Signer, name string, nonce [16]byte, t int64, tmpl []float32, topK int) (*Probe, error) {
	shares := device.Of(p.Mode()).Hide
	if shares == nil {
		return nil, fmt.Errorf("client: mode %s does not hide probes", p.Mode())
	}
	if key == nil {
		return nil, fmt.Errorf("client: no key to sign the probe with: holders run only probes signed by a client of the cluster")
	}
	m := &protocol.HiddenIdentify{TopK: uint16(topK), Nonce: nonce, Time: t}
	pts, vkey, err := shares.HiddenProbe(p, tmpl)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, pt := range pts {
			clear(pt)
		}
	}()
	ctx := protocol.QueryContext(m.Nonce, m.Time)
	for k, pt := range pts {
		pub, ok := p.SealKey(k)
		if !ok {
			return nil, fmt.Errorf("client: share holder %s has no seal key in the cluster configuration: assemble it again from the holder's current descriptor", p.Party(k).Name)
		}
		b := seal.Binding{Cluster: p.ClusterID(), Holder: p.Party(k).Name, Mode: string(p.Mode()), Context: ctx}
		part, err := seal.Seal(pub, b, pt)
		if err != nil {
			return nil, err
		}
		m.Parts = append(m.Parts, part)
	}
	if err := protocol.SignProbe(key, name, p.ClusterID(), m); err != nil {
		return nil, err
	}
	return &Probe{HiddenIdentify: m, VerdictKey: vkey}, nil
}

// CheckVerdicts opens the deciders' verdicts on a hidden probe (one per
// shard) that the entry forwarded with its answer: a probe refused by a
// failed check (whose answer the entry got as if the check had passed, or
// empty) is refused here, and an answer without its verdicts, or with one
// that does not open, is refused too.
func CheckVerdicts(p *config.Params, key [32]byte, ans *protocol.IdentifyOK) error {
	if len(ans.Verdicts) != p.Shards() {
		return protocol.RefusedByVerdict(protocol.Errorf(protocol.CodeInconsistent, "the entry answered a hidden probe with %d verdicts, want %d (one a shard): %v", len(ans.Verdicts), p.Shards(), protocol.ErrVerdict))
	}
	for s, v := range ans.Verdicts {
		refused, err := protocol.OpenVerdict(key, s, v)
		if err != nil {
			return protocol.RefusedByVerdict(protocol.Errorf(protocol.CodeInconsistent, "%v", err))
		}
		if refused {
			return protocol.RefusedByVerdict(protocol.Errorf(protocol.CodeInconsistent, "%s", protocol.RefusedHidden))
		}
	}
	return nil
}
