package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
)

// shownMember is one member as 'cluster show' prints it: everything the
// others pin, nothing that must stay on its host.
type shownMember struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Sequencer bool   `json:"sequencer,omitempty"` // the first local server (mode he)
	Addr      string `json:"addr,omitempty"`
	Metrics   string `json:"metrics,omitempty"`
	Pin       string `json:"pin"`
}

// shown is what one file or directory holds: a cluster configuration or
// one member's public descriptor.
type shown struct {
	Path      string        `json:"path"`
	Kind      string        `json:"kind"` // "config" or "descriptor"
	ClusterID string        `json:"cluster_id,omitempty"`
	Mode      string        `json:"mode,omitempty"`
	Serial    int           `json:"serial,omitempty"`
	Hash      string        `json:"hash,omitempty"` // as 'cluster status' and 'assemble' print it
	Members   []shownMember `json:"members"`
	cfg       *config.Params
}

func clusterShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster show", "idface cluster show [--json] cluster.json|NAME.pub.json|DIR ...\n\n"+
		"Prints what a cluster configuration pins: every member's name, role,\n"+
		"address, metrics address and pin (the SHA-256 of its certificate, checked\n"+
		"against the certificate), with the configuration's mode, serial and hash.\n"+
		"Also shows a public descriptor NAME.pub.json before it is assembled, a\n"+
		"local cluster's directory, or a member's home (its own descriptor; the\n"+
		"private key is never read). Compare every pin with the one its owner\n"+
		"printed at 'party init' or 'client init', by a channel other than the\n"+
		"one the file came by.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per argument")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "idface cluster show: name a cluster.json, a NAME.pub.json or a directory")
		fs.Usage()
		return errUsage
	}
	enc := json.NewEncoder(stdout)
	for i, path := range fs.Args() {
		s, err := loadShown(path)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := enc.Encode(s); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printShown(stdout, s)
	}
	return nil
}

// loadShown reads path: a directory with cluster.json (a local cluster) or
// home.json (a member's home), a public descriptor (its JSON has a
// certificate at the top) or a cluster configuration.
func loadShown(path string) (*shown, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, config.File)); err == nil {
			cfg, err := config.Load(path)
			if err != nil {
				return nil, err
			}
			return showConfig(path, cfg), nil
		}
		h, err := home.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%s holds neither a cluster's %s nor a member's home", path, config.File)
		}
		// The home's own descriptor, read as any descriptor is, so that the
		// pin shown is checked against the certificate.
		return showDescriptor(h.PubPath())
	}
	if st.Size() > maxShowFile {
		return nil, fmt.Errorf("%s: %d bytes, more than a cluster configuration has (%d)", path, st.Size(), maxShowFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var probe struct {
		Cert *string `json:"cert"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%s is not JSON (%v): name a cluster.json or a NAME.pub.json", path, err)
	}
	if probe.Cert != nil {
		return showDescriptor(path)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		return nil, err
	}
	return showConfig(path, cfg), nil
}

// maxShowFile bounds what 'cluster show' reads before parsing: a
// configuration with the most members and certificates is far smaller.
const maxShowFile = 16 << 20

func showDescriptor(path string) (*shown, error) {
	d, err := home.ReadDescriptor(path)
	if err != nil {
		return nil, err
	}
	return &shown{Path: path, Kind: "descriptor", Members: []shownMember{{Name: d.Name, Role: d.Role, Addr: d.Addr, Metrics: d.Metrics, Pin: d.Pin}}}, nil
}

// showConfig lists the servers in the configuration's order (parties,
// then the key server or the decider), then the clients. A server's role
// is its place in the configuration.
func showConfig(path string, cfg *config.Params) *shown {
	id, hash := cfg.ClusterID(), cfg.Hash()
	s := &shown{Path: path, Kind: "config", ClusterID: hex.EncodeToString(id[:]), Mode: string(cfg.Mode()),
		Serial: cfg.Serial(), Hash: hex.EncodeToString(hash[:8]), cfg: cfg}
	for _, m := range cfg.Servers() {
		sm := shownMember{Name: m.Name, Role: cfg.Role(m.Name), Addr: m.Addr, Metrics: m.Metrics, Pin: m.Pin}
		sm.Sequencer = sm.Role == config.RoleLocalServer && cfg.PartyIndex(m.Name) == 0
		s.Members = append(s.Members, sm)
	}
	for _, m := range cfg.Clients() {
		s.Members = append(s.Members, shownMember{Name: m.Name, Role: config.ClientRole(m), Pin: m.Pin})
	}
	return s
}

func printShown(w io.Writer, s *shown) {
	if s.cfg != nil {
		fmt.Fprintf(w, "%s: cluster configuration, mode %s, serial %d, hash %s, cluster id %s\n", s.Path, s.Mode, s.Serial, s.Hash, s.ClusterID)
		fmt.Fprintf(w, "  d = %d, alpha = %d, beta = %d; %s\n", s.cfg.Dim(), s.cfg.Alpha(), s.cfg.Beta(), thresholdMeaning(s.cfg))
	} else {
		fmt.Fprintf(w, "%s: public descriptor\n", s.Path)
	}
	fmt.Fprintf(w, "%-16s %-26s %-24s %-16s %s\n", "name", "role", "addr", "metrics", "pin")
	for _, m := range s.Members {
		role := m.Role
		if m.Sequencer {
			role += " (sequencer)"
		}
		fmt.Fprintf(w, "%-16s %-26s %-24s %-16s %s\n", m.Name, role, dash(m.Addr), dash(m.Metrics), m.Pin)
	}
	fmt.Fprintln(w, "each pin is the SHA-256 of the member's certificate (checked): compare it with the pin its owner printed")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
