package experiments

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/baseline"
	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
)

// BenchOptions configure one cluster measurement.
type BenchOptions struct {
	Exe     string // the idface binary the parties run
	Mode    string // a registered mode
	Parties int
	Dim     int
	Alpha   int
	Beta    int
	IDs     int
	Queries int
	Batch   int    // templates per enrollment request
	Scheme  string // mode he: "bgv" (default) or "paillier"
	// HideProbes: a hidden-probe cluster (mode replicated).
	HideProbes bool
	// BatchMax and BatchWait: the cluster's batching of concurrent
	// identifies (0: the defaults).
	BatchMax  int
	BatchWait time.Duration
	// Clients, when above 1, also runs that many clients identifying at
	// once (Queries each, every client through its own connection) and
	// reports identifications per second (BenchResult.IdentifyPerS).
	Clients int
	// Shards runs every server as a coordinator and this many shards
	// (every mode; cluster.Options.Shards).
	Shards int
	// Down, when set, names a server killed after the healthy loops (a
	// local cluster of a mode that answers with a party down): the first
	// query after the kill, the single-query loop and the clients' rate
	// are measured again without it (BenchResult.Down*).
	Down string
	Seed uint64
	// Progress, when set, is told about enrollment progress.
	Progress func(done, total int)
	// Deploy, when set, replaces the local cluster on 127.0.0.1: it creates
	// the cluster in dir with these options (member homes where
	// cluster.HomeDir puts them, dir/cluster.json) and starts its servers,
	// for instance each in its own network namespace (experiments/wan).
	Deploy func(ctx context.Context, dir string, o cluster.Options) (*Deployment, error)
}

// Deployment is a running cluster that BenchOptions.Deploy started.
type Deployment struct {
	Config *config.Params
	// Pid is a server's process id, 0 when unknown.
	Pid func(name string) int
	// Stop ends the servers.
	Stop func()
}

// deployLocal starts a local cluster: every server a process on 127.0.0.1.
func deployLocal(ctx context.Context, exe, dir string, o cluster.Options) (*Deployment, error) {
	cfg, err := cluster.Init(dir, o)
	if err != nil {
		return nil, err
	}
	if err := cluster.Up(ctx, cfg, exe, 60*time.Second); err != nil {
		cluster.Down(cfg)
		return nil, err
	}
	pid := func(name string) int {
		if pid, ok := cluster.Running(cfg, name); ok {
			return pid
		}
		return 0
	}
	return &Deployment{Config: cfg, Pid: pid, Stop: func() { cluster.Down(cfg) }}, nil
}

