// Package home is a server's or a client's home directory: its private key
// (mode 0600, never leaves the host), its certificate, its public
// descriptor NAME.pub.json (the only file meant to leave the host: name,
// role, advertised address, certificate, pin), and, for servers, its data.
// A cluster configuration is assembled from public descriptors only, so no
// command ever needs two parties' private keys in one place.
package home

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/seal"
	"github.com/idface/idface/internal/store"
	"github.com/idface/idface/network/quicnet"
)

// File names inside a home.
const (
	keyFile  = "identity.key"
	sealFile = "seal.key" // a server's key for sealed enrollment (internal/seal)
	certFile = "identity.crt"
	selfFile = "home.json"
	lockFile = "lock" // held by the process that serves or repairs the home
	dataDir  = "data"
)

// Home is an open home directory.
type Home struct {
	Dir string
	// Self is this member's public descriptor.
	Self config.Descriptor
	// Listen is where a server binds (its advertised address by default).
	Listen string
}

// self is home.json: the descriptor and the listen address.
type self struct {
	config.Descriptor
	Listen string `json:"listen,omitempty"`
}

// Init creates a home for a new member: a fresh key and self-signed
// certificate, home.json and NAME.pub.json. Servers give listen (host:port)
// and may advertise another address (behind NAT or a relay); clients give
// neither. An existing home is refused unless force.
func Init(dir, name, role, listen, advertise string, force bool) (*Home, error) {
	if err := config.CheckName(name); err != nil {
		return nil, err
	}
	server := config.ServerRole(role)
	if !server && !config.ClientRoleValid(role) {
		return nil, fmt.Errorf("role %q: want one of %s", role, config.RoleList())
	}
	if server && listen == "" {
		return nil, fmt.Errorf("a %s needs --listen HOST:PORT", role)
	}
	if !server && (listen != "" || advertise != "") {
		return nil, fmt.Errorf("a %s does not listen: drop --listen and --advertise", role)
	}
	if advertise == "" {
		advertise = listen
	}
	for _, a := range []string{listen, advertise} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("address %q: %w", a, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, selfFile)); err == nil && !force {
		return nil, fmt.Errorf("%s already holds the home of a member (use --force to replace its key)", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	h := &Home{Dir: dir, Listen: listen, Self: config.Descriptor{Name: name, Role: role, Addr: advertise}}
	if server {
		if err := h.newSealKey(); err != nil {
			return nil, err
		}
	}
	if err := h.newIdentity(); err != nil {
		return nil, err
	}
	return h, nil
}

// newIdentity writes a fresh key and certificate and the descriptors.
func (h *Home) newIdentity() error {
	id, err := quicnet.GenerateIdentity(h.Self.Name)
	if err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(h.Dir, keyFile), id.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(h.Dir, certFile), id.CertPEM, 0o644); err != nil {
		return err
	}
	h.Self.Cert, h.Self.Pin = string(id.CertPEM), id.Pin
	return h.writeSelf()
}

// SetMetrics records the server's loopback /metrics address in home.json
// and NAME.pub.json ("" for none), to be assembled into the config.
func (h *Home) SetMetrics(addr string) error {
	if addr != "" && !config.ServerRole(h.Self.Role) {
		return fmt.Errorf("%s is a %s: only servers serve metrics", h.Self.Name, h.Self.Role)
	}
	if addr != "" {
		if err := config.CheckLoopback(addr); err != nil {
			return fmt.Errorf("metrics address: %w (a public address is named on the server's command line: idface serve --metrics-addr)", err)
		}
	}
	h.Self.Metrics = addr
	return h.writeSelf()
}

// writeSelf writes home.json and the public descriptor.
func (h *Home) writeSelf() error {
	b, err := json.MarshalIndent(self{h.Self, h.Listen}, "", "  ")
	if err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(h.Dir, selfFile), append(b, '\n'), 0o600); err != nil {
		return err
	}
	pub, err := json.MarshalIndent(h.Self, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFile(h.PubPath(), append(pub, '\n'), 0o644)
}

// Open reads a home.
func Open(dir string) (*Home, error) {
	b, err := os.ReadFile(filepath.Join(dir, selfFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a home: create it with 'idface party init' or 'idface client init'", dir)
		}
		return nil, err
	}
	var s self
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, selfFile), err)
	}
	return &Home{Dir: dir, Self: s.Descriptor, Listen: s.Listen}, nil
}

