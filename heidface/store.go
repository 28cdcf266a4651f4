package heidface

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/idface/idface/internal/codec/store"
)

// Groups stores an HE local server's encrypted column groups, one file per
// group (the scheme's checksummed format, bound to the cluster, the
// server, the mode, the public key, the generation and the group index),
// each replaced atomically.
type Groups struct {
	dir string
	p   Scheme
}

// OpenGroups uses (creating) dir for the group files.
func OpenGroups(dir string, p Scheme) (*Groups, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &Groups{dir: dir, p: p}, nil
}

// Name is group i's file.
func (g *Groups) Name(i int) string { return filepath.Join(g.dir, fmt.Sprintf("g%06d.ct", i)) }

// Files lists the group files that exist.
func (g *Groups) Files() ([]string, error) {
	return filepath.Glob(filepath.Join(g.dir, "g*.ct"))
}

// Load reads group i, which must be bound to want and to index i; a group
// never written is (nil, zero header, nil). A file bound otherwise is
// refused before its ciphertexts are read.
func (g *Groups) Load(i int, want Binding) (EncGroup, GroupHeader, error) {
	path := g.Name(i)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, GroupHeader{}, nil
	}
	if err != nil {
		return nil, GroupHeader{}, err
	}
	defer f.Close()
	h, grp, err := g.p.ReadGroup(f, func(h GroupHeader) error { return CheckGroupHeader(path, h, i, want) })
	if err != nil {
		if _, ok := err.(*store.FileBindingError); ok {
			return nil, h, err
		}
		return nil, h, fmt.Errorf("%s: %w", path, err)
	}
	return grp, h, nil
}

// CheckGroupHeader refuses a group file (path) whose header is not bound
// to want and index i, saying what differs and what to do.
func CheckGroupHeader(path string, h GroupHeader, i int, want Binding) error {
	var what []string
	if h.Index != i {
		what = append(what, fmt.Sprintf("group %d, not %d", h.Index, i))
	}
	if m := h.Binding.Mismatch(want); m != "" {
		what = append(what, m)
	}
	if len(what) == 0 {
		return nil
	}
	return &store.FileBindingError{File: path, Msg: fmt.Sprintf("this group file is bound to %s (%s); this server expects %s, group %d. "+
		"It was swapped with another group file, copied from another server or cluster, or written under another public key or generation, "+
		"and would answer with the wrong rows. Put this server's own file back (from its backup); 'idface fsck' shows what every group file is bound to",
		h.Binding, strings.Join(what, "; "), want, i)}
}

// Save replaces group i's file durably.
func (g *Groups) Save(i int, h GroupHeader, grp EncGroup) error {
	return store.WriteFileFunc(g.Name(i), 0o600, func(f *os.File) error { return g.p.WriteGroup(f, h, grp) })
}

// KeyFile holds one key in heidface's checksummed key-file format, bound
// to a cluster and its key server.
type KeyFile struct {
	Path string
	Bind KeyBinding
}

func (k KeyFile) String() string { return k.Path }

// Load returns the key's binary form; os.ErrNotExist if there is none. A
// file bound to another cluster or key server is refused.
func (k KeyFile) Load(kind KeyKind) ([]byte, error) {
	b, err := os.ReadFile(k.Path)
	if err != nil {
		return nil, err
	}
	key, bind, err := ParseKeyFile(b, kind)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Path, err)
	}
	if bind != k.Bind {
		return nil, &store.FileBindingError{File: k.Path, Msg: fmt.Sprintf("this key file belongs to %s, not to this cluster's (%s): it was copied from another cluster or key server. "+
			"Put this server's own key file back (from its backup)", bind, k.Bind)}
	}
	return key, nil
}

// Fingerprint loads the public key and returns its fingerprint
// (Fingerprint), what an HE local server's files are bound to.
func (k KeyFile) Fingerprint() ([32]byte, error) {
	pk, err := k.Load(PublicKeyFile)
	if err != nil {
		return [32]byte{}, err
	}
	return Fingerprint(pk), nil
}

// Save writes the key durably, readable by the owner only if secret.
func (k KeyFile) Save(kind KeyKind, key []byte) error {
	perm := os.FileMode(0o644)
	if kind == SecretKeyFile {
		perm = 0o600
	}
	return store.WriteFile(k.Path, MarshalKeyFile(kind, k.Bind, key), perm)
}

// KeyPair is the key server's key pair in the scheme's binary forms.
type KeyPair struct {
	Secret []byte // never leaves the key server
	Public []byte // as sent to local servers
}

// LoadKeyPair reads the key server's key pair from dir. Keys are generated
// only on first setup, when dir holds neither key file: a missing or
// damaged key is never replaced, because a new key cannot decrypt the
// databases encrypted under the old one (the key server would answer
// with random rows).
func LoadKeyPair(dir string, p Scheme, bind KeyBinding, log *slog.Logger) (*KeyPair, error) {
	return loadKeyPair(dir, p, bind, log, true)
}

// VerifyKeyPair reads and checks the key server's key pair in dir, never
// creating one (fsck).
func VerifyKeyPair(dir string, p Scheme, bind KeyBinding, log *slog.Logger) (*KeyPair, error) {
	return loadKeyPair(dir, p, bind, log, false)
}

func loadKeyPair(dir string, p Scheme, bind KeyBinding, log *slog.Logger, create bool) (*KeyPair, error) {
	skf, pkf := KeyFile{filepath.Join(dir, "secret.key"), bind}, KeyFile{filepath.Join(dir, "public.key"), bind}
	skb, skErr := skf.Load(SecretKeyFile)
	pkb, pkErr := pkf.Load(PublicKeyFile)
	if create && errors.Is(skErr, os.ErrNotExist) && errors.Is(pkErr, os.ErrNotExist) {
		skb, pkb, err := p.GenKeys()
		if err != nil {
			return nil, err
		}
		if err := skf.Save(SecretKeyFile, skb); err != nil {
			return nil, err
		}
		if err := pkf.Save(PublicKeyFile, pkb); err != nil {
			return nil, err
		}
		log.Info("first start: new key pair generated", p.Describe()...)
		return &KeyPair{Secret: skb, Public: pkb}, nil
	}
	refuse := func(what string, err error) error {
		return fmt.Errorf("key server: %s: %w. It will not generate a new key pair, which could not decrypt the local servers' databases: restore %s and public.key from your backup. To start a new cluster instead, remove both key files and every local server's data", what, err, filepath.Join(dir, "secret.key"))
	}
	if skErr != nil {
		return nil, refuse("the secret key cannot be read", skErr)
	}
	if pkErr != nil {
		return nil, refuse("the public key cannot be read", pkErr)
	}
	if err := p.CheckPublicKey(pkb); err != nil {
		return nil, refuse(fmt.Sprintf("the public key is damaged or not a %s key", p.Name()), err)
	}
	if err := p.CheckKeyPair(skb, pkb); err != nil {
		return nil, refuse(fmt.Sprintf("the secret key is damaged, not a %s key, or not the public key's", p.Name()), err)
	}
	fp := Fingerprint(pkb)
	log.Info("key pair loaded", "public_key", fmt.Sprintf("%x", fp[:8]))
	return &KeyPair{Secret: skb, Public: pkb}, nil
}
