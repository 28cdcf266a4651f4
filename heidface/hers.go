package heidface

import (
	"fmt"
	"math"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// HERS is the baseline database encryption of the paper (section 3.1,
// after HERS): the N x d matrix of templates is encrypted column by column,
// one ciphertext per position j holding that coordinate of N templates, and
// a query costs d scalar multiplications and d-1 additions per N
// identities. To run on the same exact scheme as IDFace, coordinates are
// quantised to integers in [-Scale, Scale] (Scale = 127: 8-bit templates);
// scores are the integer inner products, decoded as centred values mod t.
type HERS struct {
	P     *BGVScheme
	Scale float64
	enc   *rlwe.Encryptor
	ecd   *bgv.Encoder
}

// HERSGroup holds d ciphertexts for up to N templates.
type HERSGroup struct {
	Cols []*rlwe.Ciphertext
	Rows int
}

// NewHERS returns the baseline's encryption context.
func NewHERS(p *BGVScheme, pk *rlwe.PublicKey) *HERS {
	return &HERS{P: p, Scale: 127, enc: rlwe.NewEncryptor(p.BGV, pk), ecd: bgv.NewEncoder(p.BGV)}
}

// Quantize maps a unit template to integers in [-Scale, Scale].
func (h *HERS) Quantize(x []float32) []int64 {
	var n float64
	for _, v := range x {
		n += float64(v) * float64(v)
	}
	n = math.Sqrt(n)
	q := make([]int64, len(x))
	for j, v := range x {
		q[j] = int64(math.Round(float64(v) / n * h.Scale))
	}
	return q
}

// Encrypt encrypts up to N quantised templates column-wise.
func (h *HERS) Encrypt(rows [][]int64) (*HERSGroup, error) {
	p := h.P
	if len(rows) > p.N() {
		return nil, fmt.Errorf("heidface: %d rows exceed N = %d", len(rows), p.N())
	}
	pt := bgv.NewPlaintext(p.BGV, p.BGV.MaxLevel())
	pt.IsBatched = false
	col := make([]int64, p.N())
	g := &HERSGroup{Rows: len(rows)}
	for j := 0; j < p.Dim; j++ {
		clear(col)
		for i, r := range rows {
			col[i] = r[j]
		}
		if err := h.ecd.Encode(col, pt); err != nil {
			return nil, err
		}
		ct := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
		if err := h.enc.Encrypt(pt, ct); err != nil {
			return nil, err
		}
		g.Cols = append(g.Cols, ct)
	}
	return g, nil
}

// IP computes sum_j q_j * ct_j: the encrypted inner products of the query
// with every template of the group.
func (h *HERS) IP(g *HERSGroup, q []int64, out *rlwe.Ciphertext) error {
	p := h.P
	if len(q) != p.Dim {
		return fmt.Errorf("heidface: query of %d values, want %d", len(q), p.Dim)
	}
	rq := p.BGV.RingQ().AtLevel(p.BGV.MaxLevel())
	for i := range 2 {
		out.Value[i].Zero()
	}
	*out.MetaData = *g.Cols[0].MetaData
	for j, ct := range g.Cols {
		c := q[j]
		if c == 0 {
			continue
		}
		for i := range 2 {
			if c > 0 {
				rq.MulScalarThenAdd(ct.Value[i], uint64(c), out.Value[i])
			} else {
				rq.MulScalarThenSub(ct.Value[i], uint64(-c), out.Value[i])
			}
		}
	}
	return nil
}

// HERSScores decrypts the baseline's inner products (centred mod t).
func (k *Key) HERSScores(ct *rlwe.Ciphertext, rows int, scores []int64) error {
	k.dec.Decrypt(ct, k.pt)
	if err := k.ecd.Decode(k.pt, k.buf); err != nil {
		return err
	}
	t := k.P.BGV.PlaintextModulus()
	for i := 0; i < rows; i++ {
		v := k.buf[i]
		if v > t/2 {
			scores[i] = -int64(t - v)
		} else {
			scores[i] = int64(v)
		}
	}
	return nil
}

// Copy returns a context for another goroutine.
func (h *HERS) Copy() *HERS {
	return &HERS{P: h.P, Scale: h.Scale, enc: h.enc.ShallowCopy(), ecd: h.ecd.ShallowCopy()}
}
