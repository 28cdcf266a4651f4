package replicated

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/idface/idface/sharing/additive"
)

// Checked products of hidden probes (docs/HIDDEN-PROBES.md, "Checking the
// products"). Holder i's product share z_i has two cross terms no other
// holder can compute, so the two others check it together against static
// challenges that holder i never learns:
//
//   - r^t (t < CheckRounds) are pseudorandom weights over the rows, from
//     the key the verifiers P_(i-1) and P_(i+1) share; P_(i-1) keeps X_i^t
//     = sum_rows r^t x_i and P_(i+1) keeps X_(i+1)^t = sum_rows r^t x_(i+1)
//     over the live rows (each from a share it holds).
//   - holder i's vector carries, beside sigma's mask, the zero-sharing
//     H(k_(i-1,i)) - H(k_(i,i+1)) over positions, so P_(i+1), which gets the
//     vector to check it, sees it uniform.
//   - P_(i+1) computes A^t = sum_rows r^t (w_i - m_i + H(k_(i,i+1)))[pi(row)]
//     (a dead row's constant taken out), P_(i-1) B^t = sum_rows r^t
//     H(k_(i-1,i))[pi(row)]; honestly A - B = <X_i, y_i + y_(i+1)> +
//     <X_(i+1), y_i>.
//   - the cross part is a product of vectors the two verifiers hold; each
//     sends the decider its vector blinded with randomness from their key
//     (CheckLow, CheckHigh), and the decider computes every Delta^t
//     (CheckDelta), which is 0 when holder i computed its share honestly.
//
// An error delta over the rows survives one round with probability at
// most 1/2 (the row of least 2-adic valuation decides), and the rounds
// are independent: 2^-CheckRounds per query.

// CheckRounds is the number of independent rounds of every check.
const CheckRounds = 40

// Key labels (HMAC-SHA256 of the pair key): each use of a pair key has
// its own.
const (
	labelChallenge = "idface/repl/check challenge" // r^t of check i (P_(i-1), P_(i+1))
	labelBlind     = "idface/repl/check blind"     // the blinds of check i of one query
	labelPairMask  = "idface/repl/pair mask"       // H(k_(a,a+1)) of one query
)

func checkKey(pair *[32]byte, label string, i, shard int, probe *[32]byte) (cipher.Block, error) {
	m := hmac.New(sha256.New, pair[:])
	m.Write([]byte(label))
	var hdr [4]byte
	binary.BigEndian.PutUint16(hdr[:], uint16(i))
	binary.BigEndian.PutUint16(hdr[2:], uint16(shard+1)) // 0: unsharded
	m.Write(hdr[:])
	if probe != nil {
		m.Write(probe[:])
	}
	var k [32]byte
	m.Sum(k[:0])
	b, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, fmt.Errorf("replicated: %w", err)
	}
	return b, nil
}

// stream is AES-CTR of blk from block index at, under IV label seg.
func stream(blk cipher.Block, seg uint32, at uint64) cipher.Stream {
	var iv [16]byte
	binary.BigEndian.PutUint32(iv[:], seg)
	binary.BigEndian.PutUint64(iv[8:], at)
	return cipher.NewCTR(blk, iv[:])
}

// fill sets dst to the keystream.
func fill[E additive.Elem](s cipher.Stream, dst []E) {
	b := additive.ElemBytes(dst)
	clear(b)
	s.XORKeyStream(b, b)
}

// Challenges are the weights r^t of check i: CheckRounds elements of
// Z_(2^k) per row (WeightLanes, the rest unused), keyed by (segment,
// sequence) so that a row keeps its weights whatever is appended or
// deleted. A segment's weights are one []uint16 (Grow), laid out for the
// ring's kernel: at k = 16 a row's WeightLanes elements in turn
// (additive.WeightRows16); at k = 8 rows in pairs, each 16-bit word
// holding one round's weights of the pair (additive.WeightPairs8: half
// the bytes, two products an instruction), and every weight below 2^7.
//
// Why 7-bit weights keep a round's bound of 1/2: let row j have the
// least 2-adic valuation v of the error, delta_j = 2^v u with u odd. Given
// the other rows' weights, the round passes only if r_j = c mod
// 2^(k-v) for one c; r_j uniform on [0, 2^7) is uniform mod 2^(k-v)
// when k - v <= 7, so this happens with probability 2^-(k-v) <= 1/2, and
// with at most 2^-7 when v = 0 at k = 8.
type Challenges[E additive.Elem] struct{ blk cipher.Block }

// NewChallenges are check i's weights, from the key of its verifiers
// P_(i-1) and P_(i+1) (shard: the shard index, -1 unsharded).
func NewChallenges[E additive.Elem](pair *[32]byte, i, shard int) (*Challenges[E], error) {
	blk, err := checkKey(pair, labelChallenge, i, shard, nil)
	if err != nil {
		return nil, err
	}
	return &Challenges[E]{blk: blk}, nil
}

