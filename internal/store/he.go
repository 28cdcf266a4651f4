package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/idface/idface/heidface"
)

// Groups stores an HE local server's encrypted column groups, one file per
// group (the scheme's checksummed format), each replaced atomically.
type Groups struct {
	dir string
	p   heidface.Scheme
}

// OpenGroups uses (creating) dir for the group files.
func OpenGroups(dir string, p heidface.Scheme) (*Groups, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &Groups{dir: dir, p: p}, nil
}

func (g *Groups) path(i int) string { return filepath.Join(g.dir, fmt.Sprintf("g%06d.ct", i)) }

// Files lists the group files that exist.
func (g *Groups) Files() ([]string, error) {
	return filepath.Glob(filepath.Join(g.dir, "g*.ct"))
}

// Load reads group i; a group never written is (nil, nil).
func (g *Groups) Load(i int) (heidface.EncGroup, error) {
	f, err := os.Open(g.path(i))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	grp, err := g.p.ReadGroup(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.path(i), err)
	}
	return grp, nil
}

// Save replaces group i's file durably.
func (g *Groups) Save(i int, grp heidface.EncGroup) error {
	return WriteFileFunc(g.path(i), 0o600, func(f *os.File) error { return g.p.WriteGroup(f, grp) })
}

// KeyFile holds one key in heidface's checksummed key-file format.
type KeyFile string

func (k KeyFile) String() string { return string(k) }

// Load returns the key's binary form; os.ErrNotExist if there is none.
func (k KeyFile) Load(kind heidface.KeyKind) ([]byte, error) {
	b, err := os.ReadFile(string(k))
	if err != nil {
		return nil, err
	}
	key, err := heidface.ParseKeyFile(b, kind)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	return key, nil
}

// Save writes the key durably, readable by the owner only if secret.
func (k KeyFile) Save(kind heidface.KeyKind, key []byte) error {
	perm := os.FileMode(0o644)
	if kind == heidface.SecretKeyFile {
		perm = 0o600
	}
	return WriteFile(string(k), heidface.MarshalKeyFile(kind, key), perm)
}

// HEKey is the key server's key pair in the scheme's binary forms.
type HEKey struct {
	Secret []byte // never leaves the key server
	Public []byte // as sent to local servers
}

// LoadHEKey reads the key server's key pair from dir. Keys are generated
// only on first setup, when dir holds neither key file: a missing or
// damaged key is never replaced, because a new key cannot decrypt the
// databases encrypted under the old one (the key server would answer
// with random rows).
func LoadHEKey(dir string, p heidface.Scheme, log *slog.Logger) (*HEKey, error) {
	return loadHEKey(dir, p, log, true)
}

// CheckHEKey reads and checks the key server's key pair in dir, never
// creating one (fsck).
func CheckHEKey(dir string, p heidface.Scheme, log *slog.Logger) (*HEKey, error) {
	return loadHEKey(dir, p, log, false)
}

func loadHEKey(dir string, p heidface.Scheme, log *slog.Logger, create bool) (*HEKey, error) {
	skf, pkf := KeyFile(filepath.Join(dir, "secret.key")), KeyFile(filepath.Join(dir, "public.key"))
	skb, skErr := skf.Load(heidface.SecretKeyFile)
	pkb, pkErr := pkf.Load(heidface.PublicKeyFile)
	if create && errors.Is(skErr, os.ErrNotExist) && errors.Is(pkErr, os.ErrNotExist) {
		skb, pkb, err := p.GenKeys(rand.Reader)
		if err != nil {
			return nil, err
		}
		if err := skf.Save(heidface.SecretKeyFile, skb); err != nil {
			return nil, err
		}
		if err := pkf.Save(heidface.PublicKeyFile, pkb); err != nil {
			return nil, err
		}
		log.Info("first start: new key pair generated", p.Describe()...)
		return &HEKey{Secret: skb, Public: pkb}, nil
	}
	refuse := func(what string, err error) error {
		return fmt.Errorf("key server: %s: %v. It will not generate a new key pair, which could not decrypt the local servers' databases: restore %s and public.key from your backup. To start a new cluster instead, remove both key files and every local server's data", what, err, filepath.Join(dir, "secret.key"))
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
	fp := heidface.Fingerprint(pkb)
	log.Info("key pair loaded", "public_key", fmt.Sprintf("%x", fp[:8]))
	return &HEKey{Secret: skb, Public: pkb}, nil
}
