package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/idface/idface/abis"
	"github.com/idface/idface/config"
	"github.com/idface/idface/host/input"
)

func init() {
	register("abis", "serve MOSIP's ABIS API (1.1) on a message broker's queues (STOMP 1.2, ActiveMQ)", cmdABIS)
}

func cmdABIS(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "fixture" {
		return cmdABISFixture(args[1:], stdout, stderr)
	}
	fs := newFlags("abis", "idface abis --cluster DIR [--client NAME] --broker HOST:PORT --user U --password-file F --inbound QUEUE --outbound QUEUE --journal FILE (--extractor CMD | --fixture-extractor)\n"+
		"idface abis fixture --templates X.npy --ids ids.txt --out DIR\n\n"+
		"Puts the cluster behind MOSIP's ABIS API (docs/ABIS.md): requests\n"+
		"(mosip.abis.insert, identify, delete, ping, pendingJobs, referenceCount)\n"+
		"are read from --inbound and answered on --outbound of a STOMP 1.2 broker\n"+
		"(ActiveMQ's STOMP connector). Each request is answered once: the answer\n"+
		"is written to --journal (fsync) before it is sent, and sent in the same\n"+
		"broker transaction that acknowledges the request; a redelivered request\n"+
		"gets its recorded answer. The biometric data is fetched from the\n"+
		"request's referenceURL (a CBEFF document; https, or http with\n"+
		"--allow-http), its one face record handed to --extractor CMD on stdin,\n"+
		"which writes the template (a JSON array or a .npy row) on stdout and\n"+
		"exits 3 when it finds no usable face. No template is kept on disk: an\n"+
		"inserted record's template stays in memory (--recent of them, at most\n"+
		"10 minutes) for MOSIP's identify by its referenceId (its dedupe); any\n"+
		"other identify by referenceId fetches the record's referenceURL again.\n"+
		"The member must be an operator (it enrolls and deletes).\n\n"+
		"--fixture-extractor reads the templates that 'idface abis fixture' wrote\n"+
		"into fake ISO/IEC 19794-5 records: for tests and the demo, never faces.", stderr)
	cf := addClientFlags(fs)
	broker := fs.String("broker", "", "HOST:PORT of the broker's STOMP connector")
	brokerTLS := fs.Bool("broker-tls", false, "reach the broker over TLS (ActiveMQ's stomp+ssl connector), verifying its certificate against the system's roots or --broker-ca")
	brokerCA := fs.String("broker-ca", "", "with --broker-tls: a PEM file of the CA certificates to trust for the broker instead of the system's")
	brokerCert := fs.String("broker-cert", "", "with --broker-tls: a PEM certificate to present to the broker (with --broker-key), where it asks for one")
	brokerKey := fs.String("broker-key", "", "with --broker-tls: the PEM private key of --broker-cert")
	user := fs.String("user", "", "broker user")
	passFile := fs.String("password-file", "", "a file holding the broker password (one line)")
	inbound := fs.String("inbound", "", "the queue MOSIP sends requests to (e.g. /queue/ctk-to-abis)")
	outbound := fs.String("outbound", "", "the queue MOSIP reads answers from (e.g. /queue/abis-to-ctk)")
	journal := fs.String("journal", "", "the adapter's durable record of what it answered (created if absent)")
	inFlight := fs.Int("in-flight", 8, "requests held at once; the rest wait at the broker")
	bytesMsg := fs.Bool("bytes", false, "send answers as bytes messages (default text messages)")
	extractor := fs.String("extractor", "", "the command that turns a face record into a template (split on spaces)")
	extractTimeout := fs.Duration("extractor-timeout", 30*time.Second, "time one extraction may take")
	fixture := fs.Bool("fixture-extractor", false, "read fixture records (tests and the demo only)")
	allowHTTP := fs.Bool("allow-http", false, "accept http:// referenceURLs (default https only)")
	tokenFile := fs.String("token-file", "", "a file holding MOSIP's JWT, sent as the Authorization cookie (read at every fetch)")
	fetchTimeout := fs.Duration("fetch-timeout", 30*time.Second, "time one referenceURL fetch may take")
	recentN := fs.Int("recent", 1024, "inserted records' templates kept in memory (never on disk) until MOSIP's identify by their referenceId, at most 10 minutes; 0: none (fetch and extract again)")
	maxCBEFF := fs.Int64("max-cbeff", abis.MaxCBEFF, "largest CBEFF document fetched, in bytes")
	var shareKeys []string
	fs.Func("datashare-key", "a PEM file of this ABIS partner's RSA private key and its certificate: every referenceURL then holds MOSIP's encrypted data share, opened with it (repeat the flag for a key being rotated in)", func(v string) error {
		shareKeys = append(shareKeys, v)
		return nil
	})
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "broker", "inbound", "outbound", "journal"); err != nil {
		return err
	}
	x, err := abisExtractor(*fixture, *extractor, *extractTimeout)
	if err != nil {
		return err
	}
	pass, err := readPassword(*passFile)
	if err != nil {
		return err
	}
	btls, err := brokerTLSConfig(*brokerTLS, *brokerCA, *brokerCert, *brokerKey)
	if err != nil {
		return err
	}
	cfg, h, cl, err := cf.openHome()
	if err != nil {
		return err
	}
	defer cl.Close()
	if me, _ := cfg.Client(h.Self.Name); config.ClientRole(me) != config.RoleOperator {
		return fmt.Errorf("%s is a device: the ABIS adapter enrolls and deletes, so it runs as an operator (--client)", h.Self.Name)
	}
	j, err := abis.OpenJournal(*journal)
	if err != nil {
		return err
	}
	defer j.Close()
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("abis", h.Self.Name)
	j.Warn = log.Warn
	f := &abis.Fetcher{Timeout: *fetchTimeout, MaxBytes: *maxCBEFF, AllowHTTP: *allowHTTP, TokenFile: *tokenFile}
	if len(shareKeys) > 0 {
		if f.Keys, err = abis.LoadDataShareKeys(shareKeys...); err != nil {
			return err
		}
	}
	a := abis.New(cl, j, f, x, abisOptions(cfg, *cf.timeout, log, *recentN))
	b := abis.Broker{Addr: *broker, User: *user, Password: pass, Inbound: *inbound, Outbound: *outbound, InFlight: *inFlight, Bytes: *bytesMsg, TLS: btls}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "idface abis: %s through %s, %s -> %s at %s (%s)\n", h.Self.Name, cl.Entry(), *inbound, *outbound, *broker, b.Transport())
	serveBroker(ctx, a, b, log)
	return nil
}

