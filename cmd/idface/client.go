package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/host/input"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

func init() {
	register("enroll", "enroll one template or a bulk file at every party", cmdEnroll)
	register("identify", "identify templates (1:N) and print the best ids", cmdIdentify)
	register("delete", "revoke an enrolled id at every party", cmdDelete)
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	member  memberFlags
	entry   *string
	timeout *time.Duration
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		member:  addMemberFlags(fs, "client", "client identity in a local cluster (default: the operator \"client\")"),
		entry:   fs.String("entry", "", "entry server (default: the first party)"),
		timeout: fs.Duration("timeout", 60*time.Second, "deadline of one query; a change (enroll, delete, reshare) waits while its server reports progress, up to this long between reports"),
	}
}

func (c clientFlags) open() (*config.Params, *client.Client, error) {
	cfg, _, cl, err := c.openHome()
	return cfg, cl, err
}

// openHome is open that also returns the member's home.
func (c clientFlags) openHome() (*config.Params, *home.Home, *client.Client, error) {
	cfg, h, _, err := c.member.open("client")
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := client.Open(cfg, h, *c.entry)
	return cfg, h, cl, err
}

// identifyLine is one query's result in --json output.
type identifyLine struct {
	Query      int         `json:"query"`
	ID         *string     `json:"id"`
	Score      *int        `json:"score,omitempty"`  // only where the cluster reveals scores
	Cosine     *float64    `json:"cosine,omitempty"` // likewise
	Accepted   bool        `json:"accepted"`
	BytesSent  uint64      `json:"bytes_sent"`
	BytesRecv  uint64      `json:"bytes_received"`
	BytesTotal uint64      `json:"bytes_total"`
	Ms         float64     `json:"ms"`
	Candidates []candidate `json:"candidates,omitempty"`
	Error      string      `json:"error,omitempty"` // the query failed
	// Degraded: a server was down and the answer skipped the checks it
	// takes part in (replicated mode).
	Degraded bool `json:"degraded,omitempty"`
}

type candidate struct {
	ID     string   `json:"id"`
	Score  *int     `json:"score,omitempty"`
	Cosine *float64 `json:"cosine,omitempty"`
}

func cmdIdentify(args []string, stdout, stderr io.Writer) error {
	o, err := identifyFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, me, cl, err := o.cf.openHome()
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.top > cfg.MaxTopK() {
		return fmt.Errorf("--top %d: this cluster returns at most %d candidates per query (max_top_k in its configuration)", o.top, cfg.MaxTopK())
	}
	tm, err := input.ReadTemplates(o.tmpls, cfg.Dim())
	if err != nil {
		return err
	}
	live, err := entryRows(cl, cfg, me.Self.Role == config.RoleOperator, *o.cf.timeout, stderr)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	if !o.asJSON {
		fmt.Fprintf(stdout, "%6s  %-24s %6s %7s  %-8s %10s %8s\n", "query", "id", "score", "cosine", "decision", "bytes", "ms")
	}
	t := &identifyTally{json: o.asJSON}
	start, last := time.Now(), time.Now()
	for i := range tm.Rows() {
		if o.every > 0 && i > 0 && time.Since(last) >= o.every {
			last = time.Now()
			fmt.Fprintf(stderr, "identify: %d of %d queries done (%s), %.1f ms each\n", i, tm.Rows(), t.progress(), float64(time.Since(start).Microseconds())/1000/float64(i))
		}
		line := identifyLine{Query: i}
		qerr := tm.Check(i)
		var r *protocol.IdentifyOK
		if qerr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), *o.cf.timeout)
			t0 := time.Now()
			r, qerr = cl.Identify(ctx, tm.Row(i, nil), o.top)
			line.Ms = float64(time.Since(t0).Microseconds()) / 1000
			cancel()
			// A server down: the run stops. A query refused by its checks
			// (CodeInconsistent) is that query's: the run goes on, so that
			// how a run ends shows nobody which probe was refused (a
			// hidden probe's verdict is sealed to this client alone).
			if qerr != nil && !isCode(qerr, protocol.CodeBadRequest) && !isCode(qerr, protocol.CodeInconsistent) {
				if t.queries() > 0 {
					fmt.Fprintf(stderr, "idface identify: stopped at query %d; before it %s\n", i, t.summary())
				}
				return fmt.Errorf("query %d: %w", i, qerr)
			}
		}
		if qerr != nil {
			t.failed = append(t.failed, i)
			line.Error = qerr.Error()
			if o.asJSON {
				if err := enc.Encode(line); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(stdout, "%6d  error: %s\n", i, qerr)
			}
			continue
		}
		t.count(r)
		line.fill(r, o.top)
		if o.asJSON {
			if err := enc.Encode(line); err != nil {
				return err
			}
			continue
		}
		line.print(stdout, r)
	}
	out := stdout
	if o.asJSON {
		out = stderr
	}
	fmt.Fprintf(out, "%s (%s)\n", t.summary(), calibrationNow(cfg, live))
	if len(t.failed) > 0 {
		var where []string
		for _, i := range t.failed[:min(10, len(t.failed))] {
			where = append(where, tm.Where(i))
		}
		if len(t.failed) > 10 {
			where = append(where, fmt.Sprintf("and %d more", len(t.failed)-10))
		}
		return fmt.Errorf("%d of %d queries failed (%s of %s); the others were answered", len(t.failed), tm.Rows(), strings.Join(where, ", "), tm.Path)
	}
	return nil
}

