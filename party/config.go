package party

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idface/idface/template"
	"github.com/idface/idface/transport"
)

// ConfigFile is the cluster configuration's name inside a cluster directory.
const ConfigFile = "cluster.json"

// Member is a party or a client of the cluster: its name, its certificate
// pin, and the files of its identity (relative to the cluster directory).
// Parties also have a UDP address.
type Member struct {
	Name string `json:"name"`
	Addr string `json:"addr,omitempty"`
	// Metrics, when set, is the TCP address of the party's /metrics and
	// /debug/pprof endpoint (keep it on loopback).
	Metrics string `json:"metrics,omitempty"`
	Cert    string `json:"cert"`
	Key     string `json:"key"`
	Pin     string `json:"pin"`
}

// Config is the literal cluster configuration (cluster.json). Zero values
// take the documented defaults in Check.
type Config struct {
	Version int      `json:"version"`
	Mode    string   `json:"mode"`    // "2pc" (mu = 2), "mpc" (mu >= 2) or "he"
	Dim     int      `json:"dim"`     // template dimension d; default 512
	Alpha   int      `json:"alpha"`   // enrollment weight; default floor(2d/3)
	Beta    int      `json:"beta"`    // query weight; default 63
	Tau     float64  `json:"tau"`     // cosine threshold
	Parties []Member `json:"parties"` // mu parties, each its own process
	Clients []Member `json:"clients"` // devices allowed to call the parties
	// KeyServer holds the secret key in mode he; Parties are then the local
	// servers, each with its own encrypted database.
	KeyServer *Member `json:"key_server,omitempty"`
	Block     int     `json:"block,omitempty"` // bytes per streamed block; default 256 KiB
	// Timeout bounds one request between parties; default 30 s.
	Timeout Duration `json:"timeout,omitempty"`

	dir string
}

// Duration is a time.Duration written as a string ("30s") in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Dir returns the cluster directory the config was loaded from.
func (c *Config) Dir() string { return c.dir }

// Path resolves a file named in the config against the cluster directory.
func (c *Config) Path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(c.dir, name)
}

// LoadConfig reads and checks DIR/cluster.json.
func LoadConfig(dir string) (*Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no cluster in %s: run 'idface cluster init --dir %s' first", dir, dir)
		}
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	c.dir = dir
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	return &c, nil
}

// Save writes the config to dir/cluster.json (fsynced).
func (c *Config) Save(dir string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	c.dir = dir
	return writeFileSync(filepath.Join(dir, ConfigFile), append(b, '\n'), 0o644)
}

// Check fills defaults and validates the configuration.
func (c *Config) Check() error {
	if c.Version == 0 {
		c.Version = 1
	}
	if c.Version != 1 {
		return fmt.Errorf("config version %d; this build reads version 1", c.Version)
	}
	if c.Dim == 0 {
		c.Dim = 512
	}
	if c.Dim < 1 || c.Dim > template.MaxDim {
		return fmt.Errorf("dim = %d, want 1..%d", c.Dim, template.MaxDim)
	}
	if c.Alpha == 0 {
		c.Alpha = template.DefaultAlpha(c.Dim)
	}
	if c.Beta == 0 {
		c.Beta = min(63, c.Alpha)
	}
	if c.Alpha < 1 || c.Alpha > c.Dim || c.Beta < 1 || c.Beta > c.Dim {
		return fmt.Errorf("alpha = %d, beta = %d: want 1..d = %d", c.Alpha, c.Beta, c.Dim)
	}
	if c.Tau < -1 || c.Tau > 1 {
		return fmt.Errorf("tau = %v is not a cosine", c.Tau)
	}
	switch c.Mode {
	case "2pc":
		if len(c.Parties) != 2 {
			return fmt.Errorf("mode 2pc has exactly 2 parties, not %d (use mode mpc)", len(c.Parties))
		}
	case "mpc":
		if len(c.Parties) < 2 || len(c.Parties) > 64 {
			return fmt.Errorf("mode mpc needs 2..64 parties, not %d", len(c.Parties))
		}
	case "he":
		if len(c.Parties) < 1 || len(c.Parties) > 64 {
			return fmt.Errorf("mode he needs 1..64 local servers, not %d", len(c.Parties))
		}
		if c.KeyServer == nil || c.KeyServer.Addr == "" {
			return fmt.Errorf("mode he needs a key server with an address")
		}
	default:
		return fmt.Errorf("mode %q: want 2pc, mpc or he", c.Mode)
	}
	if c.Block == 0 {
		c.Block = 256 << 10
	}
	if c.Block < 4096 || c.Block > 32<<20 {
		return fmt.Errorf("block = %d bytes, want 4096..32 MiB", c.Block)
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(30 * time.Second)
	}
	seen := map[string]bool{}
	for _, m := range append(c.Servers(), c.Clients...) {
		if m.Name == "" || m.Pin == "" || m.Cert == "" {
			return fmt.Errorf("member %q lacks a name, certificate or pin", m.Name)
		}
		if seen[m.Name] || seen[m.Pin] {
			return fmt.Errorf("member %q: name or pin used twice", m.Name)
		}
		seen[m.Name], seen[m.Pin] = true, true
	}
	for _, p := range c.Parties {
		if p.Addr == "" {
			return fmt.Errorf("party %q has no address", p.Name)
		}
	}
	return nil
}

// Servers lists every server process: the parties, then the key server.
func (c *Config) Servers() []Member {
	s := append([]Member{}, c.Parties...)
	if c.KeyServer != nil {
		s = append(s, *c.KeyServer)
	}
	return s
}

// Mu is the number of parties.
func (c *Config) Mu() int { return len(c.Parties) }

// Member returns the named server (party or key server).
func (c *Config) Member(name string) (Member, bool) {
	for _, m := range c.Servers() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// PartyIndex returns the index of the named party, or -1.
func (c *Config) PartyIndex(name string) int {
	for i, p := range c.Parties {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// Pins returns who each pinned certificate belongs to.
func (c *Config) Pins() transport.Pins {
	pins := transport.Pins{}
	for _, p := range c.Servers() {
		pins[p.Pin] = transport.Peer{Name: p.Name, Role: transport.RoleParty}
	}
	for _, m := range c.Clients {
		pins[m.Pin] = transport.Peer{Name: m.Name, Role: transport.RoleClient}
	}
	return pins
}

// Threshold is the least integer score accepted under tau.
func (c *Config) Threshold() int { return template.MinAcceptScore(c.Tau, c.Alpha, c.Beta) }

// writeFileSync writes a file and its directory entry durably.
func writeFileSync(path string, b []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
