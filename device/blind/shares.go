// Package blind is blind mode's device part: the shares of a sealed
// enrollment, made at the operator's client (device.Sealer).
package blind

import (
	"fmt"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/template"
)

// Part is blind mode's device part.
type Part struct{}

// SealedShares makes, at the operator's client, each holder's plaintext
// part of a sealed enrollment (device.Sealer): G(x) with
// the cluster's gallery levels, mu additive shares over its ring from
// crypto/rand, the full share for the entry (its log keeps it) and a
// 32-byte seed for every other holder.
func (Part) SealedShares(p *config.Params, entry int, items []protocol.Item) ([][]byte, error) {
	switch p.Ring().Bits {
	case 8:
		return shareBlind[uint8](p, entry, items)
	case 16:
		return shareBlind[uint16](p, entry, items)
	}
	return nil, fmt.Errorf("blind: a ring of %d bits", p.Ring().Bits)
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
