package heidface

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"

	"github.com/idface/idface/template"
)

// Group is one column group of the encrypted database (paper ENC_DB with
// Encode): for every position j the ciphertexts Plus[j] and Minus[j] encrypt
// X+_j and X-_j, whose coefficient c holds digit i of row i*N + c.
type Group struct {
	Plus, Minus []*rlwe.Ciphertext
	p           *BGVScheme
}

// BGVLocal is what a BGV local server computes with: the public key only.
type BGVLocal struct {
	P   *BGVScheme
	enc *rlwe.Encryptor
	ecd *bgv.Encoder
}

// NewBGVLocal returns the local server's encryption context.
func NewBGVLocal(p *BGVScheme, pk *rlwe.PublicKey) *BGVLocal {
	return &BGVLocal{P: p, enc: rlwe.NewEncryptor(p.BGV, pk), ecd: bgv.NewEncoder(p.BGV)}
}

// Slot locates a row within its group: digit i, coefficient c.
func (p *BGVScheme) Slot(row int) (digit, coeff int) { return row / p.N(), row % p.N() }

// EncryptGroup encrypts up to GroupRows ternary rows (T_alpha templates) as
// a new group: 2d public-key encryptions, on all cores. Row k of rows is the
// group's row k.
func (l *BGVLocal) EncryptGroup(rows []template.Ternary) (*Group, error) {
	slots := make([]int, len(rows))
	for i := range slots {
		slots[i] = i
	}
	return l.Delta(slots, rows)
}

// Delta encrypts the contribution of rows zs at the given slots of one
// group: 2d fresh encryptions whatever the number of rows, so adding a
// whole batch to a partly filled group costs what one row does. Adding the
// result to a group (Group.Add) enrolls the rows without re-encrypting the
// group; a new group is just its first delta.
func (l *BGVLocal) Delta(slots []int, zs []template.Ternary) (*Group, error) {
	p := l.P
	if err := checkSlots(slots, zs, p.Dim, p.GroupRows()); err != nil {
		return nil, err
	}
	n := p.N()
	vals := make([][]uint64, 2*p.Dim) // vals[j] for X+_j, vals[d+j] for X-_j
	for j := range vals {
		vals[j] = make([]uint64, n)
	}
	for k, z := range zs {
		digit, c := p.Slot(slots[k])
		v := uint64(1) << uint(digit*p.Enc.LogP)
		for w := range z.Plus {
			for b := z.Plus[w]; b != 0; b &= b - 1 {
				vals[w*64+bits.TrailingZeros64(b)][c] += v
			}
			for b := z.Minus[w]; b != 0; b &= b - 1 {
				vals[p.Dim+w*64+bits.TrailingZeros64(b)][c] += v
			}
		}
	}
	cts, err := l.encryptAll(vals)
	if err != nil {
		return nil, err
	}
	return &Group{Plus: cts[:p.Dim:p.Dim], Minus: cts[p.Dim:], p: p}, nil
}

// checkSlots verifies a delta's rows: one slot each, inside the group,
// none twice, every row of dimension dim.
func checkSlots(slots []int, zs []template.Ternary, dim, groupRows int) error {
	if len(slots) != len(zs) {
		return fmt.Errorf("heidface: %d slots for %d rows", len(slots), len(zs))
	}
	seen := make(map[int]bool, len(slots))
	for k, z := range zs {
		if z.Dim != dim {
			return fmt.Errorf("%w: row %d has d = %d", template.ErrDimension, k, z.Dim)
		}
		if slots[k] < 0 || slots[k] >= groupRows || seen[slots[k]] {
			return fmt.Errorf("heidface: slot %d outside a group of %d or used twice", slots[k], groupRows)
		}
		seen[slots[k]] = true
	}
	return nil
}

// add adds delta into g, column by column.
func (g *Group) add(delta *Group) {
	p := g.p
	rq := p.BGV.RingQ().AtLevel(p.BGV.MaxLevel())
	for j := range g.Plus {
		for _, pair := range [2][2]*rlwe.Ciphertext{{g.Plus[j], delta.Plus[j]}, {g.Minus[j], delta.Minus[j]}} {
			rq.Add(pair[0].Value[0], pair[1].Value[0], pair[0].Value[0])
			rq.Add(pair[0].Value[1], pair[1].Value[1], pair[0].Value[1])
		}
	}
}

// encryptAll encrypts every coefficient vector with fresh randomness, one
// Lattigo encryptor and encoder copy per goroutine (they are not safe for
// concurrent use).
func (l *BGVLocal) encryptAll(vals [][]uint64) ([]*rlwe.Ciphertext, error) {
	p := l.P
	cts := make([]*rlwe.Ciphertext, len(vals))
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			enc, ecd := l.enc.ShallowCopy(), l.ecd.ShallowCopy()
			pt := bgv.NewPlaintext(p.BGV, p.BGV.MaxLevel())
			pt.IsBatched = false
			for j := g; j < len(vals); j += workers {
				if err := ecd.Encode(vals[j], pt); err != nil {
					errs[g] = err
					return
				}
				ct := rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())
				if err := enc.Encrypt(pt, ct); err != nil {
					errs[g] = err
					return
				}
				cts[j] = ct
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("heidface: encrypting: %w", err)
		}
	}
	return cts, nil
}

