// Package config is the cluster configuration in two stages: a Literal
// (the JSON file, cluster.json, every zero value meaning a documented
// default) checked once by New into an immutable Params that carries the
// members, the transform's weights, the score threshold, frame-size and
// concurrency limits and timeouts. config knows no mode by itself: each
// mode's package declares its members, options and derived parameters
// (ModeSpec, registered through engine.Register; package modes lists
// them), and New checks a literal against its mode's declaration.
package config

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/network"
	"github.com/idface/idface/template"
)

// File is the configuration's name inside a cluster directory.
const File = "cluster.json"

// Mode is the protection a cluster runs: one of the modes of this build
// (modes.go), each declared there as data.
type Mode string

// Defaults of the zero values of a Literal.
const (
	DefaultDim     = 512
	DefaultBeta    = 63        // the paper's fastest setting; min(63, alpha)
	DefaultTau     = 0.3       // a Literal's; the CLI never relies on it, storing a synthetic calibration (Calibration.Synthetic) or a --tau given
	DefaultBlock   = 256 << 10 // bytes of one streamed block (docs/DESIGN-NOTES.md)
	DefaultTimeout = 30 * time.Second
	// DefaultBatchMax and DefaultBatchWait: an entry scores up to 8
	// concurrent identifies in one pass, holding the first at most 2 ms for
	// the others (passes held 2 on average at 8 clients; larger batches of
	// every entry at once would fill the decider's table: merge.MaxQueries).
	DefaultBatchMax  = 8
	DefaultBatchWait = 2 * time.Millisecond
	MaxBatch         = 32
	maxBatchWait     = 100 * time.Millisecond
	DefaultMaxTopK   = 10
)

// Member is a server or a client of the cluster, from its public
// descriptor: name, role, certificate (PEM) and its pin. Servers also have
// the address they are reached at and may have a metrics address.
type Member struct {
	Name string `json:"name"`
	// Role: a server's may be empty (its place in the config implies it);
	// a client's must be RoleOperator or RoleDevice.
	Role string `json:"role,omitempty"`
	Addr string `json:"addr,omitempty"`
	// Metrics, when set, is the loopback TCP address of the server's
	// /metrics endpoint.
	Metrics string `json:"metrics,omitempty"`
	Cert    string `json:"cert"`
	Pin     string `json:"pin"`
	// Seal is a share holder's public key for sealed enrollment
	// (internal/codec/seal: "mlkem768x25519:" and base64): the operator's client
	// seals each holder's share to it, so the entry relays what it cannot
	// read. Required of blind mode's share holders.
	Seal string `json:"seal,omitempty"`
	// Next, during a key rotation, is the member's new certificate: peers
	// accept either until a configuration without the old one replaces
	// this one (docs/DEPLOY.md, "Rotating a key").
	Next *NextKey `json:"next,omitempty"`
	// Shards, in a sharded cluster (Literal.Shards), are the addresses of
	// the server's shard servers, shard s at Shards[s]; Addr is then its
	// coordinator's. Every shard presents the member's certificate.
	Shards []string `json:"shards,omitempty"`
}

// NextKey is a rotating member's new certificate and its pin.
type NextKey struct {
	Cert string `json:"cert"`
	Pin  string `json:"pin"`
}

// Pins lists every pin the member may present: its pin, then its next one.
func (m Member) Pins() []string {
	if m.Next == nil {
		return []string{m.Pin}
	}
	return []string{m.Pin, m.Next.Pin}
}

// Certs lists the member's certificates (PEM) in the order of Pins.
func (m Member) Certs() []string {
	if m.Next == nil {
		return []string{m.Cert}
	}
	return []string{m.Cert, m.Next.Cert}
}

// checkNext checks a next certificate: its pin is its own and not the
// current one.
func checkNext(name, pin string, next *NextKey) error {
	if next == nil {
		return nil
	}
	if next.Pin == pin {
		return fmt.Errorf("%s: the next certificate is the current one: drop \"next\"", name)
	}
	_, err := checkCert(name+" (next)", next.Cert, next.Pin)
	return err
}

// Roles. Servers: share holders (2PCFace, MPCFace), HE local servers and
// the HE key server. Clients: operators (enroll, delete, identify) and
// devices (identify only).
const (
	RoleShareHolder = "share-holder"
	RoleLocalServer = "local-server"
	RoleKeyServer   = "key-server"
	RoleDecider     = "decider"
	RoleOperator    = "operator"
	RoleDevice      = "device"
)