// PubPath is the public descriptor to hand out.
func (h *Home) PubPath() string { return filepath.Join(h.Dir, h.Self.Name+".pub.json") }

// DataDir is where a server keeps its data.
func (h *Home) DataDir() string { return filepath.Join(h.Dir, dataDir) }

// Certificate loads the key pair and checks it is the one the descriptor
// names.
func (h *Home) Certificate() (tls.Certificate, error) {
	cert, pin, err := quicnet.LoadCertificate(filepath.Join(h.Dir, certFile), filepath.Join(h.Dir, keyFile))
	if err != nil {
		return tls.Certificate{}, err
	}
	if pin != h.Self.Pin {
		return tls.Certificate{}, fmt.Errorf("%s: the key pair does not match its descriptor (pin %s)", h.Dir, h.Self.Pin)
	}
	return cert, nil
}

// Check confirms the configuration lists this member with this home's
// certificate.
func (h *Home) Check(p *config.Params) (config.Member, error) {
	m, ok := p.Member(h.Self.Name)
	if !ok {
		return m, fmt.Errorf("the cluster config (serial %d) does not list %s: assemble a config that includes %s", p.Serial(), h.Self.Name, h.PubPath())
	}
	if m.Pin != h.Self.Pin {
		return m, fmt.Errorf("the cluster config (serial %d) pins another certificate for %s than the one in %s (was its key rotated?): assemble the config again from the new %s", p.Serial(), h.Self.Name, h.Dir, filepath.Base(h.PubPath()))
	}
	return m, nil
}

// Rotate replaces the member's key and certificate (the address stays);
// the previous key is kept as identity.key.previous until the new config
// runs everywhere. A server's seal key stays; a server made before sealed
// enrollment gets one. It writes a new descriptor to hand out.
func (h *Home) Rotate() error {
	old := filepath.Join(h.Dir, keyFile)
	b, err := os.ReadFile(old)
	if err != nil {
		return err
	}
	if err := store.WriteFile(old+".previous", b, 0o600); err != nil {
		return err
	}
	if config.ServerRole(h.Self.Role) && h.Self.Seal == "" {
		if err := h.newSealKey(); err != nil {
			return err
		}
	}
	return h.newIdentity()
}

// newSealKey writes a fresh seal key (mode 0600) and puts its public half
// in the descriptor.
func (h *Home) newSealKey() error {
	k, err := seal.GenerateKey(nil)
	if err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(h.Dir, sealFile), seal.MarshalKey(k), 0o600); err != nil {
		return err
	}
	h.Self.Seal = k.Public().String()
	return nil
}

// SealKey loads the server's seal key and checks it is the one its
// descriptor publishes. The file must be private to its owner.
func (h *Home) SealKey() (*seal.PrivateKey, error) {
	path := filepath.Join(h.Dir, sealFile)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s has no seal key (%s; the home predates sealed enrollment): run 'idface party rotate --home %s', which adds one, and assemble the configuration again", h.Dir, sealFile, h.Dir)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): 'chmod 600 %s'; if others did read it, make a new key with 'idface party rotate'", path, fi.Mode().Perm(), path)
	}
	if fi.Size() > seal.MaxKeyFile {
		return nil, fmt.Errorf("%s: %d bytes, a seal key file has at most %d: it is damaged or not a seal key", path, fi.Size(), seal.MaxKeyFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, seal.MaxKeyFile+1))
	if err != nil {
		return nil, err
	}
	k, err := seal.ParseKey(path, b)
	if err != nil {
		return nil, err
	}
	if k.Public().String() != h.Self.Seal {
		return nil, fmt.Errorf("%s is not the key that %s publishes: restore the matching %s, or assemble the configuration from a descriptor made with this key ('idface party rotate')", path, filepath.Base(h.PubPath()), sealFile)
	}
	return k, nil
}

// ReadDescriptor reads a public descriptor, refusing anything that holds a
// private key or fields a descriptor does not have.
func ReadDescriptor(path string) (config.Descriptor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return config.Descriptor{}, err
	}
	if bytes.Contains(b, []byte("PRIVATE KEY")) {
		return config.Descriptor{}, fmt.Errorf("%s holds a private key: only public descriptors (NAME.pub.json) may leave a member's host", path)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d config.Descriptor
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("%s is not a public descriptor: %w", path, err)
	}
	if err := d.Check(); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
