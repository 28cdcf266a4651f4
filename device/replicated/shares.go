// Package replicated is replicated mode's device part: the shares of a
// sealed enrollment, made at the operator's client (device.Sealer), and
// of a hidden probe, made at the device's (device.ProbeHider).
package replicated

import (
	"crypto/rand"
	"fmt"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing"
	"github.com/idface/idface/sharing/additive"
	"github.com/idface/idface/sharing/replicated"
	"github.com/idface/idface/template"
)

// Part is replicated mode's device part.
type Part struct{}

// SealedShares makes, at the operator's client, each holder's plaintext
// part of a sealed enrollment (device.Sealer): G(x) with
// the cluster's gallery levels, the three shares (two uniform from
// crypto/rand, the third v minus them), and for holder k the flag 0 (full
// shares) and, per item, its pair (s_k, s_(k+1)) and its trailer (the
// salts of its two shares and the record of the third,
// replicated.Trailers) as the holder stores it.
func (Part) SealedShares(p *config.Params, _ int, items []protocol.Item) ([][]byte, error) {
	switch p.Ring().Bits {
	case 8:
		return sharePairs[uint8](p, items)
	case 16:
		return sharePairs[uint16](p, items)
	}
	return nil, fmt.Errorf("replicated: a ring of %d bits", p.Ring().Bits)
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

// HiddenProbe makes (device.ProbeHider), at the device's
// client, each holder's plaintext part of a hidden-probe identify: y =
// Q(tmpl) with the cluster's query levels, its three shares (two uniform
// from a CSPRNG keyed from crypto/rand), and for holder k the pair (y_k,
// y_(k+1)) as little-endian k-bit elements, then the components (c_k,
// c_(k+1)) of a fresh verdict key (protocol.VerdictKey), replicated as the
// shares are: no holder, the entry included, holds all three.
func (Part) HiddenProbe(p *config.Params, tmpl []float32) ([][]byte, [32]byte, error) {
	var pts [][]byte
	var err error
	switch p.Ring().Bits {
	case 8:
		pts, err = probePairs[uint8](p, tmpl)
	case 16:
		pts, err = probePairs[uint16](p, tmpl)
	default:
		err = fmt.Errorf("replicated: a ring of %d bits", p.Ring().Bits)
	}
	if err != nil {
		return nil, [32]byte{}, err
	}
	var c [replicated.Holders][protocol.VerdictKeySize]byte
	for j := range c {
		if _, err := rand.Read(c[j][:]); err != nil {
			return nil, [32]byte{}, err
		}
	}
	for k := range pts {
		pts[k] = append(append(pts[k], c[k][:]...), c[(k+1)%replicated.Holders][:]...)
	}
	return pts, protocol.VerdictKey(p.ClusterID(), c), nil
}

func probePairs[E additive.Elem](p *config.Params, tmpl []float32) ([][]byte, error) {
	d := p.Dim()
	tr, err := template.NewLevelTransformer(d, p.QueryLevels())
	if err != nil {
		return nil, err
	}
	y := make([]int8, d)
	defer clear(y)
	if err := template.ApplyLevels(tr, tmpl, y); err != nil {
		return nil, err
	}
	rnd, err := sharing.NewStream(nil)
	if err != nil {
		return nil, err
	}
	var s [replicated.Holders][]E
	for j := range s {
		s[j] = make([]E, d)
	}
	defer func() {
		for j := range s {
			clear(s[j])
		}
	}()
	if err := replicated.Split(&s, y, rnd); err != nil {
		return nil, err
	}
	pts := make([][]byte, replicated.Holders)
	for k := range pts {
		pr := replicated.Pair(&s, k)
		pts[k] = append(append(make([]byte, 0, 2*len(additive.ElemBytes(pr[0]))+2*protocol.VerdictKeySize), additive.ElemBytes(pr[0])...), additive.ElemBytes(pr[1])...)
	}
	return pts, nil
}
