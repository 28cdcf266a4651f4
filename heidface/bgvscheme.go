package heidface

import (
	"fmt"
	"io"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	"github.com/idface/idface/template"
)

// *Params is the BGV Scheme. Its methods below adapt the Lattigo types
// (Group, Local, Key) to the scheme-neutral interfaces.

// Name is "bgv".
func (p *BGVScheme) Name() string { return "bgv" }

// Encoder is the base-p packing of a coefficient.
func (p *BGVScheme) Encoder() template.Encoder { return p.Enc }

// GenKeys draws a key pair with Lattigo's own sampler (a CSPRNG keyed from
// crypto/rand; Lattigo takes no other source).
func (p *BGVScheme) GenKeys() (sk, pk []byte, err error) {
	s, k := GenKeys(p)
	if sk, err = s.MarshalBinary(); err != nil {
		return nil, nil, err
	}
	if pk, err = k.MarshalBinary(); err != nil {
		return nil, nil, err
	}
	return sk, pk, nil
}

// CheckPublicKey parses a public key for these parameters.
func (p *BGVScheme) CheckPublicKey(pk []byte) error {
	_, err := UnmarshalPublicKey(p, pk)
	return err
}

// CheckKeyPair verifies that sk decrypts what pk encrypts.
func (p *BGVScheme) CheckKeyPair(skb, pkb []byte) error {
	sk, err := UnmarshalSecretKey(p, skb)
	if err != nil {
		return err
	}
	pk, err := UnmarshalPublicKey(p, pkb)
	if err != nil {
		return err
	}
	return CheckKeyPair(p, sk, pk)
}

// NewEncryptor returns the local server's context for pk.
func (p *BGVScheme) NewEncryptor(pkb []byte) (Encryptor, error) {
	pk, err := UnmarshalPublicKey(p, pkb)
	if err != nil {
		return nil, err
	}
	return newBGVEncryptor(NewBGVLocal(p, pk)), nil
}

// NewDecryptor returns the key server's context for sk.
func (p *BGVScheme) NewDecryptor(skb, _ []byte) (Decryptor, error) {
	sk, err := UnmarshalSecretKey(p, skb)
	if err != nil {
		return nil, err
	}
	return &bgvDecryptor{key: NewKey(p, sk)}, nil
}

// Describe names the parameters for a log line.
func (p *BGVScheme) Describe() []any {
	return []any{"scheme", "bgv", "logN", LogN, "logQ", p.LogQ(), "t_bits", p.SlotBits + 1, "m", p.Enc.M}
}

// WriteGroup writes a BGV group.
func (p *BGVScheme) WriteGroup(w io.Writer, h GroupHeader, g EncGroup) error {
	bg, ok := g.(*Group)
	if !ok {
		return fmt.Errorf("heidface: %T is not a BGV group", g)
	}
	return WriteGroup(w, p, h, bg)
}

// ReadGroup reads a BGV group.
func (p *BGVScheme) ReadGroup(r io.Reader, check CheckHeader) (GroupHeader, EncGroup, error) {
	h, g, err := ReadGroup(r, p, check)
	if err != nil {
		return h, nil, err
	}
	return h, g, nil
}

// bgvEncryptor keeps its two output ciphertexts between queries.
type bgvEncryptor struct {
	l      *BGVLocal
	cp, cm []*rlwe.Ciphertext // IPDB's scratch, one pair per query of a batch
}

func newBGVEncryptor(l *BGVLocal) *bgvEncryptor {
	p := l.P
	return &bgvEncryptor{l: l, cp: []*rlwe.Ciphertext{rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())}, cm: []*rlwe.Ciphertext{rlwe.NewCiphertext(p.BGV, 1, p.BGV.MaxLevel())}}
}

func (e *bgvEncryptor) Copy() Encryptor {
	return newBGVEncryptor(&BGVLocal{P: e.l.P, enc: e.l.enc.ShallowCopy(), ecd: e.l.ecd.ShallowCopy()})
}

