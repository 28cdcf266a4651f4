package replicated

import (
	"fmt"

	"github.com/idface/idface/engine/blind"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
	"github.com/idface/idface/template"
)

// sealedShares makes, at the operator's client, each holder's plaintext
// part of a sealed enrollment (config.ModeSpec.SealedShares): G(x) with
// the cluster's gallery levels, the three shares (two uniform from
// crypto/rand, the third v minus them), and for holder k the flag 0 (full
// shares) and, per item, its pair (s_k, s_(k+1)) and its trailer (the
// salts of its two shares and the record of the third,
// replicated.Trailers) as the holder stores it.
func sealedShares(p *config.Params, _ int, items []protocol.Item) ([][]byte, error) {
	switch blind.Ring(p).Bits {
	case 8:
		return sharePairs[uint8](p, items)
	case 16:
		return sharePairs[uint16](p, items)
	}
	return nil, fmt.Errorf("replicated: a ring of %d bits", blind.Ring(p).Bits)
}

func sharePairs[E additive.Elem](p *config.Params, items []protocol.Item) ([][]byte, error) {
	d := p.Dim()
	unit := 2*d*additive.RingOf[E]().Bits/8 + replicated.TrailerSize
	pts := make([][]byte, replicated.Holders)
	for k := range pts {
		pts[k] = make([]byte, 1, 1+len(items)*unit) // flag 0: full shares
	}
	fail := func(err error) ([][]byte, error) {
		for _, pt := range pts {
			clear(pt[:cap(pt)])
		}
		return nil, err
	}
	tr, err := template.NewLevelTransformer(d, p.GalleryLevels())
	if err != nil {
		return nil, err
	}
	rnd, err := sharing.NewStream(nil) // AES-CTR keyed from crypto/rand
	if err != nil {
		return nil, err
	}
	v := make([]int8, d)
	var s [replicated.Holders][]E
	var sb [replicated.Holders][]byte // s as bytes, for the records
	for j := range s {
		s[j] = make([]E, d)
	}
	defer func() {
		clear(v)
		for j := range s {
			clear(s[j])
		}
	}()
	for i, it := range items {
		if err := template.ApplyLevels(tr, it.Template, v); err != nil {
			return fail(fmt.Errorf("item %d (%s): %w", i, it.ID, err))
		}
		if err := replicated.Split(&s, v, rnd); err != nil {
			return fail(err)
		}
		for j := range s {
			sb[j] = additive.ElemBytes(s[j])
		}
		tr, err := replicated.Trailers(p.ClusterID(), it.ID, &sb, rnd)
		if err != nil {
			return fail(err)
		}
		for k := range pts {
			pr := replicated.Pair(&s, k)
			pts[k] = append(append(pts[k], additive.ElemBytes(pr[0])...), additive.ElemBytes(pr[1])...)
			pts[k] = tr[k].Append(pts[k])
		}
	}
	return pts, nil
}