// Role is the named member's role: its mode's party role for a party,
// RoleKeyServer or RoleDecider for the helper, a client's own; "" for a
// name that is no member.
func (p *Params) Role(name string) string {
	if p.PartyIndex(name) >= 0 {
		return p.spec.PartyRole
	}
	if k, ok := p.KeyServer(); ok && k.Name == name {
		return RoleKeyServer
	}
	if d, ok := p.Decider(); ok && d.Name == name {
		return RoleDecider
	}
	if c, ok := p.Client(name); ok && name != "" { // Client("") is the first operator
		return c.Role
	}
	return ""
}

// ServerRole reports whether role is a server's.
func ServerRole(role string) bool {
	return role == RoleShareHolder || role == RoleLocalServer || role == RoleKeyServer || role == RoleDecider
}

// ClientRoleValid reports whether role is a client's.
func ClientRoleValid(role string) bool { return role == RoleOperator || role == RoleDevice }

// RoleList names every role, for messages.
func RoleList() string {
	return strings.Join([]string{RoleShareHolder, RoleLocalServer, RoleKeyServer, RoleDecider, RoleOperator, RoleDevice}, ", ")
}

// CheckName accepts member names: 1..64 letters, digits, '-', '_' or '.'.
func CheckName(name string) error {
	if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) >= 0 {
		return fmt.Errorf("member name %q: want 1..64 letters, digits, '-', '_' or '.'", name)
	}
	return nil
}

// Descriptor is a member's public descriptor (NAME.pub.json): everything
// other members need, nothing that must stay on its host.
type Descriptor struct {
	Name string `json:"name"`
	Role string `json:"role"`
	Addr string `json:"addr,omitempty"`
	// Metrics, when set, is the loopback TCP address where the server
	// serves /metrics, chosen on its own host; the config carries it.
	Metrics string `json:"metrics,omitempty"`
	Cert    string `json:"cert"`
	Pin     string `json:"pin"`
	Seal    string `json:"seal,omitempty"` // a server's sealing key (Member.Seal)
	// Next is the new certificate of a key rotation in progress ('idface
	// party rotate --stage'), accepted beside Cert until it finishes.
	Next *NextKey `json:"next,omitempty"`
	// Shards are the addresses of a sharded server's shards (Member.Shards).
	Shards []string `json:"shards,omitempty"`
}

// Check validates a descriptor: its pin is its certificate's.
func (d Descriptor) Check() error {
	if err := CheckName(d.Name); err != nil {
		return err
	}
	if !ServerRole(d.Role) && !ClientRoleValid(d.Role) {
		return fmt.Errorf("%s: role %q, want one of %s", d.Name, d.Role, RoleList())
	}
	if ServerRole(d.Role) != (d.Addr != "") {
		return fmt.Errorf("%s: a server has an address and a client has none", d.Name)
	}
	if d.Seal != "" {
		if _, err := seal.ParsePublicKey(d.Seal); err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	if d.Metrics != "" {
		if !ServerRole(d.Role) {
			return fmt.Errorf("%s: a client serves no metrics", d.Name)
		}
		if err := CheckLoopback(d.Metrics); err != nil {
			return fmt.Errorf("%s: metrics address: %w", d.Name, err)
		}
	}
	if _, err := checkCert(d.Name, d.Cert, d.Pin); err != nil {
		return err
	}
	return checkNext(d.Name, d.Pin, d.Next)
}

// checkCert verifies that a PEM certificate has the given pin.
func checkCert(name, certPEM, pin string) (any, error) {
	blk, _ := pem.Decode([]byte(certPEM))
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: \"cert\" is not a PEM certificate: give the member's certificate and pin as its descriptor (NAME.pub.json) has them", name)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: certificate: %w", name, err)
	}
	if got := network.Pin(blk.Bytes); got != pin {
		return nil, fmt.Errorf("%s: the certificate's pin is %s, not %s: the pin must be its certificate's (copy both from the member's descriptor, NAME.pub.json)", name, got, pin)
	}
	return c.PublicKey, nil
}

// Member returns the descriptor's entry in a configuration.
func (d Descriptor) Member() Member {
	return Member(d) // the same fields: a descriptor is a member as its owner made it
}

