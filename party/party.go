// Package party is a running idface server: it holds one party's XOR
// shares durably (write-ahead log) in column-major stores, coordinates
// enrollment and deletion with two-phase commit, and answers
// identification as the entry (transform, broadcast, XOR and score) or as a
// helper (gather and stream its selected columns). It glues protocol,
// transport and sharing together; see docs/SECURITY.md for what it sees.
package party

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
	"github.com/idface/idface/transport"
)

// Party is one server of a 2PC/MPC cluster.
type Party struct {
	cfg    *Config
	self   int
	name   string
	log    *slog.Logger
	st     *state
	wal    *wal
	dialer *transport.Dialer

	txnMu  sync.Mutex // serialises the transactions this party originates
	outbox *outbox    // decisions not yet acknowledged, per party

	trPool  sync.Pool // *template.Transformer for beta (queries)
	ln      *transport.Listener
	m       metrics
	started time.Time
}

// Open loads the party's identity and replays its log.
func Open(cfg *Config, name string, log *slog.Logger) (*Party, error) {
	self := cfg.PartyIndex(name)
	if self < 0 {
		return nil, fmt.Errorf("party %q is not in %s", name, filepath.Join(cfg.Dir(), ConfigFile))
	}
	me := cfg.Parties[self]
	cert, pin, err := transport.LoadCertificate(cfg.Path(me.Cert), cfg.Path(me.Key))
	if err != nil {
		return nil, err
	}
	if pin != me.Pin {
		return nil, fmt.Errorf("party %s: certificate %s does not match the pin in the cluster config", name, me.Cert)
	}
	st, err := newState(cfg.Dim, cfg.Mu())
	if err != nil {
		return nil, err
	}
	p := &Party{cfg: cfg, self: self, name: name, log: log, st: st,
		dialer: transport.NewDialer(cert), started: time.Now()}
	p.outbox = newOutbox(cfg.Parties, p.dialer, log)
	p.trPool.New = func() any {
		tr, _ := template.NewTransformer(cfg.Dim, cfg.Beta)
		return tr
	}
	dir := p.DataDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	var lastOwn *protocol.Prepare
	var lastOwnDecided bool
	var lastOwnCommit bool
	w, cut, err := openWAL(filepath.Join(dir, "shares.wal"), func(b []byte) error {
		m, err := protocol.Decode(b)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *protocol.Prepare:
			st.pending[m.Txn] = m
			if int(m.Origin) == self {
				lastOwn, lastOwnDecided = m, false
			}
		case *protocol.Decide:
			if _, err := st.decide(m.Txn, m.Commit); err != nil {
				return err
			}
			if lastOwn != nil && m.Txn == lastOwn.Txn {
				lastOwnDecided, lastOwnCommit = true, m.Commit
			}
		default:
			return fmt.Errorf("unexpected %T in the log", m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.wal = w
	if cut > 0 {
		log.Warn("cut a torn record off the end of the log (crash during a write)", "bytes", cut)
	}
	// Our own last transaction: re-send its decision to everyone; if we
	// crashed before deciding, the decision is abort (presumed abort).
	if lastOwn != nil {
		if !lastOwnDecided {
			d := &protocol.Decide{Txn: lastOwn.Txn, Origin: uint8(self), Commit: false}
			if err := p.wal.append(protocol.Marshal(d)); err != nil {
				return nil, err
			}
			st.decide(d.Txn, false)
			log.Info("aborted an enrollment left undecided by a crash")
		}
		for k := range cfg.Parties {
			if k != self {
				p.outbox.q[k] = append(p.outbox.q[k], &protocol.Decide{Txn: lastOwn.Txn, Origin: uint8(self), Commit: lastOwnDecided && lastOwnCommit})
			}
		}
	}
	g := st.digest()
	rows, live := 0, 0
	for _, s := range g {
		rows += int(s.Rows)
		live += int(s.Live)
	}
	log.Info("store loaded", "rows", rows, "live", live, "in_doubt", len(st.pending), "log_bytes", w.size, "took", time.Since(start).Round(time.Millisecond))
	return p, nil
}

// DataDir is where the party keeps its log.
func (p *Party) DataDir() string { return filepath.Join(p.cfg.Dir(), "data", p.name) }

// Serve listens on the party's address until ctx ends.
func (p *Party) Serve(ctx context.Context) error {
	me := p.cfg.Parties[p.self]
	cert, _, err := transport.LoadCertificate(p.cfg.Path(me.Cert), p.cfg.Path(me.Key))
	if err != nil {
		return err
	}
	ln, err := transport.Listen(me.Addr, cert, p.cfg.Pins(), p.log)
	if err != nil {
		return err
	}
	p.ln = ln
	go p.outbox.loop(ctx, &p.txnMu)
	p.log.Info("serving", "addr", ln.Addr().String(), "mode", p.cfg.Mode, "mu", p.cfg.Mu())
	go func() { <-ctx.Done(); ln.Close() }()
	return ln.Serve(ctx, p.handle)
}

// Close releases the log and connections.
func (p *Party) Close() error {
	p.dialer.Close()
	return p.wal.close()
}

// handle serves one request stream.
func (p *Party) handle(ctx context.Context, s *transport.Stream) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.cfg.Timeout))
	defer cancel()
	s.SetDeadline(time.Now().Add(time.Duration(p.cfg.Timeout)))
	m := readRequest(s)
	if m == nil {
		return
	}
	party := s.Peer.Role == transport.RoleParty
	var resp protocol.Msg
	switch m := m.(type) {
	case *protocol.Health:
		resp = p.health()
	case *protocol.Enroll:
		resp = p.enroll(ctx, m)
	case *protocol.Identify:
		resp = p.identify(ctx, m)
	case *protocol.Delete:
		resp = p.delete(ctx, m, party)
	case *protocol.Prepare:
		resp = p.onlyParties(party, func() protocol.Msg { return p.prepare(m) })
	case *protocol.Decide:
		resp = p.onlyParties(party, func() protocol.Msg { return p.onDecide(m) })
	case *protocol.Query:
		if !party {
			resp = protocol.Errorf(protocol.CodeForbidden, "queries come from parties only")
			break
		}
		if err := p.serveQuery(ctx, s, m); err != nil {
			p.reply(s, err)
		}
		return
	default:
		resp = protocol.Errorf(protocol.CodeBadRequest, "unexpected %T as a request", m)
	}
	p.reply(s, resp)
}