// EncryptZero writes a fresh encryption of zero into ct; safe for
// concurrent use.
func (l *BGVLocal) EncryptZero(ct *rlwe.Ciphertext) error {
	return l.enc.ShallowCopy().EncryptZero(ct)
}

// AddRow enrolls one template into slot `row` of an existing group without
// re-encrypting it: every one of the 2d ciphertexts gets a fresh encryption
// of the row's contribution (p^digit at coefficient c, or 0), so the local
// server cannot tell which positions changed. The slot must be empty.
func (l *BGVLocal) AddRow(g *Group, row int, z template.Ternary) error {
	if err := z.Validate(l.P.Alpha); err != nil {
		return err
	}
	delta, err := l.Delta([]int{row}, []template.Ternary{z})
	if err != nil {
		return err
	}
	g.add(delta)
	return nil
}

// IPDB computes the two inner-product ciphertexts of a query (paper
// IDFace.IP_DB): ct+ = sum_{y_j=+1} C+_j + sum_{y_j=-1} C-_j and
// ct- = sum_{y_j=+1} C-_j + sum_{y_j=-1} C+_j. Additions only: 2(beta-1)
// per group. outPlus and outMinus are overwritten.
func (l *BGVLocal) IPDB(g *Group, y template.Ternary, outPlus, outMinus *rlwe.Ciphertext) error {
	return l.IPDBBatch(g, []template.Ternary{y}, []*rlwe.Ciphertext{outPlus}, []*rlwe.Ciphertext{outMinus})
}

// IPDBBatch is IPDB for several queries over one group (ys[i] into
// outPlus[i], outMinus[i]), column by column: each column the queries
// select is read from memory once and added into every query that selects
// it while it is in cache, so Q queries read the union of their columns
// rather than Q times beta. Additions mod q commute, so every output
// equals IPDB's exactly.
func (l *BGVLocal) IPDBBatch(g *Group, ys []template.Ternary, outPlus, outMinus []*rlwe.Ciphertext) error {
	p := l.P
	if len(outPlus) != len(ys) || len(outMinus) != len(ys) {
		return fmt.Errorf("heidface: %d and %d outputs for %d queries", len(outPlus), len(outMinus), len(ys))
	}
	for _, y := range ys {
		if y.Dim != p.Dim {
			return fmt.Errorf("%w: query d = %d", template.ErrDimension, y.Dim)
		}
	}
	level := p.BGV.MaxLevel()
	rq := p.BGV.RingQ().AtLevel(level)
	started := make([]bool, len(ys))
	for j := range min(p.Dim, len(g.Plus)) {
		w, bit := j/64, uint64(1)<<uint(j%64)
		for i, y := range ys {
			var a, b *rlwe.Ciphertext // into ct+, into ct-
			switch {
			case y.Plus[w]&bit != 0:
				a, b = g.Plus[j], g.Minus[j]
			case y.Minus[w]&bit != 0:
				a, b = g.Minus[j], g.Plus[j]
			default:
				continue
			}
			cp, cm := outPlus[i], outMinus[i]
			if !started[i] {
				for k := range 2 {
					cp.Value[k].CopyLvl(level, a.Value[k])
					cm.Value[k].CopyLvl(level, b.Value[k])
				}
				*cp.MetaData, *cm.MetaData = *a.MetaData, *b.MetaData
				started[i] = true
				continue
			}
			for k := range 2 {
				rq.Add(cp.Value[k], a.Value[k], cp.Value[k])
				rq.Add(cm.Value[k], b.Value[k], cm.Value[k])
			}
		}
	}
	for i := range ys {
		if !started[i] {
			return fmt.Errorf("heidface: query %d of the batch is empty", i)
		}
	}
	return nil
}

// selectColumns hands f, for every position the query y selects, the
// column that goes into ct+ and the one that goes into ct- (paper
// IDFace.IP_DB: C+_j and C-_j where y_j = +1, swapped where y_j = -1), and
// returns how many positions it selected (Paillier's products).
func selectColumns[C any](y template.Ternary, plus, minus []C, f func(toPlus, toMinus C)) int {
	n := 0
	for w := range y.Plus {
		for b := y.Plus[w]; b != 0; b &= b - 1 {
			if j := w*64 + bits.TrailingZeros64(b); j < len(plus) { // a well-formed y has no bit past d
				f(plus[j], minus[j])
				n++
			}
		}
		for b := y.Minus[w]; b != 0; b &= b - 1 {
			if j := w*64 + bits.TrailingZeros64(b); j < len(plus) {
				f(minus[j], plus[j])
				n++
			}
		}
	}
	return n
}
