package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
)

func init() {
	register("party", "set up a server's own identity on its host: init, rotate, rebuild", cmdParty)
	register("client", "set up a client's own identity on its host: init", cmdClientInit)
}

// memberFlags name a member of a cluster: in a local cluster by directory
// and name, in a deployment by its configuration file and home.
type memberFlags struct {
	dir, name, config, home *string
	data                    *string // a server's data directory, when not HOME/data (withData)
}

// withData adds --data, for the commands that open a server's data.
func (m memberFlags) withData(fs *flag.FlagSet) memberFlags {
	m.data = fs.String("data", "", "the server's data directory, when not HOME/data (with --home; created if missing, its lock file inside); a home installed from a Kubernetes Secret keeps its data on a volume")
	return m
}

func addMemberFlags(fs *flag.FlagSet, nameFlag, nameHelp string) memberFlags {
	return memberFlags{
		dir:    clusterDirFlag(fs, "local cluster directory (with --"+nameFlag+")"),
		name:   fs.String(nameFlag, "", nameHelp),
		config: fs.String("config", "", "cluster configuration file (with --home), instead of --cluster"),
		home:   fs.String("home", "", "this member's home directory (with --config)"),
	}
}

// open loads the configuration and the member's home; local reports a
// local cluster directory (pids and logs of 'cluster up' are there).
func (m memberFlags) open(defaultName string) (*config.Params, *home.Home, bool, error) {
	if m.data != nil && *m.data != "" && *m.home == "" {
		return nil, nil, false, errors.New("--data goes with --config and --home (a local cluster keeps each server's data in its home)")
	}
	switch {
	case *m.dir != "" && *m.config == "" && *m.home == "":
		p, err := config.Load(*m.dir)
		if err != nil {
			return nil, nil, false, err
		}
		name := *m.name
		if name == "" {
			name = defaultName
		}
		if name == "" {
			return nil, nil, false, errors.New("name the server")
		}
		h, err := home.Open(cluster.HomeDir(*m.dir, name))
		return p, h, true, err
	case *m.config != "" && *m.home != "" && *m.dir == "":
		p, err := config.LoadFile(*m.config)
		if err != nil {
			return nil, nil, false, err
		}
		h, err := home.Open(*m.home)
		if err == nil && m.data != nil {
			h.Data = *m.data
		}
		return p, h, false, err
	}
	return nil, nil, false, errors.New("give either --cluster DIR (a local cluster) or --config FILE with --home DIR")
}

func cmdParty(args []string, stdout, stderr io.Writer) error {
	return group("party", []subcommand{
		{"init", "create a server's home: private key, certificate, NAME.pub.json to hand out", partyInit},
		{"rotate", "replace a server's or client's key and write a new NAME.pub.json", partyRotate},
		{"rebuild", "restore a stopped server whose data is gone from the other servers (replicated mode)", partyRebuild},
		{"install", "copy a home (e.g. a mounted Kubernetes Secret) into a private directory to serve from", partyInstall},
		{"shards", "name the addresses of a server's shards in its NAME.pub.json (a sharded cluster)", partyShards},
	}, args, stdout, stderr)
}

func partyShards(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("party shards", "idface party shards --home DIR --shard-addrs HOST:PORT,... | none\n\n"+
		"Records the addresses the others reach this server's shards at (shard 0\n"+
		"first) in its home and NAME.pub.json, for a sharded cluster's\n"+
		"configuration ('cluster assemble --shards N'); 'none' removes them. The\n"+
		"key stays. To change a running cluster's shard count, see 'idface shard\n"+
		"rebalance'.", stderr)
	dir := fs.String("home", "", "the server's home")
	addrs := fs.String("shard-addrs", "", "the shards' addresses, comma-separated, or none")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "home", "shard-addrs"); err != nil {
		return err
	}
	h, err := home.Open(*dir)
	if err != nil {
		return err
	}
	list := strings.Split(*addrs, ",")
	if *addrs == "none" {
		list = nil
	}
	if err := h.SetShards(list); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d shard addresses; hand out %s again\n", h.Self.Name, len(list), h.PubPath())
	return nil
}

