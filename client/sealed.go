package client

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/seal"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/template"
)

// enrollSealed enrolls a batch in blind mode with the shares made here:
// the gallery vector G(x) of each template (the cluster's gallery levels),
// mu additive shares of it, each holder's shares sealed to that holder's
// key (internal/seal) and bound to this request; the operator signs the
// ids and every part's hash. The entry relays the parts it cannot read and
// never sees x, G(x) or another holder's share.
func (c *Client) enrollSealed(ctx context.Context, items []protocol.Item) error {
	if c.key == nil {
		return notSent{fmt.Errorf("this client has no operator key: only an operator (idface client init --role operator) may %s", protocol.OpPut)}
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return notSent{err}
	}
	parts, err := SealShares(c.p, c.p.PartyIndex(c.entry), nonce, items)
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
	resp, err := c.call(ctx, c.entry, &protocol.SealedEnroll{Auth: auth, IDs: ids, Parts: parts}, protocol.TEnrollOK)
	if err != nil {
		return err
	}
	if n := resp.(*protocol.EnrollOK).Count; int(n) != len(items) {
		return fmt.Errorf("the entry acknowledged %d of %d enrollments", n, len(items))
	}
	return nil
}

// SealShares makes every holder's sealed part of a blind enrollment of
// items (party order): G(x) with the cluster's gallery levels, shares
// over the cluster's ring from crypto/rand, the full share for the entry
// (its log keeps it, as before) and a 32-byte seed for every other holder,
// each part sealed to its holder for this request (nonce, ids).
func SealShares(p *config.Params, entry int, nonce [16]byte, items []protocol.Item) ([][]byte, error) {
	if p.Mode() != config.ModeBlind { // the additive shares below are blind mode's
		return nil, fmt.Errorf("client: this client makes sealed shares for blind mode only; this cluster runs %s", p.Mode())
	}
	if entry < 0 || entry >= p.Mu() {
		return nil, fmt.Errorf("client: entry %d of %d holders", entry, p.Mu())
	}
	var pts [][]byte
	var err error
	switch p.Ring().Bits {
	case 8:
		pts, err = shareBlind[uint8](p, entry, items)
	case 16:
		pts, err = shareBlind[uint16](p, entry, items)
	default:
		err = fmt.Errorf("client: a ring of %d bits", p.Ring().Bits)
	}
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

// shareBlind makes each holder's plaintext part: a flag (1: seeds, 0: full
// shares) and one unit per item.
func shareBlind[E additive.Elem](p *config.Params, entry int, items []protocol.Item) ([][]byte, error) {
	mu, d := p.Mu(), p.Dim()
	unit := d * additive.RingOf[E]().Bits / 8
	pts := make([][]byte, mu)
	for k := range pts {
		if k == entry {
			pts[k] = make([]byte, 1, 1+len(items)*unit)
		} else {
			pts[k] = make([]byte, 1, 1+len(items)*additive.SeedSize)
			pts[k][0] = 1
		}
	}
	tr, err := template.NewLevelTransformer(d, p.GalleryLevels())
	if err != nil {
		return nil, err
	}
	rnd, err := sharing.NewStream(nil) // AES-CTR keyed from crypto/rand
	if err != nil {
		return nil, err
	}
	v, own := make([]int8, d), make([]E, d)
	seeds := make([]additive.Seed, mu-1)
	defer func() { clear(v); clear(own); clear(seeds) }()
	for i, it := range items {
		if err := template.ApplyLevels(tr, it.Template, v); err != nil {
			for _, pt := range pts {
				clear(pt[:cap(pt)])
			}
			return nil, fmt.Errorf("item %d (%s): %w", i, it.ID, err)
		}
		if err := additive.GenSeededShares(seeds, own, v, rnd); err != nil {
			return nil, err
		}
		next := 0
		for k := range pts {
			if k == entry {
				pts[k] = append(pts[k], additive.ElemBytes(own)...)
			} else {
				pts[k] = append(pts[k], seeds[next][:]...)
				next++
			}
		}
	}
	return pts, nil
}