// identifyOptions are identify's flags, checked.
type identifyOptions struct {
	cf     clientFlags
	tmpls  string
	top    int
	asJSON bool
	every  time.Duration
}

func identifyFlags(args []string, stderr io.Writer) (*identifyOptions, error) {
	fs := newFlags("identify", "idface identify --cluster DIR --templates Q.npy|Q.csv|Q.jsonl [--top K] [--json] [--progress 10s]\n\n"+
		"Identifies every template of Q against the enrolled database. A template\n"+
		"that cannot be searched (NaN, infinite, all zeros) or that the cluster\n"+
		"refuses fails that query only; the others go on, and the command exits 1\n"+
		"at the end. A server that cannot be reached stops the run. The last line\n"+
		"(on stdout; with --json on stderr) counts the queries accepted, rejected,\n"+
		"failed and answered degraded and says what the threshold means: the\n"+
		"false-positive identification rate it was calibrated for (idface\n"+
		"calibrate), or tau. An operator is warned when more ids are enrolled\n"+
		"than the threshold was calibrated for, with the FPIR to expect (a device\n"+
		"is told no count, so it cannot be warned).\n\n"+
		"With --json one object per query per line: query (the row, from 0), id\n"+
		"(null if rejected or empty), score and cosine (only where the cluster\n"+
		"reveals scores: left out otherwise), accepted, bytes_sent, bytes_received\n"+
		"(the entry's application bytes to and from the other servers),\n"+
		"bytes_total (every server-to-server byte of the query; in blind mode also\n"+
		"the helpers' and the decider's), ms,\n"+
		"degraded (when a share holder was down), candidates (with --top above 1)\n"+
		"and for a failed query error.\n\n"+
		"--top K: unless the cluster reveals scores (cluster init --reveal-scores,\n"+
		"a research cluster), a device and an operator alike get only the\n"+
		"candidates that reach the threshold, ids without scores: mostly one (the\n"+
		"accepted id), none for a rejected query, more only when several enrolled\n"+
		"ids match. A research cluster lists the best K with their scores, below\n"+
		"the threshold too.\n\n"+input.Formats, stderr)
	o := &identifyOptions{cf: addClientFlags(fs)}
	fs.StringVar(&o.tmpls, "templates", "", "one query template per row: .npy, CSV or JSON lines")
	fs.IntVar(&o.top, "top", 1, "candidates per query, at most (1 up to the cluster's max_top_k, 10 by default): only those that reach the threshold, unless the cluster reveals scores (see above)")
	fs.BoolVar(&o.asJSON, "json", false, "JSON lines output")
	fs.DurationVar(&o.every, "progress", 10*time.Second, "report progress on stderr this often (0: never)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := required(fs, "templates"); err != nil {
		return nil, err
	}
	if o.top < 1 || o.top > protocol.MaxTopK {
		return nil, fmt.Errorf("--top %d: want 1..%d", o.top, protocol.MaxTopK)
	}
	return o, nil
}