func partyRotate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("party rotate", "idface party rotate --home DIR [--stage | --finish]\n\n"+
		"Replaces the member's key and certificate and writes a new NAME.pub.json.\n"+
		"Without a grace period (no flag): the new key at once; assemble the\n"+
		"configuration again with the new descriptor and restart the servers, and\n"+
		"the member is refused until they run it. With a grace period, so that no\n"+
		"identification fails: --stage makes the next key beside the current one\n"+
		"and names it in the descriptor's \"next\" (assemble, restart the servers:\n"+
		"they accept either); --finish makes the next key the member's (restart\n"+
		"the member; assemble again to drop the old one). The previous key stays\n"+
		"in identity.key.previous. A server's seal key stays; a home made before\n"+
		"seal keys gets one.", stderr)
	dir := fs.String("home", "", "home directory")
	stage := fs.Bool("stage", false, "begin a rotation with a grace period: the next key beside the current one")
	finish := fs.Bool("finish", false, "end a staged rotation: the next key becomes the member's")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "home"); err != nil {
		return err
	}
	if *stage && *finish {
		return fmt.Errorf("--stage and --finish are two steps: run them one after the other, with a configuration assembled in between")
	}
	h, err := home.Open(*dir)
	if err != nil {
		return err
	}
	switch {
	case *stage:
		if err := h.Stage(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: next key staged, pin %s (current pin %s stays in use)\nhand out %s, assemble the configuration again and restart the servers; then run 'idface party rotate --finish --home %s'\n", h.Self.Name, h.Self.Next.Pin, h.Self.Pin, h.PubPath(), *dir)
	case *finish:
		if err := h.Finish(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: now uses pin %s\nrestart it (a server) or its client; then hand out %s and assemble again to drop the old pin\n", h.Self.Name, h.Self.Pin, h.PubPath())
	default:
		if err := h.Rotate(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: new key, pin %s\nhand out %s and assemble the configuration again\n", h.Self.Name, h.Self.Pin, h.PubPath())
	}
	return nil
}

func partyInstall(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("party install", "idface party install --from DIR --home DIR\n\n"+
		"Copies the member's home in --from (its key, certificate, seal key and\n"+
		"descriptors; for instance a Kubernetes Secret made from the home, mounted\n"+
		"read-only and group-readable) into --home, each file mode 0600, after\n"+
		"checking the key pair is the one the descriptor names. 'idface deploy\n"+
		"k8s' runs it in each pod's init container, onto memory (docs/DEPLOY.md).", stderr)
	from := fs.String("from", "", "the home to copy")
	dir := fs.String("home", "", "where to put it (created, mode 0700)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "from", "home"); err != nil {
		return err
	}
	h, err := home.Install(*from, *dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s (%s) installed in %s, pin %s\n", h.Self.Name, h.Self.Role, h.Dir, h.Self.Pin)
	return nil
}

func partyInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("party init", "idface party init --home DIR --name NAME --role ROLE --listen HOST:PORT [--advertise HOST:PORT]\n\n"+
		"Creates a server's home on its own host: a private key (mode 0600, never\n"+
		"leaves DIR), a self-signed certificate, a seal key (seal.key, mode 0600:\n"+
		"blind mode's enrollments are sealed to it), and DIR/NAME.pub.json (name,\n"+
		"role, advertised address, certificate, pin, public seal key), the only\n"+
		"file to hand out. ROLE is one of "+serverRoles()+".", stderr)
	dir := fs.String("home", "", "home directory (created)")
	name := fs.String("name", "", "server name, unique in the cluster")
	role := fs.String("role", "", serverRoles())
	listen := fs.String("listen", "", "UDP address to bind")
	advertise := fs.String("advertise", "", "address the others reach it at (default: --listen)")
	metrics := fs.String("metrics-addr", "", "loopback TCP address of this server's Prometheus /metrics, carried into the cluster config (as "+defaultMetricsAddr+"; none by default: then only 'serve --metrics-addr' names one)")
	shardAddrs := fs.String("shard-addrs", "", "in a sharded cluster: the addresses the others reach this server's shards at, comma-separated, shard 0 first ('serve --shard N' binds shard N's; the coordinator binds --listen)")
	force := fs.Bool("force", false, "replace an existing home's key")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "home", "name", "role", "listen"); err != nil {
		return err
	}
	if !config.ServerRole(*role) {
		return fmt.Errorf("--role %q: a server is a %s, %s, %s or %s (clients: idface client init)", *role, config.RoleShareHolder, config.RoleLocalServer, config.RoleKeyServer, config.RoleDecider)
	}
	if *metrics == "none" {
		*metrics = ""
	}
	if *metrics != "" {
		if err := config.CheckLoopback(*metrics); err != nil {
			return fmt.Errorf("--metrics-addr: %w: metrics have no authentication, so the config names loopback only (give a public address with 'idface serve --metrics-addr' if you must)", err)
		}
	}
	h, err := home.Init(*dir, *name, *role, *listen, *advertise, *force)
	if err != nil {
		return err
	}
	if err := h.SetMetrics(*metrics); err != nil {
		return err
	}
	if *shardAddrs != "" {
		if err := h.SetShards(strings.Split(*shardAddrs, ",")); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%s (%s) at %s, pin %s\n", h.Self.Name, h.Self.Role, h.Self.Addr, h.Self.Pin)
	if len(h.Self.Shards) > 0 {
		fmt.Fprintf(stdout, "shards at %s\n", strings.Join(h.Self.Shards, ", "))
	}
	if h.Self.Metrics != "" {
		fmt.Fprintf(stdout, "metrics at http://%s/metrics (on this host)\n", h.Self.Metrics)
	} else {
		fmt.Fprintln(stdout, "no metrics endpoint (serve --metrics-addr names one)")
	}
	fmt.Fprintf(stdout, "hand out %s; keep the rest of %s on this host\n", h.PubPath(), *dir)
	return nil
}

// defaultMetricsAddr is the metrics address the help suggests for a
// deployed server: loopback, since the endpoint has no authentication, and
// one port for all, since each server of a deployment has its own host
// (9464: the port Prometheus exporters of OpenTelemetry use). Not a
// default: servers of a test on one host would all take it.
const defaultMetricsAddr = "127.0.0.1:9464"

func cmdClientInit(args []string, stdout, stderr io.Writer) error {
	return group("client", []subcommand{
		{"init", "create a client's home (device or operator): private key, certificate, NAME.pub.json", clientInit},
	}, args, stdout, stderr)
}

func clientInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("client init", "idface client init --home DIR --name NAME --role device|operator\n\n"+
		"Creates a client's home: its private key (mode 0600), certificate and\n"+
		"DIR/NAME.pub.json to hand to whoever assembles the cluster configuration.\n"+
		"An operator may enroll, delete and identify; a device may only identify.", stderr)
	dir := fs.String("home", "", "home directory (created)")
	name := fs.String("name", "", "client name, unique in the cluster")
	role := fs.String("role", config.RoleDevice, "device or operator")
	force := fs.Bool("force", false, "replace an existing home's key")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "home", "name"); err != nil {
		return err
	}
	if !config.ClientRoleValid(*role) {
		return fmt.Errorf("--role %q: want device or operator", *role)
	}
	h, err := home.Init(*dir, *name, *role, "", "", *force)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s (%s), pin %s\nhand out %s\n", h.Self.Name, h.Self.Role, h.Self.Pin, h.PubPath())
	return nil
}

