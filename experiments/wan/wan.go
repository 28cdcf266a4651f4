// Package wan runs the cluster benchmark across an emulated WAN: every
// server in its own network namespace (harness/netlab), a delay relay
// between them and a rate limit on each server's link (idface bench --link).
package wan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/experiments"
	"github.com/idface/idface/harness/netlab"
	"github.com/idface/idface/host/home"
)

// Link is the WAN between a cluster's servers: the round trip between any
// two of them, and the rate of each server's own link (0: unlimited).
type Link struct {
	RTT  time.Duration
	Rate uint64 // bits per second
}

// ParseLink reads "rtt=20ms,rate=1gbit" (either part may be left out;
// rates as tc writes them: 100mbit, 1gbit, 10gbit).
func ParseLink(s string) (Link, error) {
	var l Link
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[k] {
			return l, fmt.Errorf("link %q: want rtt=DURATION,rate=RATE, each once (as rtt=20ms,rate=1gbit)", s)
		}
		seen[k] = true
		switch k {
		case "rtt":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > 10*time.Second {
				return l, fmt.Errorf("link %q: rtt %q: want a duration from 0 to 10s, as 20ms", s, v)
			}
			l.RTT = d
		case "rate":
			r, err := netlab.ParseRate(v)
			if err != nil {
				return l, fmt.Errorf("link %q: %w", s, err)
			}
			l.Rate = r
		default:
			return l, fmt.Errorf("link %q: unknown %q: want rtt and rate", s, k)
		}
	}
	return l, nil
}

// String writes the link the way ParseLink reads it.
func (l Link) String() string {
	s := "rtt=" + l.RTT.String()
	if l.Rate > 0 {
		s += ",rate=" + netlab.FormatRate(l.Rate)
	}
	return s
}

// Floor is the least time one identification can take on a link: the
// round trips on its critical path and the bytes that must cross the
// busiest link on that path, at the link's rate. It leaves out computing
// and QUIC's packet overhead (about 4% at 1,300-byte packets), and the
// client's own hop, which is on the entry server's LAN.
type Floor struct {
	RTTs  float64 // round trips on the critical path
	Bytes float64 // bytes through the bottleneck link after the path starts
	Ms    float64 // RTTs*RTT + Bytes/rate
}

// IdentifyFloor is the floor of an identification in mode with mu share
// holders (or local servers) that moves bytes between the servers (the
// answer's bytes_total):
//
//   - 2pc and mpc: the entry sends the query to the helpers and receives
//     their blocks; every block crosses the entry's link: 1 RTT + bytes/rate.
//   - he: the local server streams its ciphertexts to the key server and
//     reads the answer: 1 RTT + bytes/rate.
//   - blind: the entry sends the query to the helpers (half a round trip),
//     every holder sends its share of the scores (bytes/mu each) to the
//     decider, which answers the entry (half a round trip). The helpers'
//     shares start half a round trip after the entry's, and all of them
//     cross the decider's link: the last byte arrives at
//     max(RTT + (mu-1)*share/rate, RTT/2 + mu*share/rate), plus RTT/2 for
//     the answer.
func IdentifyFloor(mode config.Mode, mu int, bytes float64, l Link) (Floor, error) {
	if mu < 1 || bytes < 0 {
		return Floor{}, fmt.Errorf("experiments: floor of mu = %d, %v bytes", mu, bytes)
	}
	rtt := float64(l.RTT) / float64(time.Millisecond)
	xfer := func(b float64) float64 { // ms at the link's rate
		if l.Rate == 0 {
			return 0
		}
		return b * 8 / float64(l.Rate) * 1000
	}
	spec, err := config.Spec(mode)
	if err != nil {
		return Floor{}, err
	}
	switch spec.Helper {
	case config.RoleDecider: // every holder sends to the decider
		if mu < 2 {
			return Floor{}, fmt.Errorf("experiments: mode %s has at least 2 share holders, not %d", mode, mu)
		}
		share := bytes / float64(mu)
		helpers := Floor{RTTs: 1.5, Bytes: float64(mu-1) * share, Ms: 1.5*rtt + xfer(float64(mu-1)*share)}
		all := Floor{RTTs: 1, Bytes: float64(mu) * share, Ms: rtt + xfer(float64(mu)*share)}
		if all.Ms > helpers.Ms {
			return all, nil
		}
		return helpers, nil
	}
	// The entry sends the query and every reply crosses its link.
	return Floor{RTTs: 1, Bytes: bytes, Ms: rtt + xfer(bytes)}, nil
}