// entryRows asks the entry for its health before any output (an
// unreachable entry is the run's error, unless the mode answers with a
// party down and another is reached: it becomes the entry), warns of an empty database and
// of more ids than the threshold was calibrated for, and returns the live
// rows an operator is told (-1 for a device, which is told no count).
func entryRows(cl *client.Client, cfg *config.Params, operator bool, timeout time.Duration, stderr io.Writer) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl.Reach(ctx) // with a party down (a mode that answers so), another entry
	h, err := cl.Health(ctx, cl.Entry())
	if err != nil {
		return -1, err
	}
	live := -1
	if operator {
		if n, lerr := liveRows(ctx, cl, cfg, cl.Entry(), h); lerr == nil { // a shard down fails queries, not the count's warnings
			live = n
		}
	}
	if h.Empty || live == 0 {
		fmt.Fprintf(stderr, "idface identify: warning: the database at %s is empty (no id enrolled): every query will be rejected\n", cl.Entry())
	}
	if c, ok := cfg.Calibration(); ok {
		if w := c.Warning(live); w != "" {
			fmt.Fprintf(stderr, "idface identify: warning: %s\n", w)
		}
	}
	return live, nil
}

// identifyTally counts a run's answers.
type identifyTally struct {
	json                         bool
	accepted, rejected, degraded int
	failed                       []int
}

func (t *identifyTally) queries() int { return t.accepted + t.rejected + len(t.failed) }

func (t *identifyTally) count(r *protocol.IdentifyOK) {
	if r.Accepted {
		t.accepted++
	} else {
		t.rejected++
	}
	if r.Degraded {
		t.degraded++ // counted for --json too
	}
}

func (t *identifyTally) progress() string {
	s := fmt.Sprintf("%d accepted / %d rejected / %d failed", t.accepted, t.rejected, len(t.failed))
	if t.degraded > 0 {
		s += fmt.Sprintf("; %d answered degraded", t.degraded)
	}
	return s
}

func (t *identifyTally) summary() string {
	s := fmt.Sprintf("%d queries: %d accepted / %d rejected", t.queries(), t.accepted, t.rejected)
	if len(t.failed) > 0 {
		s += fmt.Sprintf(" / %d failed", len(t.failed))
	}
	if t.degraded > 0 {
		mark := "*"
		if t.json {
			mark = `"degraded": true`
		}
		s += fmt.Sprintf("; %d answered degraded (%s: a share holder was down, so its shares went unchecked; see idface cluster status)", t.degraded, mark)
	}
	return s
}

// fill sets the line from the answer: the decision, bytes, and the
// candidates (their scores where the cluster reveals them; with --top 1
// the best alone).
func (line *identifyLine) fill(r *protocol.IdentifyOK, top int) {
	line.Accepted, line.BytesSent, line.BytesRecv, line.BytesTotal = r.Accepted, r.BytesSent, r.BytesRecv, r.BytesTotal
	line.Degraded = r.Degraded
	for _, c := range r.Candidates {
		cand := candidate{ID: c.ID}
		if !r.ScoresHidden {
			sc, cos := int(c.Score), template.Cosine(int(c.Score), int(r.Alpha), int(r.Beta))
			cand.Score, cand.Cosine = &sc, &cos
		}
		line.Candidates = append(line.Candidates, cand)
	}
	if len(line.Candidates) > 0 {
		best := line.Candidates[0]
		line.Score, line.Cosine = best.Score, best.Cosine // nil in HE mode: the key server reveals rows, not scores
		if r.Accepted {
			line.ID = &best.ID
		}
	}
	if top == 1 {
		line.Candidates = nil
	}
}

// print writes the line as a row of identify's table.
func (line *identifyLine) print(w io.Writer, r *protocol.IdentifyOK) {
	id, dec, score, cos := "-", "reject", "-", "-"
	if line.ID != nil {
		id, dec = *line.ID, "accept"
	}
	if r.Degraded {
		dec += "*" // explained below the table
	}
	if line.Score != nil {
		score, cos = fmt.Sprint(*line.Score), fmt.Sprintf("%.3f", *line.Cosine)
	}
	fmt.Fprintf(w, "%6d  %-24s %6s %7s  %-8s %10d %8.1f\n", line.Query, id, score, cos, dec, r.BytesTotal, line.Ms)
	for _, c := range line.Candidates {
		if c.Score != nil {
			fmt.Fprintf(w, "%6s    %-22s %6d %7.3f\n", "", c.ID, *c.Score, *c.Cosine)
		} else {
			fmt.Fprintf(w, "%6s    %-22s\n", "", c.ID)
		}
	}
}