// flagCheck pairs a flag with whether its value agrees with a file's.
type flagCheck struct {
	flag string
	same bool
}

// differing is the first flag given (in set) whose value disagrees.
func differing(set map[string]bool, checks []flagCheck) (string, bool) {
	for _, c := range checks {
		if set[c.flag] && !c.same {
			return c.flag, true
		}
	}
	return "", false
}

// carryOver makes the settings of a new version of the configuration in
// path: the old literal with the explicitly given replaceable options, the
// same cluster id and the serial raised. A given option that would change
// the servers' data (a transform, the scheme) is refused: the data follows
// the old value.
func carryOver(old, given config.Literal, set map[string]bool, path string) (config.Literal, error) {
	scheme := func(s string) string { return strings.TrimSuffix(s, "bgv") } // "" is bgv
	if f, ok := differing(set, []flagCheck{
		{"mode", given.Mode == old.Mode},
		{"dim", given.Dim == old.Dim},
		{"alpha", given.Alpha == old.Alpha},
		{"beta", given.Beta == old.Beta},
		{"gallery-levels", given.GalleryLevels == old.GalleryLevels},
		{"query-levels", given.QueryLevels == old.QueryLevels},
		{"scheme", scheme(given.Scheme) == scheme(old.Scheme)},
		{"shards", set["reshard"] || max(given.Shards, 1) == max(old.Shards, 1)},
	}); ok {
		return config.Literal{}, fmt.Errorf("--%s differs from %s: the servers' data follows the old value. Leave it out to keep it, or move %s away to start a new cluster", f, path, path)
	}
	lit := old
	if set["tau"] {
		lit.Tau = given.Tau
		lit.Calibration = nil // a tau given by hand replaces the calibrated one
	}
	if set["reveal-scores"] {
		lit.RevealScores = given.RevealScores
	}
	if set["hide-probes"] {
		lit.HideProbes = given.HideProbes
	}
	if set["timeout"] {
		lit.Timeout = given.Timeout
	}
	if set["max-top-k"] {
		lit.MaxTopK = given.MaxTopK
	}
	if set["batch-max"] {
		lit.BatchMax = given.BatchMax
	}
	if set["batch-wait"] {
		lit.BatchWait = given.BatchWait
	}
	if set["reshard"] {
		lit.Shards = given.Shards
	}
	lit.Serial = old.Serial + 1
	return lit, nil
}