// pairs reports whether ring E's weights come in row pairs (k = 8).
func pairs[E additive.Elem]() bool {
	var zero E
	_, k16 := any(zero).(uint16)
	return !k16
}

// WeightWords is the length of a segment's weights of rows rows.
func WeightWords[E additive.Elem](rows int) int {
	if pairs[E]() {
		return (rows + 1) / 2 * additive.WeightLanes
	}
	return rows * additive.WeightLanes
}

// Grow returns w (the weights of rows [0, have) of segment seg) with those
// of rows [have, rows) added. At k = 8 a pair's two rows are written
// together, when its first row comes: a word a reader may hold is never
// written again, and an odd have finds its row's weights in place.
func (c *Challenges[E]) Grow(w []uint16, seg, have, rows int) []uint16 {
	if rows <= have {
		return w
	}
	if pairs[E]() {
		have += have % 2 // its pair was written with row have-1
		rows += rows % 2
		if rows <= have {
			return w
		}
	}
	w = append(w, make([]uint16, WeightWords[E](rows)-len(w))...)
	// Row r's weights are WeightLanes elements of the keystream from
	// element r*WeightLanes (3 AES blocks a row at k = 8, 6 at k = 16).
	blocks := uint64(additive.WeightLanes * len(additive.ElemBytes(make([]E, 1))) / 16)
	s := stream(c.blk, uint32(seg), uint64(have)*blocks)
	if !pairs[E]() {
		fill(s, w[have*additive.WeightLanes:rows*additive.WeightLanes])
		return w
	}
	b := make([]byte, (rows-have)*additive.WeightLanes)
	fill(s, b)
	for r := have; r < rows; r += 2 {
		lo, hi := b[(r-have)*additive.WeightLanes:], b[(r+1-have)*additive.WeightLanes:]
		dst := w[r/2*additive.WeightLanes:]
		for t := range additive.WeightLanes {
			dst[t] = uint16(lo[t]&0x7f) | uint16(hi[t]&0x7f)<<8
		}
	}
	return w
}

// Weight is round t's weight of row r in a segment's weights w.
func Weight[E additive.Elem](w []uint16, r, t int) E {
	if pairs[E]() {
		return E(w[r/2*additive.WeightLanes+t] >> (8 * uint(r%2)) & 0xff)
	}
	return E(w[r*additive.WeightLanes+t])
}