// Literal is cluster.json as written. Zero values take the defaults above;
// New checks it.
type Literal struct {
	// Version is 2, or 3 when the configuration places rows under a shard
	// key (ShardKeyID): an earlier build, which would ignore the key and
	// place rows by the public hash, refuses version 3. 0 means 2 (3 with
	// a ShardKeyID).
	Version int `json:"version"`
	// Serial numbers successive configurations of one cluster (key
	// rotations, members added or removed); servers report the serial and
	// hash of the configuration they run.
	Serial  int      `json:"serial,omitempty"`
	Mode    Mode     `json:"mode"`          // required
	Dim     int      `json:"dim"`           // template dimension d; default 512
	Alpha   int      `json:"alpha"`         // enrollment weight; default floor(2d/3)
	Beta    int      `json:"beta"`          // query weight; default min(63, alpha)
	Tau     *float64 `json:"tau,omitempty"` // cosine threshold; default 0.3
	Parties []Member `json:"parties"`       // 2PC/MPC parties or HE local servers
	Clients []Member `json:"clients"`       // operators and devices
	// KeyServer holds the secret key in mode he.
	KeyServer *Member `json:"key_server,omitempty"`
	// Decider finds the best rows in mode blind; it holds no share.
	Decider *Member `json:"decider,omitempty"`
	// GalleryLevels and QueryLevels are blind mode's transforms, "L:a1,..."
	// (template.ParseLevels); defaults "1:alpha" and "1:beta", the paper's
	// T_alpha and T_beta. A gallery level set makes alpha its support.
	GalleryLevels string `json:"gallery_levels,omitempty"`
	QueryLevels   string `json:"query_levels,omitempty"`
	// Scheme is mode he's encryption: "bgv" (Lattigo, the default when
	// empty) or "paillier" (2048-bit, the paper's other setting).
	Scheme string `json:"scheme,omitempty"`
	// Block is the bytes per streamed block; default 256 KiB.
	Block int `json:"block,omitempty"`
	// Timeout bounds one request between servers; default 30 s.
	Timeout Duration `json:"timeout,omitempty"`
	// MaxTopK caps the candidates a client may ask for; default 10.
	MaxTopK int `json:"max_top_k,omitempty"`
	// StatsWindow is how many queries a window of best-score statistics
	// holds (engine.ScoreStats: shown only per complete window); default
	// 1000, at least MinStatsWindow.
	StatsWindow int `json:"stats_window,omitempty"`
	// DegradedRate is how many degraded queries (one holder down) a second
	// each helper and the decider serve one entry (replicated mode; a
	// burst of as many). 0, the default: derived by each server from the
	// checked queries it took part in over the last 60 seconds that had
	// any, so the minute before the outage (1.5 times the busiest
	// second's rate, all entries together: the down holder's clients
	// move to the other entries), at least 20, so that an outage costs
	// no throughput while an entry that speeds up only once a holder is
	// down (a bisection of scores, SECURITY.md) is held to its old pace.
	DegradedRate float64 `json:"degraded_rate,omitempty"`
	// KeyServerRate is how many queries per second the key server answers
	// each local server (a burst of twice as many); default 200.
	KeyServerRate float64 `json:"key_server_rate,omitempty"`
	// KeyServerMaxPass is the largest share of the live rows (in the key
	// server's own record, not the rows a query announces) that may pass
	// the threshold in one query; a query over it is refused with a
	// generic message and logged (an honest query passes a handful of
	// rows; a crafted ciphertext passes many). Default: 1%, or 20 times
	// the share of random templates that pass the threshold when that is
	// larger (small d or low tau); at least 16 rows always pass.
	KeyServerMaxPass float64 `json:"key_server_max_pass,omitempty"`
	// RevealScores makes identify answer with scores and candidates below
	// the threshold: research output for experiments, never for a
	// deployment (chosen probes with scores reconstruct templates).
	RevealScores bool `json:"reveal_scores,omitempty"`
	// HideProbes makes identify hide the probe from every server: the
	// device's client computes the query vector and seals each share
	// holder's shares of it (replicated mode; docs/HIDDEN-PROBES.md).
	HideProbes bool `json:"hide_probes,omitempty"`
	// BatchMax is the most concurrent identifies scored in one pass over
	// the rows: an entry's batch in 2PC/MPC (whose helpers stream the
	// union of a batch's columns once) and for hidden probes; in blind,
	// replicated and HE mode the queries a server is asked for while a
	// pass runs (as entry or helper) share its next pass. 1 turns
	// batching off. Default DefaultBatchMax.
	BatchMax int `json:"batch_max,omitempty"`
	// BatchWait is how long an entry holds the first identify of a batch
	// for others to join; default DefaultBatchWait.
	BatchWait Duration `json:"batch_wait,omitempty"`
	// Shards splits every party's rows (and the decider's work) over this
	// many shard servers, a row to the shard rowmap.ShardOf names; 0 or 1:
	// one server per member (shard.go).
	Shards int `json:"shards,omitempty"`
	// ShardKeyID, when set, names the shard key under which rows are
	// placed (rowmap.ShardOfKeyed; ShardKeyID of the key): the row-holding
	// members and the operators hold the key (HOME/shard.key), the decider
	// or key server never does. Empty: rows are placed by the public
	// cluster id (rowmap.ShardOf), which a helper can compute too.
	ShardKeyID string `json:"shard_key_id,omitempty"`
	// ClusterID (32 hex digits, random at init) binds row-map digests to
	// this cluster; when empty it is derived from the mode and the names.
	ClusterID string `json:"cluster_id,omitempty"`
	// Calibration, when set, records that tau was chosen for a target
	// false-positive identification rate (idface calibrate); its
	// threshold and transform must be the ones this configuration gives.
	Calibration *Calibration `json:"calibration,omitempty"`
}