// placementKey records the cluster's shard key, from its file or its id
// (either may be ""), in a sharded configuration. A new one needs it; a
// carried-over one keeps the key it records (the rows follow it), and one
// placed by the public cluster id (an earlier build's) takes a key only
// with a new shard count (prevShards is the old one), since only then do
// its rows move ('shard rebalance' places them under the key).
func placementKey(lit *config.Literal, file, idFlag string, carried bool, prevShards int) error {
	id := strings.ToLower(idFlag)
	if file != "" {
		key, err := home.ReadShardKey(file)
		if err != nil {
			return err
		}
		if key == nil {
			return fmt.Errorf("--shard-key %s: no such file ('idface shard key --out %s' makes one)", file, file)
		}
		kid := config.ShardKeyID(key)
		if id != "" && id != kid {
			return fmt.Errorf("--shard-key is key %s, --shard-key-id says %s", kid, id)
		}
		id = kid
	}
	moved := max(lit.Shards, 1) != max(prevShards, 1)
	switch {
	case lit.ShardKeyID != "" && id != "" && id != lit.ShardKeyID:
		return fmt.Errorf("the shard key given is %s, but the configuration places its rows under %s: a cluster keeps its shard key", id, lit.ShardKeyID)
	case lit.ShardKeyID != "":
		return nil
	case id != "" && lit.Shards <= 1:
		return fmt.Errorf("a shard key without --shards: an unsharded cluster places no rows")
	case carried && !moved && id != "":
		return fmt.Errorf("this cluster places its rows by its public cluster id; they move to a shard key only with a new shard count (--reshard --shards N, then 'idface shard rebalance' on every holder)")
	case carried && !moved, lit.Shards <= 1:
		return nil
	case id == "":
		return fmt.Errorf("a sharded configuration needs the cluster's shard key: one of the row-holding organisations makes it ('idface shard key --out shard.key', which prints its id) and copies it into the home of every row-holding server and operator (never the decider's or key server's); give it here with --shard-key FILE, or only its id with --shard-key-id ID (the assembler need not hold the key)")
	}
	lit.ShardKeyID = id
	return nil
}