// ProbeContext is what a probe's masks and blinds are bound to: its query
// id and the device's nonce and time, so that no two probes share them
// (every holder runs a nonce once: an entry that gave two probes one
// query id would otherwise have them reuse their blinds, and the decider
// could subtract them).
func ProbeContext(qid [16]byte, nonce [16]byte, t int64) [32]byte {
	h := sha256.New()
	h.Write([]byte("idface/repl/probe context"))
	h.Write(qid[:])
	h.Write(nonce[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t))
	h.Write(b[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// PairMask sets dst to H(k_(a,a+1)) of one probe (its ProbeContext) over
// positions: the mask the two holders of pair key pair add (holder a+1)
// and subtract (holder a), a zero-sharing the third holder cannot remove.
func PairMask[E additive.Elem](dst []E, pair *[32]byte, a, shard int, probe [32]byte) error {
	blk, err := checkKey(pair, labelPairMask, a, shard, &probe)
	if err != nil {
		return err
	}
	fill(stream(blk, 0, 0), dst)
	return nil
}

// Blinds are check i's blinding of one query: a = (AX^t, Ay) for the
// vector of P_(i-1), b = (By, BX^t) for that of P_(i+1), and T^t, from the
// two verifiers' key; the decider never has them.
type Blinds[E additive.Elem] struct {
	AX, BX []E // CheckRounds x d
	Ay, By []E // d
	T      []E // CheckRounds
}

// NewBlinds are check i's blinds for one probe (its ProbeContext) at
// dimension d.
func NewBlinds[E additive.Elem](pair *[32]byte, i, shard int, probe [32]byte, d int) (*Blinds[E], error) {
	blk, err := checkKey(pair, labelBlind, i, shard, &probe)
	if err != nil {
		return nil, err
	}
	all := make([]E, 2*CheckRounds*d+2*d+CheckRounds)
	fill(stream(blk, 0, 0), all)
	md := CheckRounds * d
	return &Blinds[E]{AX: all[:md], BX: all[md : 2*md], Ay: all[2*md : 2*md+d], By: all[2*md+d : 2*md+2*d], T: all[2*md+2*d:]}, nil
}

// CheckPartSize is the elements of one verifier's part of one check
// (CheckLow or CheckHigh): its blinded vector (CheckRounds x d and d
// elements) and its CheckRounds sums.
func CheckPartSize(d int) int { return CheckRounds*d + d + CheckRounds }

// Accumulate adds the weights of rows [r0, r0+len(col)) of a segment's
// weights w (Grow's) times column col (one element per row) into x[t]
// (column j of X^t, stride d): x[t*d+j] += sum_rows r^t[row] * col[row]. A
// row erased from the store has a zero share and adds nothing.
func Accumulate[E additive.Elem](x []E, d, j int, w []uint16, r0 int, col []E) {
	var sums [CheckRounds]E
	WeightedSums(sums[:], w, r0, col)
	for t, a := range sums {
		x[t*d+j] += a
	}
}

// WeightedSums adds sum_rows r^t[row] * v[row - r0] into sums[t] over rows
// [r0, r0+len(v)) of a segment's weights w (Grow's), in the 16-bit lanes of
// the ring's kernel (additive.WeightRows16, additive.WeightPairs8); at
// k = 8 the sums are taken mod 2^8 at the end, which is the same sum (the
// low 8 bits of a product or a sum depend on the low 8 bits of its terms
// only).
func WeightedSums[E additive.Elem](sums []E, w []uint16, r0 int, v []E) {
	var acc [additive.WeightLanes]uint16
	if !pairs[E]() {
		additive.WeightRows16(&acc, w[r0*additive.WeightLanes:], as16(v))
	} else {
		b := additive.ElemBytes(v)
		one := func(r int, x byte) { // a row whose pair v does not hold whole
			for t := range CheckRounds {
				acc[t] += uint16(Weight[E](w, r, t)) * uint16(x)
			}
		}
		if r0%2 == 1 && len(b) > 0 { // the odd row of a pair begun before r0
			one(r0, b[0])
			b, r0 = b[1:], r0+1
		}
		even := len(b) &^ 1
		additive.WeightPairs8(&acc, w[r0/2*additive.WeightLanes:], b[:even])
		if even < len(b) { // the even row of a pair that goes on after v
			one(r0+even, b[even])
		}
	}
	for t := range CheckRounds {
		sums[t] += E(acc[t])
	}
}

// as16 views a slice of 16-bit elements as []uint16.
func as16[E additive.Elem](v []E) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
}

func dot[E additive.Elem](a, b []E) E {
	var s E
	for j, x := range a {
		s += x * b[j]
	}
	return s
}

// blinded writes a verifier's blinded vector, x + bx (CheckRounds x d)
// then y + by (d), to dst and returns the rest of dst (its sums).
func blinded[E additive.Elem](dst, x, bx, y, by []E) []E {
	md := len(x)
	for k := range md {
		dst[k] = x[k] + bx[k]
	}
	for k := range y {
		dst[md+k] = y[k] + by[k]
	}
	return dst[md+len(y):]
}

// CheckLow is P_(i-1)'s part of check i: U = (X_i^t + AX^t, y_i + Ay) and
// e1^t = -B^t - <X_i^t, y_i> + <X_i^t, By> + <y_i, BX^t> + <AX^t, By> +
// <Ay, BX^t> + T^t, written to dst (CheckPartSize elements: U's CheckRounds
// x d, then its d, then e1). xi is X_i (CheckRounds x d), yi the share y_i,
// b the sums B^t.
func CheckLow[E additive.Elem](dst, xi, yi, b []E, bl *Blinds[E]) {
	d := len(yi)
	e := blinded(dst, xi, bl.AX, yi, bl.Ay)
	for t := range CheckRounds {
		x, ax, bx := xi[t*d:(t+1)*d], bl.AX[t*d:(t+1)*d], bl.BX[t*d:(t+1)*d]
		e[t] = -b[t] - dot(x, yi) + dot(x, bl.By) + dot(yi, bx) + dot(ax, bl.By) + dot(bl.Ay, bx) + bl.T[t]
	}
}

// CheckHigh is P_(i+1)'s part of check i: V = (y_(i+1) + By, X_(i+1)^t +
// BX^t) and e2^t = A^t + <AX^t, y_(i+1)> + <Ay, X_(i+1)^t> - T^t, written to
// dst (CheckPartSize elements: V's CheckRounds x d of X, then its d of y,
// then e2). xn is X_(i+1), yn the share y_(i+1), a the sums A^t.
func CheckHigh[E additive.Elem](dst, xn, yn, a []E, bl *Blinds[E]) {
	d := len(yn)
	e := blinded(dst, xn, bl.BX, yn, bl.By)
	for t := range CheckRounds {
		e[t] = a[t] + dot(bl.AX[t*d:(t+1)*d], yn) + dot(bl.Ay, xn[t*d:(t+1)*d]) - bl.T[t]
	}
}

// CheckDelta is the decider's end of check i: it reports whether every
// round's Delta^t = e1^t + e2^t - <U^t, V^t> is 0, from P_(i-1)'s part low
// and P_(i+1)'s part high (CheckLow, CheckHigh) at dimension d.
func CheckDelta[E additive.Elem](low, high []E, d int) bool {
	md := CheckRounds * d
	uy, vy := low[md:md+d], high[md:md+d]
	e1, e2 := low[md+d:], high[md+d:]
	ok := true
	for t := range CheckRounds {
		uv := dot(low[t*d:(t+1)*d], vy) + dot(uy, high[t*d:(t+1)*d])
		if e1[t]+e2[t]-uv != 0 {
			ok = false
		}
	}
	return ok
}