// Calibration is how a threshold was chosen: 'idface calibrate' measured,
// on the operator's labelled templates and with the cluster's transform,
// the least integer score (Threshold) at which at most TargetFPIR of the
// searches for people not enrolled returned an id (open-set split: one
// template of GalleryIDs people enrolled, their other templates the mated
// searches, every template of the other people a non-mated search).
type Calibration struct {
	TargetFPIR float64 `json:"target_fpir"`
	FPIR       float64 `json:"fpir"` // measured at Threshold
	TPIR       float64 `json:"tpir"` // mated searches answered with the right id
	Threshold  int     `json:"threshold"`
	Dim        int     `json:"dim"`
	// GalleryLevels and QueryLevels are the transform calibrated ("1:alpha"
	// and "1:beta" outside blind mode's other levels).
	GalleryLevels string `json:"gallery_levels"`
	QueryLevels   string `json:"query_levels"`
	GalleryIDs    int    `json:"gallery_ids"`
	Mated         int    `json:"mated"`
	NonMated      int    `json:"non_mated"`
	// Rows, when set ('idface calibrate --rows'), is the number of ids the
	// threshold was chosen for: FPIR grows about linearly with the ids
	// enrolled, so the threshold is the least one whose FPIR measured with
	// GalleryIDs enrolled, times Rows/GalleryIDs, is at most TargetFPIR.
	// 0: GalleryIDs (PlannedRows).
	Rows int `json:"rows,omitempty"`
	// Source is the SHA-256 of the calibration file.
	Source string `json:"source,omitempty"`
	// Synthetic, when set, says that this is the default of a cluster made
	// without a calibration file: the same measurement on the synthetic
	// people it names (the command that draws them), not on the operator's
	// own features, whose threshold it does not know.
	Synthetic string `json:"synthetic,omitempty"`
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

// Load reads and checks DIR/cluster.json.
func Load(dir string) (*Params, error) {
	p, err := LoadFile(filepath.Join(dir, File))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no cluster in %s: run 'idface cluster init --cluster %s' first", dir, dir)
	}
	return p, err
}