// clusterAssemble builds a configuration from public descriptors only.
func clusterAssemble(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster assemble", "idface cluster assemble --out cluster.json --mode "+modeNames("|")+" [--dim --alpha --beta --tau ...]\n"+
		"                       [--gallery-levels L:a1,... --query-levels L:a1,...] (mode blind) A.pub.json B.pub.json ...\n\n"+
		"Builds the shared cluster configuration from the members' public\n"+
		"descriptors (servers in the order given; in mode he the first local server\n"+
		"is the sequencer; mode blind needs one decider). Refuses any input that\n"+
		"holds a private key. When --out exists, its cluster id is kept and the\n"+
		"serial raised: a new version of the same cluster (a rotated key, a device\n"+
		"added or removed). Its settings are carried over: options that define the\n"+
		"servers' data (--mode, --dim, --alpha, --beta, the levels, --scheme) must\n"+
		"match it or be left out; --tau, --reveal-scores, --hide-probes, --timeout\n"+
		"and --max-top-k replace the old values when given.\n\n"+
		"The threshold of a new configuration: --calibration (a file from 'idface\n"+
		"calibrate' on your own labelled features), else --tau (a bare cosine),\n"+
		"else the synthetic default of its transform ('cluster init --help').\n"+
		"A new --calibration over an existing file replaces its threshold (then\n"+
		"restart the servers: they read the configuration when they start).", stderr)
	out := fs.String("out", "", "configuration file to write")
	mode := fs.String("mode", "", "the mode: "+modeNames(", ")+"\n"+modeList())
	dim := fs.Int("dim", 0, fmt.Sprintf("template dimension d (default %d)", config.DefaultDim))
	alpha := fs.Int("alpha", 0, "enrollment weight (default floor(2d/3))")
	beta := fs.Int("beta", 0, fmt.Sprintf("query weight (default min(%d, alpha))", config.DefaultBeta))
	tau := tauFlag(fs)
	cal := calibrationFlag(fs)
	reveal := fs.Bool("reveal-scores", false, "research cluster: answers carry scores")
	hide := hideProbesFlag(fs)
	batch := addBatchFlags(fs)
	timeout := fs.Duration("timeout", config.DefaultTimeout, "request timeout between servers")
	topK := fs.Int("max-top-k", config.DefaultMaxTopK, "most candidates one identify may return")
	metrics := fs.String("metrics-addr", "", "loopback /metrics address for the servers whose descriptor names none (each server's descriptor names its own: 'party init --metrics-addr')")
	levels := addLevelFlags(fs)
	scheme := addSchemeFlag(fs)
	shards := fs.Int("shards", 0, "every server runs as a coordinator and this many shards (every mode): each server's descriptor names its shards' addresses ('party init --shard-addrs', 'party shards')")
	reshard := fs.Bool("reshard", false, "with --shards, change the shard count of an existing configuration: every holder moves its data with 'idface shard rebalance --config NEW --previous OLD' before the servers run the new one")
	shardKeyFile := fs.String("shard-key", "", "with --shards: the cluster's shard key file ('idface shard key'), whose id the configuration records; its rows are placed by it, and the helper never holds it")
	shardKeyID := fs.String("shard-key-id", "", "with --shards, instead of --shard-key: the key's id as 'idface shard key' printed it (an assembler that does not hold the key)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := required(fs, "out", "mode"); err != nil {
		return err
	}
	m, err := config.ParseMode(*mode)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("give the members' NAME.pub.json files")
	}
	descs, err := readDescriptors(fs.Args(), *metrics)
	if err != nil {
		return err
	}
	settings := config.Literal{Mode: m, Dim: *dim, Alpha: *alpha, Beta: *beta, Tau: tau, RevealScores: *reveal, HideProbes: *hide,
		BatchMax: *batch.max, BatchWait: config.Duration(*batch.wait),
		Timeout: config.Duration(*timeout), MaxTopK: *topK, GalleryLevels: *levels.gallery, QueryLevels: *levels.query, Scheme: *scheme, Serial: 1, Shards: *shards}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !*reshard {
		delete(set, "reshard")
	}
	if settings, err = assembleSettings(settings, set, *out, *cal); err != nil {
		return err
	}
	prevShards := settings.Shards
	if prev, err := config.LoadFile(*out); err == nil {
		prevShards = prev.Shards()
	}
	if err := placementKey(&settings, *shardKeyFile, *shardKeyID, settings.Serial > 1, prevShards); err != nil {
		return err
	}
	lit, err := config.Assemble(settings, descs)
	if err != nil {
		return err
	}
	if err := config.SaveFile(*out, lit); err != nil {
		return err
	}
	return assembled(*out, stdout)
}