// wanPort is where every server listens, each in its own namespace.
const wanPort = 7443

// Run is experiments.RunClusterBench with every server in its own network
// namespace (a host of a netlab lab) across a WAN: the round trip between
// any two servers is link.RTT (a relay in a router namespace adds half of
// it each way), each server's link is limited to link.Rate both ways (tc
// tbf), and this process, the client, sits beside the entry server (the
// first party), whose link has no added delay. It needs root; the
// result carries the link, the identify floor on it and the datagrams the
// relays dropped.
func Run(ctx context.Context, o experiments.BenchOptions, link Link) (*experiments.BenchResult, error) {
	if err := Check(link); err != nil {
		return nil, err
	}
	lab, err := netlab.New()
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	wan, err := lab.NewWAN(link.RTT / 2)
	if err != nil {
		return nil, err
	}
	o.Deploy = func(ctx context.Context, dir string, co cluster.Options) (*experiments.Deployment, error) {
		return deployWAN(ctx, lab, wan, link, o.Exe, dir, co)
	}
	res, err := experiments.RunClusterBench(ctx, o)
	if err != nil {
		return nil, err
	}
	mode, _ := config.ParseMode(res.Mode)
	f, err := IdentifyFloor(mode, res.Parties, res.BytesPerIdent, link)
	if err != nil {
		return nil, err
	}
	res.Link, res.RTTMs, res.RateMbit = link.String(), float64(link.RTT)/float64(time.Millisecond), float64(link.Rate)/1e6
	res.WANFloorMs, res.FloorRTTs, res.FloorBytes = f.Ms, f.RTTs, f.Bytes
	res.RelayDrops = wan.Stats().Drops
	return res, nil
}

// Check reports why this machine cannot run a WAN bench on link (it
// needs root, network namespaces, and tc's tbf for a rate), or nil.
func Check(link Link) error {
	check := netlab.Check
	if link.Rate > 0 {
		check = netlab.CheckShaping
	}
	if err := check(); err != nil {
		return fmt.Errorf("a WAN bench runs every server in its own network namespace: %w", err)
	}
	return nil
}

// wanMember is a member of a WAN cluster; servers get a host.
type wanMember struct {
	name, role string
	host       *netlab.Host
	proc       *netlab.Proc
}