// LoadFile reads and checks a cluster configuration file.
func LoadFile(path string) (*Params, error) {
	dir := filepath.Dir(path)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lit Literal
	if err := json.Unmarshal(b, &lit); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := New(lit, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Save writes the literal to dir/cluster.json durably.
func Save(dir string, lit Literal) error { return SaveFile(filepath.Join(dir, File), lit) }

// SaveFile writes the literal to path durably.
func SaveFile(path string, lit Literal) error {
	if lit.Version < versionOf(lit) {
		lit.Version = versionOf(lit)
	}
	b, err := json.MarshalIndent(lit, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFile(path, append(b, '\n'), 0o644)
}

// New fills the defaults of lit, checks it and derives every parameter.
// dir is the cluster directory that relative file names resolve against.
func New(lit Literal, dir string) (*Params, error) {
	lit = lit.clone()
	if lit.Version == 0 {
		lit.Version = versionOf(lit)
	}
	if lit.Version == 1 {
		return nil, fmt.Errorf("config version 1 (keys inside the cluster directory) was written by an earlier idface whose data this build cannot read either: create the cluster again (idface cluster init, or party init and cluster assemble)")
	}
	if lit.Version != 2 && lit.Version != 3 {
		return nil, fmt.Errorf("config version %d; this build reads versions 2 and 3", lit.Version)
	}
	if lit.ShardKeyID != "" && lit.Version < 3 {
		return nil, fmt.Errorf("shard_key_id in a configuration of version %d: a keyed placement is version 3, which earlier builds (that would place rows by the public hash) refuse; assemble the configuration again", lit.Version)
	}
	if lit.Serial == 0 {
		lit.Serial = 1
	}
	spec, err := Spec(lit.Mode)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(spec, lit); err != nil {
		return nil, err
	}
	if err := fillTransform(spec, &lit); err != nil {
		return nil, err
	}
	if err := fillLimits(&lit); err != nil {
		return nil, err
	}
	// key_server_rate and key_server_max_pass are mode he's (modes/hemode
	// derives their defaults); other modes ignore them, as configurations
	// written by earlier builds carry them filled in.
	p := &Params{lit: lit, dir: dir, spec: spec}
	if p.cluster, err = clusterID(lit); err != nil {
		return nil, err
	}
	if err := p.checkMembers(); err != nil {
		return nil, err
	}
	if err := p.checkShards(); err != nil {
		return nil, err
	}
	if err := p.clientKeys(); err != nil {
		return nil, err
	}
	if err := p.sealKeys(); err != nil {
		return nil, err
	}
	if err := p.derive(); err != nil {
		return nil, err
	}
	return p, nil
}

// fillTransform fills the defaults of the dimension, the transform
// (levels, alpha and beta) and tau, and checks them.
func fillTransform(spec *ModeSpec, lit *Literal) error {
	if spec.Levels && lit.HideProbes && lit.Beta == 0 && lit.QueryLevels == "" {
		if err := hiddenDefaults(lit); err != nil {
			return err
		}
	}
	if spec.Levels { // the levels' supports are alpha and beta
		for _, f := range []struct {
			spec   string
			weight *int
		}{{lit.GalleryLevels, &lit.Alpha}, {lit.QueryLevels, &lit.Beta}} {
			if f.spec == "" {
				continue
			}
			lv, err := template.ParseLevels(f.spec)
			if err != nil {
				return err
			}
			*f.weight = lv.Support()
		}
	}
	var err error
	if lit.Dim, lit.Alpha, lit.Beta, err = Weights(lit.Dim, lit.Alpha, lit.Beta); err != nil {
		return err
	}
	if spec.Levels {
		if lit.GalleryLevels == "" {
			lit.GalleryLevels = template.TernaryLevels(lit.Alpha).String()
		}
		if lit.QueryLevels == "" {
			lit.QueryLevels = template.TernaryLevels(lit.Beta).String()
		}
	}
	if lit.Tau == nil {
		t := DefaultTau
		lit.Tau = &t
	}
	if *lit.Tau < -1 || *lit.Tau > 1 {
		return fmt.Errorf("tau = %v is not a cosine", *lit.Tau)
	}
	return nil
}

// fillLimits fills the defaults of the common limits and timeouts (block,
// timeout, batching, top-K cap) and checks them.
func fillLimits(lit *Literal) error {
	if lit.Block == 0 {
		lit.Block = DefaultBlock
	}
	if lit.Block < 4096 || lit.Block > 32<<20 {
		return fmt.Errorf("block = %d bytes, want 4096..32 MiB", lit.Block)
	}
	if lit.Timeout == 0 {
		lit.Timeout = Duration(DefaultTimeout)
	}
	if lit.Timeout < Duration(100*time.Millisecond) {
		return fmt.Errorf("timeout = %v is too short", time.Duration(lit.Timeout))
	}
	if lit.BatchMax < 0 || lit.BatchMax > MaxBatch {
		return fmt.Errorf("batch_max = %d, want 1..%d (1: no batching)", lit.BatchMax, MaxBatch)
	}
	if lit.BatchWait < 0 || lit.BatchWait > Duration(maxBatchWait) {
		return fmt.Errorf("batch_wait = %v, want at most %v: a batch holds its first identify this long", time.Duration(lit.BatchWait), maxBatchWait)
	}
	if lit.MaxTopK == 0 {
		lit.MaxTopK = DefaultMaxTopK
	}
	if lit.MaxTopK < 1 || lit.MaxTopK > maxTopK {
		return fmt.Errorf("max_top_k = %d, want 1..%d", lit.MaxTopK, maxTopK)
	}
	if lit.StatsWindow != 0 && (lit.StatsWindow < MinStatsWindow || lit.StatsWindow > maxStatsWindow) {
		return fmt.Errorf("stats_window = %d, want %d..%d queries: a smaller window shows too much of each query's best score (docs/SECURITY.md, \"Score statistics\")", lit.StatsWindow, MinStatsWindow, maxStatsWindow)
	}
	if r := lit.DegradedRate; r != 0 && !(r >= 1 && r <= maxDegradedRate) { // (NaN fails too)
		return fmt.Errorf("degraded_rate = %g, want 1..%d queries a second, or 0 to derive it from each entry's rate before an outage", r, maxDegradedRate)
	}
	return nil
}

// maxDegradedRate bounds Literal.DegradedRate.
const maxDegradedRate = 1_000_000

// DegradedRate is the degraded queries a second one entry is served by
// each helper and the decider; 0: derived from the entry's rate before
// the outage (Literal.DegradedRate).
func (p *Params) DegradedRate() float64 { return p.lit.DegradedRate }

// Windows of best-score statistics (Literal.StatsWindow).
const (
	DefaultStatsWindow = 1000
	MinStatsWindow     = 100
	maxStatsWindow     = 10_000_000
)

// StatsWindow is the queries in one window of best-score statistics.
func (p *Params) StatsWindow() int {
	if p.lit.StatsWindow == 0 {
		return DefaultStatsWindow
	}
	return p.lit.StatsWindow
}

// versionOf is the configuration version lit needs: 3 with a shard key,
// else 2.
func versionOf(lit Literal) int {
	if lit.ShardKeyID != "" {
		return 3
	}
	return 2
}

// clusterID is the configured cluster id, or one derived from the mode
// and the parties' names.
func clusterID(lit Literal) ([16]byte, error) {
	var id [16]byte
	if lit.ClusterID != "" {
		b, err := hex.DecodeString(lit.ClusterID)
		if err != nil || len(b) != 16 {
			return id, fmt.Errorf("cluster_id %q: want 32 hex digits", lit.ClusterID)
		}
		copy(id[:], b)
	} else {
		h := sha256.New()
		fmt.Fprintf(h, "idface cluster\x00%s", lit.Mode)
		for _, m := range lit.Parties {
			fmt.Fprintf(h, "\x00%s", m.Name)
		}
		copy(id[:], h.Sum(nil))
	}
	return id, nil
}

// checkMembers checks every member's name, certificate, pin and address:
// names and pins are unique, servers have an address, clients a valid
// role and none.
func (p *Params) checkMembers() error {
	seen := map[string]bool{}
	for _, m := range append(p.Servers(), p.lit.Clients...) {
		if m.Name == "" || m.Pin == "" || m.Cert == "" {
			return fmt.Errorf("member %q lacks a name, certificate or pin", m.Name)
		}
		if err := CheckName(m.Name); err != nil {
			return err
		}
		if _, err := checkCert(m.Name, m.Cert, m.Pin); err != nil {
			return err
		}
		if err := checkNext(m.Name, m.Pin, m.Next); err != nil {
			return err
		}
		if seen["name:"+m.Name] {
			return fmt.Errorf("member %q: name or pin used twice", m.Name)
		}
		seen["name:"+m.Name] = true
		for _, pin := range m.Pins() {
			if seen["pin:"+pin] {
				return fmt.Errorf("member %q: name or pin used twice", m.Name)
			}
			seen["pin:"+pin] = true
		}
		if m.Metrics != "" {
			if err := CheckLoopback(m.Metrics); err != nil {
				return fmt.Errorf("member %q: metrics address: %w (a public address must be named on the command line: idface serve --metrics-addr)", m.Name, err)
			}
		}
	}
	for _, m := range p.Servers() {
		if m.Addr == "" {
			return fmt.Errorf("server %q has no address", m.Name)
		}
	}
	for _, c := range p.lit.Clients {
		if c.Role == "" {
			// An empty role once meant operator: a client entry without one
			// (hand-written, or from an old config) got the right to enroll
			// and delete without anyone having said so.
			return fmt.Errorf("client %q has no role: give it \"role\": %q (identify only) or %q (enroll, delete and identify) in the cluster config, or assemble the config again from its descriptor (idface client init --role device|operator)",
				c.Name, RoleDevice, RoleOperator)
		}
		if !ClientRoleValid(c.Role) {
			return fmt.Errorf("client %q: role %q, want %s or %s", c.Name, c.Role, RoleOperator, RoleDevice)
		}
		if c.Addr != "" {
			return fmt.Errorf("client %q has an address; clients do not listen", c.Name)
		}
	}
	return nil
}

// clientKeys reads the clients' public keys: every operator's (which
// sign enrollments and deletions) and every ECDSA device's.
func (p *Params) clientKeys() error {
	p.operators, p.clients = map[string][]*ecdsa.PublicKey{}, map[string][]*ecdsa.PublicKey{}
	for _, m := range p.lit.Clients {
		op := ClientRole(m) == RoleOperator
		// A rotating client signs with either key (its running one).
		for i, c := range m.Certs() {
			pub, _ := checkCert(m.Name, c, m.Pins()[i]) // checked above
			k, ok := pub.(*ecdsa.PublicKey)
			if !ok && op {
				return fmt.Errorf("operator %q: its certificate's key is not ECDSA: create the operator with 'idface client init'", m.Name)
			}
			if !ok {
				continue // a device that cannot sign hidden probes
			}
			p.clients[m.Name] = append(p.clients[m.Name], k)
			if op {
				p.operators[m.Name] = append(p.operators[m.Name], k)
			}
		}
	}
	return nil
}

// Weights fills the defaults of the dimension and the transform weights
// (zero values) and checks them: d = 512, alpha = floor(2d/3), beta =
// min(63, alpha).
func Weights(dim, alpha, beta int) (int, int, int, error) {
	if dim == 0 {
		dim = DefaultDim
	}
	if dim < 1 || dim > maxDim {
		return 0, 0, 0, fmt.Errorf("dim = %d, want 1..%d", dim, maxDim)
	}
	if alpha == 0 {
		alpha = template.DefaultAlpha(dim)
	}
	if beta == 0 {
		beta = min(DefaultBeta, alpha)
	}
	if alpha < 1 || alpha > dim || beta < 1 || beta > dim {
		return 0, 0, 0, fmt.Errorf("alpha = %d, beta = %d: want 1..d = %d", alpha, beta, dim)
	}
	return dim, alpha, beta, nil
}

// HiddenQueryLevels is the number of levels of a hidden-probe cluster's
// default query: a dense 4-bit quantisation of q (template.QuantisedLevels).
const HiddenQueryLevels = 7

// hiddenDefaults sets a hidden-probe cluster's transforms when neither
// --beta nor --query-levels was given: in this mode the query's precision
// is free (every holder reads every position whatever the query), so the
// default is a dense 4-bit query and, unless --alpha or --gallery-levels
// was given, the 4-level gallery, both in the 16-bit ring the query needs
// anyway (docs/HIDDEN-PROBES.md, "Query forms"). With --beta the query
// stays T_beta and answers equal those of a cluster that shows probes.
func hiddenDefaults(lit *Literal) error {
	d := lit.Dim
	if d == 0 {
		d = DefaultDim
	}
	q, err := template.QuantisedLevels(d, min(HiddenQueryLevels, d))
	if err != nil {
		return err
	}
	lit.QueryLevels = q.String()
	if lit.GalleryLevels == "" && lit.Alpha == 0 {
		if g, err := template.FourLevelGallery(template.DefaultAlpha(d)); err == nil {
			lit.GalleryLevels = g.String()
		}
	}
	return nil
}

// CheckLoopback accepts host:port addresses on a loopback interface.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address", addr)
	}
	return nil
}

func (lit Literal) clone() Literal {
	lit.Parties = append([]Member(nil), lit.Parties...)
	lit.Clients = append([]Member(nil), lit.Clients...)
	if lit.KeyServer != nil {
		k := *lit.KeyServer
		lit.KeyServer = &k
	}
	if lit.Decider != nil {
		k := *lit.Decider
		lit.Decider = &k
	}
	if lit.Tau != nil {
		t := *lit.Tau
		lit.Tau = &t
	}
	if lit.Calibration != nil {
		c := *lit.Calibration
		lit.Calibration = &c
	}
	return lit
}