// BenchResult is one line of "idface bench --json".
type BenchResult struct {
	Mode       string `json:"mode"`
	HideProbes bool   `json:"hide_probes,omitempty"`
	// BatchMax and BatchWaitMS: how the entry grouped concurrent
	// identifies (hidden probes; the other modes score one by one).
	BatchMax    int     `json:"batch_max,omitempty"`
	BatchWaitMS float64 `json:"batch_wait_ms,omitempty"`
	// Levels, when the transforms are not the paper's T_alpha, T_beta:
	// "gallery x query" (levels modes).
	Levels        string  `json:"levels,omitempty"`
	Scheme        string  `json:"scheme,omitempty"`     // mode he's encryption (and hers)
	GroupRows     int     `json:"group_rows,omitempty"` // rows of one column group (he, hers)
	Parties       int     `json:"parties"`
	IDs           int     `json:"ids"`
	Alpha         int     `json:"alpha"`
	Beta          int     `json:"beta"`
	EnrollS       float64 `json:"enroll_s"`
	IdentifyP50   float64 `json:"identify_ms_p50"`
	IdentifyP90   float64 `json:"identify_ms_p90"`
	IdentifyMin   float64 `json:"identify_ms_min"`
	PlainFloatP50 float64 `json:"plain_float_ms_p50"`
	WireFloorMs   float64 `json:"wire_floor_ms"`
	// Kernels (a mode with engine.Mode.KernelPath) is the critical path of
	// the identify's kernels on this machine, measured after the
	// identifications (BlindKernelPath).
	Kernels *KernelPath `json:"kernel_path,omitempty"`
	// Where (a local, unsharded cluster of a mode whose share holders
	// count their kernels' time: blind, replicated) is where the single
	// client's identifies went, from the servers' counters: means over
	// that loop, not medians.
	Where         *Where  `json:"where,omitempty"`
	BytesPerIdent float64 `json:"bytes_per_identify"`
	BytesPerRow   float64 `json:"bytes_per_row"` // between the servers, per identify (Complete)
	FormulaBytes  float64 `json:"formula_bytes"`
	RSSMBPerParty float64 `json:"rss_mb_per_party"`
	// Servers is the cluster's server processes (parties and the mode's
	// helper), HostCores and Host the machine they all ran on.
	Servers   int    `json:"servers,omitempty"`
	HostCores int    `json:"host_cores,omitempty"`
	Host      string `json:"host,omitempty"`
	// Clients identifying at once and their identifications per second
	// (one client: one at a time, 1000 / the mean latency), beside the
	// float32 search's single-query rate of the same run (1000 /
	// PlainFloatP50).
	Clients        int     `json:"clients"`
	IdentifyPerS   float64 `json:"identify_per_s"`
	PlainFloatPerS float64 `json:"plain_float_per_s"`
	// Loaded is the clients' run seen from the servers (a local unsharded
	// cluster, Clients > 1): how many queries a pass over the shares
	// scored and each process's time on a core per identify.
	Loaded *Loaded `json:"loaded,omitempty"`
	// With a server killed after the healthy loops (BenchOptions.Down):
	// its name, the first query after the kill, the single-query p50 and
	// the clients' rate without it, and how many of the single queries
	// were answered degraded.
	Down             string  `json:"down,omitempty"`
	DownFirstMS      float64 `json:"down_first_ms,omitempty"`
	DownP50MS        float64 `json:"down_p50_ms,omitempty"`
	DownIdentifyPerS float64 `json:"down_identify_per_s,omitempty"`
	DownDegraded     int     `json:"down_degraded,omitempty"`
	DownQueries      int     `json:"down_queries,omitempty"`
	ShareMB          float64 `json:"share_mb_per_party"`
	// Shards: every server ran as a coordinator and this many shards
	// (Servers counts every process).
	Shards int `json:"shards,omitempty"`
	// WAN runs (experiments/wan, idface bench --link): the link between the
	// servers and the least time an identify can take on it.
	Link       string  `json:"link,omitempty"`
	RTTMs      float64 `json:"rtt_ms,omitempty"`
	RateMbit   float64 `json:"rate_mbit,omitempty"`
	WANFloorMs float64 `json:"wan_floor_ms,omitempty"`
	FloorRTTs  float64 `json:"wan_floor_rtts,omitempty"`
	FloorBytes float64 `json:"wan_floor_bytes,omitempty"`
	RelayDrops uint64  `json:"relay_drops,omitempty"`
	// Extrapolated, when set, scales this run to a larger database (bench
	// --extrapolate): marked as such, never a measurement.
	Extrapolated *Extrapolation `json:"extrapolated,omitempty"`
}

// Extrapolation is a run scaled linearly to IDs rows: enrollment, identify
// (minus the float32 and wire references), storage and bytes grow with
// the number of column groups (HE, HERS) or of rows.
type Extrapolation struct {
	IDs           int     `json:"ids"`
	Factor        float64 `json:"factor"`
	EnrollS       float64 `json:"enroll_s"`
	IdentifyP50   float64 `json:"identify_ms_p50"`
	ShareMB       float64 `json:"share_mb_per_party"`
	BytesPerIdent float64 `json:"bytes_per_identify"`
}

// Extrapolate scales res to ids rows by its column groups (HE, HERS) or
// rows. Fixed costs (a query's transform, round trips) scale too, so the
// figure errs high.
func Extrapolate(res *BenchResult, ids int) {
	groupRows := max(res.GroupRows, 1)
	f := float64((ids+groupRows-1)/groupRows) / float64((res.IDs+groupRows-1)/groupRows)
	res.Extrapolated = &Extrapolation{IDs: ids, Factor: f, EnrollS: res.EnrollS * f, IdentifyP50: res.IdentifyP50 * f,
		ShareMB: res.ShareMB * f, BytesPerIdent: res.BytesPerIdent * f}
}

