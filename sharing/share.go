package sharing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/idface/idface/template"
)

// Share is one party's XOR share of a ternary template: bitsets Plus and
// Minus of template.Words(d) words each. Unlike a template.Ternary the two
// bitsets of a share may overlap; only the XOR of all shares is ternary.
type Share struct {
	Plus, Minus []uint64
}

// NewShare returns a zero share for dimension d.
func NewShare(d int) Share {
	w := template.Words(d)
	buf := make([]uint64, 2*w)
	return Share{Plus: buf[:w:w], Minus: buf[w:]}
}

// Check verifies a share received from outside has the shape of dimension d:
// the word counts and no bits at or past d.
func (s Share) Check(d int) error {
	w := template.Words(d)
	if len(s.Plus) != w || len(s.Minus) != w {
		return fmt.Errorf("sharing: share has %d/%d words, want %d for d = %d", len(s.Plus), len(s.Minus), w, d)
	}
	if r := d & 63; r != 0 && (s.Plus[w-1]|s.Minus[w-1])>>uint(r) != 0 {
		return errors.New("sharing: share has bits set past the dimension")
	}
	return nil
}

// GenShare splits z into mu >= 2 XOR shares (paper Alg. "GenShare", with the
// typo fixed: z_mu- = z- XOR the other minus shares). Shares 0..mu-2 are read
// from rnd, which must be a cryptographically secure source: crypto/rand.Reader
// when rnd is nil, or a stream from NewStream for bulk enrollment.
func GenShare(z template.Ternary, mu int, rnd io.Reader) ([]Share, error) {
	out := make([]Share, mu)
	for i := range out {
		out[i] = NewShare(z.Dim)
	}
	return out, GenShareInto(out, z, rnd)
}

// GenShareInto is GenShare writing into caller-allocated shares (len = mu),
// so bulk enrollment does not allocate per template.
func GenShareInto(dst []Share, z template.Ternary, rnd io.Reader) error {
	if len(dst) < 2 {
		return fmt.Errorf("sharing: %d parties, want at least 2", len(dst))
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	w := len(z.Plus)
	if w > template.Words(template.MaxDim) || w != template.Words(z.Dim) {
		return fmt.Errorf("sharing: template has %d words for d = %d", w, z.Dim)
	}
	last := dst[len(dst)-1]
	if len(last.Plus) != w || len(last.Minus) != w {
		return fmt.Errorf("sharing: output shares have %d words, want %d", len(last.Plus), w)
	}
	copy(last.Plus, z.Plus)
	copy(last.Minus, z.Minus)
	mask := uint64(1)<<uint(z.Dim&63) - 1 // keep bits past d zero
	if z.Dim&63 == 0 {
		mask = ^uint64(0)
	}
	fast, _ := rnd.(*streamReader)
	var rb []byte
	if fast == nil {
		rb = make([]byte, 16*w)
	}
	for _, s := range dst[:len(dst)-1] {
		if len(s.Plus) != w || len(s.Minus) != w {
			return fmt.Errorf("sharing: output shares have %d words, want %d", len(s.Plus), w)
		}
		if fast != nil { // bulk path: keystream straight into the words
			fast.fillWords(s.Plus)
			fast.fillWords(s.Minus)
		} else {
			if _, err := io.ReadFull(rnd, rb); err != nil {
				return fmt.Errorf("sharing: reading randomness: %w", err)
			}
			for i := range w {
				s.Plus[i] = binary.LittleEndian.Uint64(rb[8*i:])
				s.Minus[i] = binary.LittleEndian.Uint64(rb[8*(w+i):])
			}
		}
		s.Plus[w-1] &= mask
		s.Minus[w-1] &= mask
		for i := range w {
			last.Plus[i] ^= s.Plus[i]
			last.Minus[i] ^= s.Minus[i]
		}
	}
	return nil
}

// Reconstruct XORs all shares of a template of dimension d and checks the
// result is a valid ternary vector (disjoint signs).
func Reconstruct(shares []Share, d int) (template.Ternary, error) {
	z := template.NewTernary(d)
	for i, s := range shares {
		if err := s.Check(d); err != nil {
			return template.Ternary{}, fmt.Errorf("share %d: %w", i, err)
		}
		for j := range s.Plus {
			z.Plus[j] ^= s.Plus[j]
			z.Minus[j] ^= s.Minus[j]
		}
	}
	return z, z.Validate(-1)
}

// NewStream returns a fast CSPRNG: AES-256 in counter mode keyed with 32
// bytes (and a 16-byte IV) from seed, crypto/rand.Reader when seed is nil.
// With AES-NI it yields several GB/s, so share generation is never limited
// by randomness. Not safe for concurrent use.
func NewStream(seed io.Reader) (io.Reader, error) {
	if seed == nil {
		seed = rand.Reader
	}
	var k [48]byte
	if _, err := io.ReadFull(seed, k[:]); err != nil {
		return nil, fmt.Errorf("sharing: seeding the share stream: %w", err)
	}
	block, err := aes.NewCipher(k[:32])
	if err != nil {
		return nil, err
	}
	return &streamReader{s: cipher.NewCTR(block, k[32:])}, nil
}

type streamReader struct{ s cipher.Stream }

func (r *streamReader) Read(p []byte) (int, error) {
	clear(p)
	r.s.XORKeyStream(p, p)
	return len(p), nil
}

// fillWords overwrites w with keystream. Uniform bytes make uniform words
// in any byte order, so viewing the words as bytes is safe everywhere.
func (r *streamReader) fillWords(w []uint64) {
	if len(w) == 0 {
		return
	}
	clear(w)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w))
	r.s.XORKeyStream(b, b)
}