// deployWAN builds the cluster as separate organisations would: a host
// per server, a home per member made with its own key, the configuration
// assembled from the public descriptors; then starts each server in its
// host and waits until all are healthy.
func deployWAN(ctx context.Context, lab *netlab.Lab, wan *netlab.WAN, link Link, exe, dir string, o cluster.Options) (*experiments.Deployment, error) {
	if o.Parties < 1 || o.Parties > config.MaxParties {
		return nil, fmt.Errorf("%d parties: want 1..%d", o.Parties, config.MaxParties)
	}
	spec, err := config.Spec(o.Mode)
	if err != nil {
		return nil, err
	}
	var members []*wanMember
	for _, m := range spec.Members(o.Parties) {
		members = append(members, &wanMember{name: m.Name, role: m.Role})
	}
	var descs []config.Descriptor
	for _, m := range members {
		h, err := lab.AddHost(m.name)
		if err != nil {
			return nil, err
		}
		m.host = h
		if link.Rate > 0 {
			if err := h.Shape(netlab.Shape{Rate: link.Rate}); err != nil {
				return nil, err
			}
		}
		addr, err := wan.Expose(h, wanPort)
		if err != nil {
			return nil, err
		}
		hm, err := home.Init(cluster.HomeDir(dir, m.name), m.name, m.role, fmt.Sprintf("0.0.0.0:%d", wanPort), addr.String(), false)
		if err != nil {
			return nil, err
		}
		descs = append(descs, hm.Self)
	}
	// The client (this process) is the operator, beside the entry.
	hc, err := home.Init(cluster.HomeDir(dir, "client"), "client", config.RoleOperator, "", "", false)
	if err != nil {
		return nil, err
	}
	descs = append(descs, hc.Self)
	if err := wan.Beside(members[0].host); err != nil {
		return nil, err
	}
	var id [16]byte
	rand.Read(id[:])
	lit, err := config.Assemble(config.Literal{Mode: o.Mode, Dim: o.Dim, Alpha: o.Alpha, Beta: o.Beta, Tau: o.Tau,
		RevealScores: o.RevealScores, GalleryLevels: o.GalleryLevels, QueryLevels: o.QueryLevels,
		ClusterID: hex.EncodeToString(id[:])}, descs)
	if err != nil {
		return nil, err
	}
	if err := config.Save(dir, lit); err != nil {
		return nil, err
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, err
	}
	dep := &experiments.Deployment{Config: cfg, Pid: func(name string) int {
		for _, m := range members {
			if m.name == name && m.proc != nil {
				return m.proc.Pid()
			}
		}
		return 0
	}, Stop: func() { stopAll(members) }}
	// The key server first: local servers fetch its public key as they
	// start.
	first, rest := members[:0:0], members[:0:0]
	for _, m := range members {
		if m.role == config.RoleKeyServer {
			first = append(first, m)
		} else {
			rest = append(rest, m)
		}
	}
	for _, wave := range [][]*wanMember{first, rest} {
		if len(wave) == 0 {
			continue
		}
		for _, m := range wave {
			if err := startWAN(m, exe, dir); err != nil {
				dep.Stop()
				return nil, err
			}
		}
		if err := waitHealthyWAN(ctx, cfg, dir, wave, 60*time.Second); err != nil {
			dep.Stop()
			return nil, err
		}
	}
	return dep, nil
}

// startWAN starts a server in its host, its log in dir/logs.
func startWAN(m *wanMember, exe, dir string) error {
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(logs, m.name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := m.host.Command(exe, "serve", "--config", filepath.Join(dir, config.File), "--home", cluster.HomeDir(dir, m.name))
	cmd.Stdout, cmd.Stderr = logf, logf
	m.proc, err = m.host.Start(cmd)
	return err
}

// waitHealthyWAN asks each server of wave for its health through the
// client until all answer with nothing unsettled; a server whose process
// exits is reported with the end of its log.
func waitHealthyWAN(ctx context.Context, cfg *config.Params, dir string, wave []*wanMember, timeout time.Duration) error {
	names := make([]string, len(wave))
	procs := map[string]*wanMember{}
	for i, m := range wave {
		names[i], procs[m.name] = m.name, m
	}
	return cluster.PollHealthy(ctx, cfg, names, timeout, func(name string) error {
		m := procs[name]
		select {
		case <-m.proc.Done():
			return fmt.Errorf("server %s exited (%v); its log ends with:\n%s", m.name, m.proc.Err(), logTail(filepath.Join(dir, "logs", m.name+".log"), 10))
		default:
			return nil
		}
	})
}

// stopAll stops every started server (SIGTERM; SIGKILL after 15 s).
func stopAll(members []*wanMember) {
	var wg sync.WaitGroup
	for _, m := range members {
		if m.proc != nil {
			wg.Go(func() { m.proc.Stop(15 * time.Second) })
		}
	}
	wg.Wait()
}

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