func (p *Party) onlyParties(party bool, f func() protocol.Msg) protocol.Msg {
	if !party {
		return protocol.Errorf(protocol.CodeForbidden, "only parties of the cluster may send this")
	}
	return f()
}

func (p *Party) reply(s *transport.Stream, m protocol.Msg) {
	if err := s.WriteFrame(protocol.Marshal(m)); err != nil {
		p.log.Debug("reply not delivered", "to", s.Peer.Name, "err", err)
	}
}

// health reports the row map and how many transactions are unsettled: not
// yet decided here, or decided here but not yet acknowledged by a party.
func (p *Party) health() protocol.Msg {
	undelivered := p.outbox.len()
	p.st.mu.RLock()
	defer p.st.mu.RUnlock()
	return &protocol.HealthOK{Name: p.name, Mode: p.cfg.Mode, Digest: p.st.digest(), InDoubt: uint32(len(p.st.pending) + undelivered)}
}

// fatal stops the process when the log cannot be written: continuing could
// acknowledge what is not durable, or diverge from the other parties.
func (p *Party) fatal(err error) {
	p.log.Error("cannot write the log; stopping", "err", err)
	os.Exit(3)
}

// call sends one request to party k and returns its decoded reply; an Error
// reply is returned as a *protocol.Error.
func call(ctx context.Context, d *transport.Dialer, to Member, req protocol.Msg) (protocol.Msg, *transport.Stream, error) {
	s, err := d.Open(ctx, to.Name, to.Addr, to.Pin)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	defer s.Finish()
	if err := s.WriteFrame(protocol.Marshal(req)); err != nil {
		return nil, s, fmt.Errorf("sending to %s: %w", to.Name, err)
	}
	s.CloseWrite() // one request per stream
	b, err := s.ReadFrame(protocol.MaxFrame)
	if err != nil {
		if ctx.Err() != nil {
			return nil, s, fmt.Errorf("%s did not answer in time", to.Name)
		}
		return nil, s, fmt.Errorf("reading from %s: %w", to.Name, err)
	}
	m, err := protocol.Decode(b)
	if err != nil {
		return nil, s, fmt.Errorf("from %s: %w", to.Name, err)
	}
	if e, ok := m.(*protocol.Error); ok {
		return nil, s, e
	}
	return m, s, nil
}

// asError maps any error to a protocol error for the requester.
func asError(err error, code protocol.Code) *protocol.Error {
	var e *protocol.Error
	if errors.As(err, &e) {
		return e
	}
	return protocol.Errorf(code, "%v", err)
}