func (e *bgvEncryptor) Delta(slots []int, zs []template.Ternary) (EncGroup, error) {
	g, err := e.l.Delta(slots, zs)
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (e *bgvEncryptor) IPDB(g EncGroup, y template.Ternary, out []byte) error {
	return e.IPDBBatch(g, []template.Ternary{y}, [][]byte{out})
}

func (e *bgvEncryptor) IPDBBatch(g EncGroup, ys []template.Ternary, outs [][]byte) error {
	ctb := e.l.P.CiphertextBytes()
	if len(outs) != len(ys) {
		return fmt.Errorf("heidface: %d outputs for %d queries", len(outs), len(ys))
	}
	for _, out := range outs {
		if len(out) != 2*ctb {
			return fmt.Errorf("heidface: output of %d bytes, want %d", len(out), 2*ctb)
		}
	}
	for len(e.cp) < len(ys) { // scratch ciphertexts, kept for the next call
		e.cp = append(e.cp, rlwe.NewCiphertext(e.l.P.BGV, 1, e.l.P.BGV.MaxLevel()))
		e.cm = append(e.cm, rlwe.NewCiphertext(e.l.P.BGV, 1, e.l.P.BGV.MaxLevel()))
	}
	cp, cm := e.cp[:len(ys)], e.cm[:len(ys)]
	if g == nil {
		for i := range ys {
			if err := e.l.enc.EncryptZero(cp[i]); err != nil {
				return err
			}
			if err := e.l.enc.EncryptZero(cm[i]); err != nil {
				return err
			}
		}
	} else {
		bg, ok := g.(*Group)
		if !ok {
			return fmt.Errorf("heidface: %T is not a BGV group", g)
		}
		if err := e.l.IPDBBatch(bg, ys, cp, cm); err != nil {
			return err
		}
	}
	for q, out := range outs {
		for i, ct := range []*rlwe.Ciphertext{cp[q], cm[q]} {
			w := sliceWriter{b: out[i*ctb : i*ctb : (i+1)*ctb]}
			if _, err := ct.WriteTo(&w); err != nil {
				return err
			}
			if len(w.b) != ctb {
				return fmt.Errorf("heidface: ciphertext of %d bytes, want %d", len(w.b), ctb)
			}
		}
	}
	return nil
}

// Add adds a BGV delta into g.
func (g *Group) Add(delta EncGroup) error {
	d, ok := delta.(*Group)
	if !ok || len(d.Plus) != len(g.Plus) {
		return fmt.Errorf("heidface: adding a %T to a BGV group", delta)
	}
	g.add(d)
	return nil
}

type bgvDecryptor struct{ key *Key }

func (d *bgvDecryptor) Copy() Decryptor { return &bgvDecryptor{key: d.key.ShallowCopy()} }

func (d *bgvDecryptor) Scores(pair []byte, scores []int) error {
	p := d.key.P
	ctb := p.CiphertextBytes()
	if len(pair) != 2*ctb {
		return fmt.Errorf("heidface: %d bytes of ciphertexts, want %d", len(pair), 2*ctb)
	}
	cp, err := p.UnmarshalCiphertext(pair[:ctb])
	if err != nil {
		return err
	}
	cm, err := p.UnmarshalCiphertext(pair[ctb:])
	if err != nil {
		return err
	}
	return d.key.Scores(cp, cm, scores)
}

// sliceWriter appends into a slice of fixed capacity: it serialises a
// ciphertext straight into the output buffer. It is a Lattigo
// buffer.Writer (bufio's AvailableBuffer/Available/Flush), so that WriteTo
// does not wrap it in a bufio.Writer of its own for every ciphertext.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > cap(w.b) {
		return 0, fmt.Errorf("heidface: ciphertext larger than %d bytes", cap(w.b))
	}
	w.b = append(w.b, p...) // p may be AvailableBuffer's tail of w.b: copied onto itself
	return len(p), nil
}

func (w *sliceWriter) Flush() error            { return nil }
func (w *sliceWriter) Available() int          { return cap(w.b) - len(w.b) }
func (w *sliceWriter) AvailableBuffer() []byte { return w.b[len(w.b):len(w.b)] }