// RandomTemplates fills an N x d row-major matrix with Gaussian entries on
// all cores (unit-normalised rows are uniform on the sphere).
func RandomTemplates(n, d int, seed uint64) []float32 {
	data := make([]float32, n*d)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := n * d * g / workers; i < n*d*(g+1)/workers; i++ {
				data[i] = float32(r.NormFloat64())
			}
		})
	}
	wg.Wait()
	return data
}

// RunClusterBench starts a fresh local cluster in a temporary directory,
// enrolls o.IDs templates through the first party, times o.Queries
// identifications, and, in the same process on the same templates, the
// float32 brute-force search and the raw transfer of the same bytes over the
// same QUIC transport. The cluster is removed afterwards. o.Deploy runs
// the servers elsewhere (experiments/wan: in network namespaces across a WAN).
func RunClusterBench(ctx context.Context, o BenchOptions) (*BenchResult, error) {
	mode, err := config.ParseMode(o.Mode)
	if err != nil {
		return nil, err
	}
	if o.Queries == 0 {
		o.Queries = 20
	}
	dir, err := os.MkdirTemp("", "idface-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tau := config.DefaultTau
	deploy := o.Deploy
	if deploy == nil {
		deploy = func(ctx context.Context, dir string, co cluster.Options) (*Deployment, error) {
			return deployLocal(ctx, o.Exe, dir, co)
		}
	}
	// A local cluster's servers serve /metrics on loopback: the identify
	// loop's Where comes from them.
	dep, err := deploy(ctx, dir, cluster.Options{Mode: mode, Parties: o.Parties, Dim: o.Dim, Alpha: o.Alpha, Beta: o.Beta, Tau: &tau, Scheme: o.Scheme, HideProbes: o.HideProbes,
		BatchMax: o.BatchMax, BatchWait: o.BatchWait, Shards: o.Shards, Metrics: o.Deploy == nil})
	if err != nil {
		return nil, err
	}
	defer dep.Stop()
	cfg := dep.Config
	m, err := modes.Of(cfg)
	if err != nil {
		return nil, err
	}
	if o.Batch == 0 {
		o.Batch = m.Batch(cfg, o.IDs, 8192)
	}
	cl, err := cluster.Client(cfg, "", "")
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	b := &benchRun{o: o, cfg: cfg, dep: dep, cl: cl, d: cfg.Dim(), res: newBenchResult(cfg, o),
		// The servers' counters before and after each loop (a local,
		// unsharded cluster: where the servers' metrics are this
		// machine's loopback and one entry answers): where its time went.
		where: o.Deploy == nil && cfg.Shards() == 1}
	b.data = RandomTemplates(o.IDs+o.Queries, b.d, o.Seed)
	res := b.res
	if res.EnrollS, err = b.enroll(ctx); err != nil {
		return nil, err
	}
	bytes, err := b.identifyLoop(ctx)
	if err != nil {
		return nil, err
	}
	_, res.FormulaBytes = IdentifyFormula(cfg, o.IDs)
	res.ShareMB = m.Storage(cfg, o.IDs) / 1e6
	res.RSSMBPerParty = b.rssPerParty()
	if o.Clients > 1 {
		if err := b.clientsLoop(ctx); err != nil {
			return nil, err
		}
	}
	if o.Down != "" {
		if err := benchDown(ctx, o, cfg, cl, res, b.probe); err != nil {
			return nil, err
		}
	}

	// The non-protected reference on the same templates.
	if res.PlainFloatP50, err = FloatReference(b.d, b.data, o.IDs, o.Queries); err != nil {
		return nil, err
	}
	if res.WireFloorMs, err = WireFloor(ctx, int(bytes), 7); err != nil {
		return nil, err
	}
	if m.KernelPath && o.Deploy == nil && cfg.Shards() == 1 { // on loopback: a WAN run's wire is another
		// The servers are idle now: each kernel alone, top-1 as above.
		if res.Kernels, err = BlindKernelPath(ctx, cfg, o.IDs, 1, 5); err != nil {
			return nil, err
		}
	}
	res.Complete()
	return res, nil
}

// newBenchResult is a result with what the cluster's configuration says.
func newBenchResult(cfg *config.Params, o BenchOptions) *BenchResult {
	res := &BenchResult{Mode: string(cfg.Mode()), Parties: cfg.Mu(), IDs: o.IDs, Alpha: cfg.Alpha(), Beta: cfg.Beta(), HideProbes: cfg.HideProbes(),
		Servers: len(cluster.ServerNames(cfg)), HostCores: runtime.NumCPU(), Host: HostModel()}
	if cfg.Shards() > 1 {
		res.Shards = cfg.Shards()
	}
	if g, q := cfg.Transform(); g.L() > 1 || q.L() > 1 {
		res.Levels = g.String() + " x " + q.String()
	}
	if cfg.HideProbes() {
		n, w := cfg.Batch()
		res.BatchMax, res.BatchWaitMS = n, float64(w)/float64(time.Millisecond)
	}
	// A mode whose rows are in encrypted column groups (he).
	if s, ok := cfg.Scheme(); ok {
		res.Scheme, res.GroupRows = s.Name, s.GroupRows(cfg.Alpha(), cfg.Beta())
	}
	return res
}

// benchRun is one size of RunClusterBench: its cluster, client and data.
type benchRun struct {
	o     BenchOptions
	cfg   *config.Params
	dep   *Deployment
	cl    *client.Client
	d     int
	data  []float32 // o.IDs rows to enroll, then o.Queries probes
	res   *BenchResult
	where bool           // read the servers' counters around the loops
	pids  map[string]int // the processes whose CPU is read
}

// probe is the q-th probe (modulo o.Queries).
func (b *benchRun) probe(q int) []float32 {
	q %= b.o.Queries
	return b.data[(b.o.IDs+q)*b.d : (b.o.IDs+q+1)*b.d]
}

// enroll enrolls the rows and returns the seconds it took. Two requests
// in flight per party (per shard when sharded): the next batch travels
// while the entry works on the current one (an entry, or each entry
// shard, still commits them one at a time), and the parties, each the
// origin of its own segment, commit beside each other (Spread).
func (b *benchRun) enroll(ctx context.Context) (float64, error) {
	d := b.d
	start := time.Now()
	if _, err := b.cl.EnrollAll(ctx, b.o.IDs, func(i int) protocol.Item {
		return protocol.Item{ID: "id-" + strconv.Itoa(i), Template: b.data[i*d : (i+1)*d]}
	}, client.Bulk{Batch: b.o.Batch, InFlight: 2, Spread: true, Timeout: 10 * time.Minute, Progress: b.o.Progress}); err != nil {
		return 0, fmt.Errorf("enrolling: %w", err)
	}
	return time.Since(start).Seconds(), nil
}

// identifyLoop runs the probes one at a time, sets the latencies and
// where their time went, and returns the bytes of the last identify.
func (b *benchRun) identifyLoop(ctx context.Context) (uint64, error) {
	var before Scrape
	var schedBefore map[string]Sched
	var err error
	b.pids = map[string]int{ClientProcess: os.Getpid()}
	if b.where {
		if before, err = ScrapeCluster(ctx, b.cfg); err != nil {
			return 0, err
		}
		for _, s := range b.cfg.Servers() {
			b.pids[s.Name] = b.dep.Pid(s.Name)
		}
		schedBefore = ReadScheds(b.pids)
	}
	entry := b.cl.Entry()
	var lat []float64
	var bytes uint64
	for q := range b.o.Queries {
		t0 := time.Now()
		r, err := b.cl.Identify(ctx, b.probe(q), 1)
		if err != nil {
			return 0, fmt.Errorf("identifying: %w", err)
		}
		lat = append(lat, Millis(time.Since(t0)))
		bytes = r.BytesTotal
	}
	if b.where && b.cl.Entry() == entry { // an entry that changed midway: no one entry's counters
		sched := SchedDelta(schedBefore, ReadScheds(b.pids))
		after, err := scrapeSettled(ctx, b.cfg, before, entry, len(lat))
		if err != nil {
			return 0, err
		}
		sum := 0.0
		for _, l := range lat {
			sum += l
		}
		b.res.Where = WhereFrom(before, after, sched, entry, b.cfg.DeciderName(), len(lat), sum/float64(len(lat)))
	}
	b.res.SetLatencies(lat)
	b.res.BytesPerIdent = float64(bytes)
	return bytes, nil
}

// rssPerParty is the largest resident memory of a party (a sharded
// party's processes together), in MB.
func (b *benchRun) rssPerParty() float64 {
	most := 0.0
	for _, p := range b.cfg.Parties() {
		rss := 0.0
		for _, name := range cluster.ServerNames(b.cfg) {
			if config.MemberOf(name) == p.Name {
				if pid := b.dep.Pid(name); pid > 0 {
					rss += RSSMB(pid)
				}
			}
		}
		most = max(most, rss)
	}
	return most
}

// clientsLoop runs o.Clients clients at once, o.Queries identifies
// each, and sets the rate and what the servers did under them.
func (b *benchRun) clientsLoop(ctx context.Context) error {
	var before Scrape
	var schedBefore map[string]Sched
	var err error
	if b.where {
		if before, err = ScrapeCluster(ctx, b.cfg); err != nil {
			return err
		}
		schedBefore = ReadScheds(b.pids)
	}
	if b.res.IdentifyPerS, err = concurrentRate(ctx, b.cfg, b.o.Clients, b.o.Queries, b.probe, ""); err != nil {
		return err
	}
	b.res.Clients = b.o.Clients
	if b.where {
		sched := SchedDelta(schedBefore, ReadScheds(b.pids))
		after, err := ScrapeCluster(ctx, b.cfg)
		if err != nil {
			return err
		}
		b.res.Loaded = LoadedFrom(before, after, sched, b.cfg.DeciderName(), b.o.Clients*b.o.Queries)
	}
	return nil
}

// benchDown kills server o.Down of a local cluster and measures again:
// the first query after the kill (it waits for the entry's contact with
// the server to fail), o.Queries single queries and, with o.Clients > 1,
// the clients' rate.
func benchDown(ctx context.Context, o BenchOptions, cfg *config.Params, cl *client.Client, res *BenchResult, probe func(q int) []float32) error {
	if o.Deploy != nil {
		return fmt.Errorf("--down: a local cluster only")
	}
	if !cfg.Spec().Outage {
		return fmt.Errorf("--down: mode %s does not answer with a server down", cfg.Mode())
	}
	if err := cluster.Kill(cfg, o.Down); err != nil {
		return fmt.Errorf("--down %s: %w", o.Down, err)
	}
	res.Down = o.Down
	var lat []float64
	for q := range o.Queries + 1 {
		t0 := time.Now()
		r, err := cl.Identify(ctx, probe(q), 1)
		if err != nil {
			return fmt.Errorf("identifying with %s down: %w", o.Down, err)
		}
		if q == 0 {
			res.DownFirstMS = Millis(time.Since(t0))
			continue
		}
		lat = append(lat, Millis(time.Since(t0)))
		if r.Degraded {
			res.DownDegraded++
		}
	}
	res.DownP50MS, res.DownQueries = Median(lat), len(lat)
	if o.Clients > 1 {
		var err error
		if res.DownIdentifyPerS, err = concurrentRate(ctx, cfg, o.Clients, o.Queries, probe, o.Down); err != nil {
			return fmt.Errorf("clients with %s down: %w", o.Down, err)
		}
	}
	return nil
}

// FloatReference is the non-protected reference of a benchmark: the median
// time of the float32 brute-force search over the first ids rows of data
// (d columns) for up to 10 of the queries that follow them.
func FloatReference(d int, data []float32, ids, queries int) (float64, error) {
	fdb, err := baseline.NewFloatDBFrom(d, data[:ids*d])
	if err != nil {
		return 0, err
	}
	var flat []float64
	for q := range min(queries, 10) {
		t0 := time.Now()
		if _, err := fdb.Search(data[(ids+q)*d:(ids+q+1)*d], 1); err != nil {
			return 0, err
		}
		flat = append(flat, Millis(time.Since(t0)))
	}
	return Median(flat), nil
}

// WireFloor is the median time to move n bytes in one stream over the
// idface QUIC transport on loopback, both ends in this process.
func WireFloor(ctx context.Context, n, reps int) (float64, error) {
	mk := func(name string) (tls.Certificate, string, error) {
		id, err := quicnet.GenerateIdentity(name)
		if err != nil {
			return tls.Certificate{}, "", err
		}
		c, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
		return c, id.Pin, err
	}
	srv, srvPin, err := mk("server")
	if err != nil {
		return 0, err
	}
	cli, cliPin, err := mk("client")
	if err != nil {
		return 0, err
	}
	ln, err := quicnet.Listen("127.0.0.1:0", srv, quicnet.Pins{cliPin: {Name: "client", Role: network.RoleOperator}}, quicnet.ListenOptions{Version: protocol.Version}, slog.New(slog.DiscardHandler))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	payload := make([]uint64, (n+7)/8)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go ln.Serve(sctx, func(ctx context.Context, s *network.Stream) {
		if _, err := s.ReadFrame(16); err == nil {
			s.WriteWords(payload)
		}
	})
	d := quicnet.NewDialer(cli, func(string) (string, []string, bool) { return ln.Addr(), []string{srvPin}, true }, protocol.Version)
	defer d.Close()
	buf := make([]uint64, len(payload))
	var times []float64
	for range reps {
		t0 := time.Now()
		s, err := d.Open(ctx, "server")
		if err != nil {
			return 0, err
		}
		s.WriteFrame([]byte("go"))
		s.CloseWrite()
		if err := s.ReadWords(buf); err != nil {
			return 0, err
		}
		s.Finish()
		times = append(times, Millis(time.Since(t0)))
	}
	return Median(times), nil
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// SetLatencies records the identify latencies (ms) of a run: p50, p90, min.
func (res *BenchResult) SetLatencies(lat []float64) {
	sum := 0.0
	for _, l := range lat {
		sum += l
	}
	if sum > 0 { // one client, one identify at a time; concurrentRate measures more
		res.IdentifyPerS = 1000 * float64(len(lat)) / sum
	}
	res.IdentifyP50, res.IdentifyP90, res.IdentifyMin = Median(lat), quantile(lat, 0.9), slices.Min(lat)
}

// Complete fills the fields every mode's result reports alike (bench's
// table of modes) from what the run measured: bytes per row, and the
// float32 search's rate one query at a time.
func (res *BenchResult) Complete() {
	if res.IDs > 0 {
		res.BytesPerRow = res.BytesPerIdent / float64(res.IDs)
	}
	if res.PlainFloatP50 > 0 {
		res.PlainFloatPerS = 1000 / res.PlainFloatP50
	}
	if res.Clients == 0 {
		res.Clients = 1
	}
}

// Median of a sample (the sample is sorted in place).
func Median(v []float64) float64 { return quantile(v, 0.5) }

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// HostModel is this machine's processor model (/proc/cpuinfo), for the
// record of a measurement; "" where it cannot be read.
func HostModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// RSSMB reads a process's resident set from /proc.
func RSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return math.NaN()
}

// concurrentRate runs clients clients at once, each with its own
// connection identifying queries probes (probe(q) for q = i, i+clients,
// ...), and returns the identifications per second over all of them.
func concurrentRate(ctx context.Context, cfg *config.Params, clients, queries int, probe func(q int) []float32, down string) (float64, error) {
	// A client per connection, unless one entry would get more of them
	// than a certificate may open (config.Limits: the bench's own client
	// holds one too); then the clients of an entry share one connection,
	// each identify on its own stream. A server down is no client's
	// entry: the first query after the kill measures finding it dead.
	var entries []string
	for _, m := range cfg.Parties() {
		if m.Name != down {
			entries = append(entries, m.Name)
		}
	}
	n, mu := clients, len(entries)
	if (clients+mu-1)/mu >= cfg.Limits().ConnsPerPeer {
		n = mu
	}
	conns := make([]*client.Client, n)
	for i := range conns {
		cl, err := cluster.Client(cfg, "", entries[i%mu])
		if err != nil {
			return 0, err
		}
		defer cl.Close()
		conns[i] = cl
	}
	var wg sync.WaitGroup
	errs := make([]error, clients)
	start := time.Now()
	for i := range clients {
		cl := conns[i%n]
		wg.Go(func() {
			for j := range queries {
				if _, err := cl.Identify(ctx, probe(i+j*clients), 1); err != nil {
					errs[i] = fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(clients*queries) / el, nil
}