// readDescriptors reads the members' public descriptors, giving servers
// whose descriptor names no metrics address the one given (metrics).
func readDescriptors(paths []string, metrics string) ([]config.Descriptor, error) {
	var descs []config.Descriptor
	for _, path := range paths {
		d, err := home.ReadDescriptor(path)
		if err != nil {
			return nil, err
		}
		if d.Metrics == "" && config.ServerRole(d.Role) {
			d.Metrics = metrics
		}
		descs = append(descs, d)
	}
	return descs, nil
}

// assembleSettings are the settings of the configuration written to out:
// a new version of out's cluster when it exists (its settings carried
// over, set the flags given, a new calibration cal checked against its
// transform), else a new cluster with its threshold from cal, --tau or
// the synthetic default.
func assembleSettings(settings config.Literal, set map[string]bool, out, cal string) (config.Literal, error) {
	prev, err := config.LoadFile(out)
	switch {
	case err == nil:
		if settings, err = carryOver(prev.Literal(), settings, set, out); err != nil {
			return settings, err
		}
		if cal == "" {
			return settings, nil
		}
		before := settings
		if err := applyCalibration(cal, &settings, set); err != nil {
			return settings, err
		}
		if settings.Dim != before.Dim || settings.Alpha != before.Alpha || settings.Beta != before.Beta ||
			settings.GalleryLevels != before.GalleryLevels || settings.QueryLevels != before.QueryLevels {
			return settings, fmt.Errorf("%s calibrates another transform than %s's (the servers' data follows that one): calibrate again with --alpha %d --beta %d", cal, out, before.Alpha, before.Beta)
		}
		return settings, nil
	case !errors.Is(err, os.ErrNotExist):
		return settings, fmt.Errorf("%s exists but cannot be read (%v): move it away to start a new cluster", out, err)
	}
	var id [16]byte
	rand.Read(id[:])
	settings.ClusterID = hex.EncodeToString(id[:])
	switch {
	case cal != "":
		return settings, applyCalibration(cal, &settings, set)
	case !set["tau"]:
		return settings, applyDefaultCalibration(&settings)
	}
	return settings, nil
}

// assembled reports the configuration written to out, and what to check.
func assembled(out string, stdout io.Writer) error {
	p, err := config.LoadFile(out)
	if err != nil {
		return err
	}
	hash := p.Hash()
	fmt.Fprintf(stdout, "%s: mode %s, %d servers, %d clients, serial %d, hash %x\n", filepath.Base(out), p.Mode(), len(p.Servers()), len(p.Clients()), p.Serial(), hash[:8])
	for _, m := range p.Servers() {
		if m.Metrics == "" {
			fmt.Fprintf(stdout, "%s has no metrics address: it serves /metrics only with 'serve --metrics-addr' (or assemble with --metrics-addr %s)\n", m.Name, defaultMetricsAddr)
		}
	}
	fmt.Fprintf(stdout, "check every pin with its owner: idface cluster show %s\n", out)
	return nil
}