// abisOptions are the adapter's options for the cluster cfg: its layout,
// the calibration that maps targetFPIR to thresholds (a synthetic default
// says nothing of MOSIP's features: no targetFPIR is served on it), and
// recent inserted templates kept in memory (none where recent <= 0).
func abisOptions(cfg *config.Params, timeout time.Duration, log *slog.Logger, recent int) abis.Options {
	o := abis.Options{Dim: cfg.Dim(), MaxTopK: cfg.MaxTopK(), Shards: cfg.Shards(), Timeout: timeout, Log: log, Recent: recent}
	if recent <= 0 {
		o.Recent = -1
	}
	if c, ok := cfg.Calibration(); ok && c.Synthetic == "" {
		o.Calibration = &c
	}
	return o
}

// abisExtractor is the extractor the flags choose: the fixture's, or the
// command extractor (split on spaces).
func abisExtractor(fixture bool, extractor string, timeout time.Duration) (abis.Extractor, error) {
	switch {
	case fixture && extractor != "":
		return nil, errors.New("--extractor and --fixture-extractor: give one")
	case fixture:
		return abis.FixtureExtractor{}, nil
	case extractor != "":
		return &abis.CommandExtractor{Argv: strings.Fields(extractor), Timeout: timeout}, nil
	}
	return nil, errors.New("give --extractor CMD (a face model; docs/ABIS.md), or --fixture-extractor for tests")
}

// brokerTLSConfig is the TLS configuration the --broker-* flags give (nil:
// plain TCP).
func brokerTLSConfig(on bool, caFile, certFile, keyFile string) (*tls.Config, error) {
	if !on {
		if caFile != "" || certFile != "" || keyFile != "" {
			return nil, errors.New("--broker-ca, --broker-cert and --broker-key are for a TLS connection: add --broker-tls")
		}
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--broker-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--broker-ca %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--broker-cert and --broker-key go together: give both or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--broker-cert/--broker-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// readPassword reads the broker password from the first line of path
// ("" without a file).
func readPassword(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// serveBroker serves the broker's requests until ctx ends, connecting
// again after a lost connection (waiting from 1 s, doubling up to 30 s;
// a connection that lasted a minute starts again at 1 s).
func serveBroker(ctx context.Context, a *abis.Adapter, b abis.Broker, log *slog.Logger) {
	wait := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := a.Serve(ctx, b)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > time.Minute {
			wait = time.Second
		}
		log.Warn("abis: broker connection ended; reconnecting", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// cmdABISFixture writes one fixture CBEFF document per template: DIR/ID.xml.
func cmdABISFixture(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("abis fixture", "idface abis fixture --templates X.npy --ids ids.txt --out DIR\n\n"+
		"Writes DIR/ID.xml for every template: a CBEFF document with one face BIR\n"+
		"whose ISO/IEC 19794-5 record carries the template instead of an image,\n"+
		"which 'idface abis --fixture-extractor' reads (tests and the demo only;\n"+
		"docs/ABIS.md). Ids become file names ('person-0/sample-0' is\n"+
		"DIR/person-0/sample-0.xml).", stderr)
	tmpls := fs.String("templates", "", "templates (.npy, CSV or JSON lines)")
	idsPath := fs.String("ids", "", "one id per line")
	out := fs.String("out", "", "directory to write")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "templates", "ids", "out"); err != nil {
		return err
	}
	tm, err := input.ReadTemplates(*tmpls, 0)
	if err != nil {
		return err
	}
	ids, _, err := input.ReadIDs(*idsPath)
	if err != nil {
		return err
	}
	if len(ids) != tm.Rows() {
		return fmt.Errorf("%d ids for %d templates", len(ids), tm.Rows())
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for i, id := range ids {
		if !filepath.IsLocal(filepath.FromSlash(id)) || strings.Contains(id, `\`) {
			return fmt.Errorf("id %q cannot be a file name below --out", id)
		}
		doc, err := abis.FixtureCBEFF(tm.Row(i, nil))
		if err != nil {
			return err
		}
		path := filepath.Join(*out, filepath.FromSlash(id)+".xml")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote %d fixture CBEFF documents to %s\n", len(ids), *out)
	return nil
}
