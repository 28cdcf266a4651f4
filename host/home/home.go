// Package home is a server's or a client's home directory: its private key
// (mode 0600, never leaves the host), its certificate, its public
// descriptor NAME.pub.json (the only file meant to leave the host: name,
// role, advertised address, certificate, pin), and, for servers, its data.
// A cluster configuration is assembled from public descriptors only, so no
// command ever needs two parties' private keys in one place.
package home

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network/quicnet"
)

// File names inside a home.
const (
	keyFile  = "identity.key"
	sealFile = "seal.key" // a server's key for sealed enrollment (internal/codec/seal)
	certFile = "identity.crt"
	selfFile = "home.json"
	lockFile = "lock" // in the data directory (and the home): held by the process that serves or repairs the data
	dataDir  = "data"
)

// Home is an open home directory.
type Home struct {
	Dir string
	// Self is this member's public descriptor.
	Self config.Descriptor
	// Listen is where a server binds (its advertised address by default).
	Listen string
	// Data, when set, is where a server keeps its data instead of
	// Dir/data (a home installed from a Kubernetes Secret is read-only
	// and its data live on a volume: docs/DEPLOY.md).
	Data string
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

// SetShards records the addresses of a sharded server's shards (shard 0
// first) in home.json and NAME.pub.json, to be assembled into the config.
func (h *Home) SetShards(addrs []string) error {
	if !config.ServerRole(h.Self.Role) {
		return fmt.Errorf("%s is a %s: only servers have shards", h.Self.Name, h.Self.Role)
	}
	if len(addrs) > config.MaxShards {
		return fmt.Errorf("%d shard addresses: at most %d", len(addrs), config.MaxShards)
	}
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("shard address %q: %w", a, err)
		}
	}
	h.Self.Shards = addrs
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
			// Its identity exists nowhere else: a new one would be another
			// member, which the cluster's configuration does not pin.
			return nil, fmt.Errorf("%s is not a home (it has no %s): restore the backup of this member's home there (home.json, identity.key, identity.crt and, for a server, seal.key: docs/DEPLOY.md, 'Backing up and restoring a server'), or check the path given", dir, selfFile)
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

// DataDir is where a server keeps its data: Data, or Dir/data.
func (h *Home) DataDir() string {
	if h.Data != "" {
		return h.Data
	}
	return filepath.Join(h.Dir, dataDir)
}

// UseShard makes the data directory that of shard s of a sharded member
// (DATA/shard-S) or of its coordinator (s < 0: DATA/coordinator, which
// holds only its lock): each server of the member has its own data and
// lock.
func (h *Home) UseShard(s int) {
	sub := "coordinator"
	if s >= 0 {
		sub = fmt.Sprintf("shard-%d", s)
	}
	h.Data = filepath.Join(h.DataDir(), sub)
}

// homeFiles are the files a home may hold besides its data: what Install
// copies. NAME.pub.json is added by name.
var homeFiles = []string{selfFile, keyFile, certFile, sealFile, keyFile + ".previous", nextKeyFile, nextCertFile, config.ShardKeyFile}

// Files are the files of the home in dir that 'idface party install'
// copies (a Kubernetes Secret of the member: 'idface deploy k8s'), by
// name: its keys, certificate and descriptors, never its data or lock.
func Files(dir string) (map[string][]byte, error) {
	h, err := Open(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, name := range append(slices.Clone(homeFiles), filepath.Base(h.PubPath())) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// Install copies the home in from (for instance a Kubernetes Secret
// mounted read-only, whose files are group-readable) into dir, each file
// private to this user (mode 0600, dir 0700), after checking that its key
// pair is the one its descriptor names. Files of the same names in dir are
// replaced; anything else in from is left alone. The data are not part of
// a home's files: a server started on dir keeps them where --data says.
func Install(from, dir string) (*Home, error) {
	src, err := Open(from)
	if err != nil {
		return nil, err
	}
	if _, err := src.Certificate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil { // an emptyDir is made 0777
		return nil, err
	}
	files, err := Files(from)
	if err != nil {
		return nil, err
	}
	for name, b := range files {
		if err := store.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	h, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if config.ServerRole(h.Self.Role) {
		if _, err := h.SealKey(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Certificate loads the key pair and checks it is the one the descriptor
// names.
//
// While 'party rotate --finish' replaces the key and then the certificate
// (two files, one after the other), a reader may find the new key beside
// the old certificate: it then takes the staged pair or the previous key,
// whichever pair the descriptor (its pin or its next pin) names.
//
// A Finish that runs between two of those reads can leave none of the
// pairs readable as it was (the new key beside the old certificate, then
// the staged files gone, then the new certificate beside the previous
// key): the whole search runs again, a few times, a moment apart, before
// it fails (CI saw it once in TestRotateWithGrace).
func (h *Home) Certificate() (tls.Certificate, error) {
	var first error
	for round := range 5 {
		if round > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		first = nil
		for _, f := range [][2]string{{certFile, keyFile}, {nextCertFile, nextKeyFile}, {certFile, keyFile + ".previous"}} {
			cert, pin, err := quicnet.LoadCertificate(filepath.Join(h.Dir, f[0]), filepath.Join(h.Dir, f[1]))
			switch {
			case err == nil && (pin == h.Self.Pin || h.Self.Next != nil && pin == h.Self.Next.Pin):
				return cert, nil
			case first != nil:
			case err != nil:
				first = err
			default:
				first = fmt.Errorf("%s: the key pair does not match its descriptor (pin %s)", h.Dir, h.Self.Pin)
			}
		}
	}
	return tls.Certificate{}, first
}

// Check confirms the configuration lists this member with this home's
// certificate.
func (h *Home) Check(p *config.Params) (config.Member, error) {
	m, ok := p.Member(h.Self.Name)
	if !ok {
		return m, fmt.Errorf("the cluster config (serial %d) does not list %s: assemble a config that includes %s", p.Serial(), h.Self.Name, h.PubPath())
	}
	if !slices.Contains(m.Pins(), h.Self.Pin) { // its pin, or the next one during a rotation
		return m, fmt.Errorf("the cluster config (serial %d) pins another certificate for %s than the one in %s (was its key rotated?): assemble the config again from the new %s", p.Serial(), h.Self.Name, h.Dir, filepath.Base(h.PubPath()))
	}
	return m, nil
}

// Rotate replaces the member's key and certificate (the address stays);
// the previous key is kept as identity.key.previous until the new config
// runs everywhere. A server's seal key stays; a server made before sealed
// enrollment gets one. It writes a new descriptor to hand out.
func (h *Home) Rotate() error {
	if h.Self.Next != nil {
		return fmt.Errorf("%s: a rotation is staged (next pin %s): finish it ('idface party rotate --finish') instead", h.Dir, h.Self.Next.Pin)
	}
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

// Key rotation with a grace period (docs/DEPLOY.md, "Rotating a key"):
// Stage makes the next key beside the current one and names its
// certificate in the descriptor's "next"; a configuration assembled from
// that descriptor makes every server accept either; Finish makes the next
// key the member's; a configuration assembled from the finished
// descriptor drops the old one. The member presents its current key
// until Finish, so no identification fails on the way.
const (
	nextKeyFile  = "identity.next.key"
	nextCertFile = "identity.next.crt"
)

// Stage begins a rotation: a new key and certificate beside the current
// ones, named in the descriptor's "next".
func (h *Home) Stage() error {
	if h.Self.Next != nil {
		return fmt.Errorf("%s: a rotation is staged already (next pin %s): finish it ('idface party rotate --finish --home %s')", h.Dir, h.Self.Next.Pin, h.Dir)
	}
	id, err := quicnet.GenerateIdentity(h.Self.Name)
	if err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(h.Dir, nextKeyFile), id.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := store.WriteFile(filepath.Join(h.Dir, nextCertFile), id.CertPEM, 0o644); err != nil {
		return err
	}
	h.Self.Next = &config.NextKey{Cert: string(id.CertPEM), Pin: id.Pin}
	return h.writeSelf()
}

// Finish ends a staged rotation: the next key becomes the member's (the
// current one is kept as identity.key.previous) and the descriptor names
// only its certificate.
func (h *Home) Finish() error {
	if h.Self.Next == nil {
		return fmt.Errorf("%s: no rotation is staged: 'idface party rotate --stage' begins one", h.Dir)
	}
	_, pin, err := quicnet.LoadCertificate(filepath.Join(h.Dir, nextCertFile), filepath.Join(h.Dir, nextKeyFile))
	if err != nil {
		return fmt.Errorf("%s: the staged key: %w", h.Dir, err)
	}
	if pin != h.Self.Next.Pin {
		return fmt.Errorf("%s: the staged key pair does not match the descriptor's next pin %s", h.Dir, h.Self.Next.Pin)
	}
	for _, f := range []struct{ from, to string }{{keyFile, keyFile + ".previous"}, {nextKeyFile, keyFile}, {nextCertFile, certFile}} {
		b, err := os.ReadFile(filepath.Join(h.Dir, f.from))
		if err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if f.to == certFile {
			mode = 0o644
		}
		if err := store.WriteFile(filepath.Join(h.Dir, f.to), b, mode); err != nil {
			return err
		}
	}
	h.Self.Cert, h.Self.Pin, h.Self.Next = h.Self.Next.Cert, h.Self.Next.Pin, nil
	if err := h.writeSelf(); err != nil {
		return err
	}
	os.Remove(filepath.Join(h.Dir, nextKeyFile))
	os.Remove(filepath.Join(h.Dir, nextCertFile))
	return nil
}

// PairKey is the private key a server derives the keys it shares with the
// other servers from (host/pairkey): the one whose certificate the
// configuration names for it (m.Cert), so that both sides of a pair derive
// the same key. That is its current key, or, after 'party rotate --finish'
// and before the configuration names the new certificate, its previous one.
func (h *Home) PairKey(m config.Member, current crypto.PrivateKey) (crypto.PrivateKey, error) {
	pub, err := certKey(m.Cert)
	if err != nil || samePublic(current, pub) {
		return current, nil // (a config without a parsable certificate: pairkey says why)
	}
	b, err := os.ReadFile(filepath.Join(h.Dir, keyFile+".previous"))
	if err != nil {
		return current, nil // no previous key: the pair keys will differ, and the peers say so
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: identity.key.previous is not PEM", h.Dir)
	}
	prev, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		if ec, err2 := x509.ParseECPrivateKey(blk.Bytes); err2 == nil {
			prev = ec
		} else {
			return nil, fmt.Errorf("%s: identity.key.previous: %w", h.Dir, err)
		}
	}
	if samePublic(prev, pub) {
		return prev, nil
	}
	return current, nil
}

func certKey(certPEM string) (crypto.PublicKey, error) {
	blk, _ := pem.Decode([]byte(certPEM))
	if blk == nil {
		return nil, fmt.Errorf("not PEM")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, err
	}
	return c.PublicKey, nil
}

func samePublic(priv crypto.PrivateKey, pub crypto.PublicKey) bool {
	s, ok := priv.(crypto.Signer)
	if !ok {
		return false
	}
	eq, ok := s.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(pub)
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
	b, err := readPrivate(path, seal.MaxKeyFile, "; if others did read it, make a new key with 'idface party rotate'")
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s has no seal key (%s; the home predates sealed enrollment): run 'idface party rotate --home %s', which adds one, and assemble the configuration again", h.Dir, sealFile, h.Dir)
	}
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

// ShardKey reads the home's shard key (config.ShardKeyFile: 64 hex
// digits), nil when the home has none. The file must be private to its
// owner.
func (h *Home) ShardKey() (*[32]byte, error) {
	return ReadShardKey(filepath.Join(h.Dir, config.ShardKeyFile))
}

// ReadShardKey reads a shard key file, nil when there is none.
func ReadShardKey(path string) (*[32]byte, error) {
	b, err := readPrivate(path, 130, "")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	var key [32]byte
	if len(b) != 2*len(key) {
		return nil, fmt.Errorf("%s is not a shard key (64 hex digits; it holds %d bytes): it is damaged; copy the cluster's key again", path, len(b))
	}
	if _, err := hex.Decode(key[:], b); err != nil {
		return nil, fmt.Errorf("%s is not a shard key (64 hex digits): %v; copy the cluster's key again", path, err)
	}
	return &key, nil
}

// readPrivate reads a key file that must be private to its owner and at
// most max bytes (a larger one is refused, not cut); hint follows the
// refusal of a file others may read.
func readPrivate(path string, max int64, hint string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): 'chmod 600 %s'%s", path, fi.Mode().Perm(), path, hint)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, at most %d: it is damaged or not the key it should be", path, fi.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

// WriteShardKey writes a shard key file, private to its owner.
func WriteShardKey(path string, key *[32]byte) error {
	return store.WriteFile(path, []byte(hex.EncodeToString(key[:])+"\n"), 0o600)
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
