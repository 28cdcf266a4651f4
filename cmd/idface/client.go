package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/internal/home"
	"github.com/idface/idface/internal/npy"
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
		timeout: fs.Duration("timeout", 60*time.Second, "deadline of one request"),
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
	Score      *int        `json:"score"`
	Cosine     *float64    `json:"cosine"`
	Accepted   bool        `json:"accepted"`
	BytesSent  uint64      `json:"bytes_sent"`
	BytesRecv  uint64      `json:"bytes_received"`
	BytesTotal uint64      `json:"bytes_total"`
	Ms         float64     `json:"ms"`
	Candidates []candidate `json:"candidates,omitempty"`
}

type candidate struct {
	ID     string   `json:"id"`
	Score  *int     `json:"score"`
	Cosine *float64 `json:"cosine"`
}

func cmdIdentify(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("identify", "idface identify --cluster DIR --templates Q.npy [--top K] [--json]\n\n"+
		"Identifies every template of Q.npy against the enrolled database. With --json\n"+
		"one object per query per line: query, id (null if rejected or empty), score,\n"+
		"cosine (null unless the cluster reveals scores), accepted, bytes_sent,\n"+
		"bytes_received (the entry's application bytes to and from the other\n"+
		"servers), bytes_total (every server-to-server byte of the query; in blind\n"+
		"mode also the helpers' and the decider's) and ms.", stderr)
	cf := addClientFlags(fs)
	tmpls := fs.String("templates", "", ".npy with one query template per row")
	top := fs.Int("top", 1, "candidates per query")
	asJSON := fs.Bool("json", false, "JSON lines output")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "templates"); err != nil {
		return err
	}
	if *top < 1 || *top > protocol.MaxTopK {
		return fmt.Errorf("--top %d: want 1..%d", *top, protocol.MaxTopK)
	}
	m, err := npy.ReadFile(*tmpls)
	if err != nil {
		return err
	}
	cfg, cl, err := cf.open()
	if err != nil {
		return err
	}
	defer cl.Close()
	if m.Cols != cfg.Dim() {
		return fmt.Errorf("%s: templates have dimension %d, the cluster uses %d", *tmpls, m.Cols, cfg.Dim())
	}
	enc := json.NewEncoder(stdout)
	if !*asJSON {
		fmt.Fprintf(stdout, "%6s  %-24s %6s %7s  %-8s %10s %8s\n", "query", "id", "score", "cosine", "decision", "bytes", "ms")
	}
	for i := 0; i < m.Rows; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), *cf.timeout)
		start := time.Now()
		r, err := cl.Identify(ctx, m.RowF32(i, nil), *top)
		ms := float64(time.Since(start).Microseconds()) / 1000
		cancel()
		if err != nil {
			return fmt.Errorf("query %d: %w", i, err)
		}
		line := identifyLine{Query: i, Accepted: r.Accepted, BytesSent: r.BytesSent, BytesRecv: r.BytesRecv, BytesTotal: r.BytesTotal, Ms: ms}
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
		if *top == 1 {
			line.Candidates = nil
		}
		if *asJSON {
			if err := enc.Encode(line); err != nil {
				return err
			}
			continue
		}
		id, dec, score, cos := "-", "reject", "-", "-"
		if line.ID != nil {
			id, dec = *line.ID, "accept"
		}
		if line.Score != nil {
			score, cos = fmt.Sprint(*line.Score), fmt.Sprintf("%.3f", *line.Cosine)
		}
		fmt.Fprintf(stdout, "%6d  %-24s %6s %7s  %-8s %10d %8.1f\n", i, id, score, cos, dec, r.BytesTotal, ms)
		for _, c := range line.Candidates {
			if c.Score != nil {
				fmt.Fprintf(stdout, "%6s    %-22s %6d %7.3f\n", "", c.ID, *c.Score, *c.Cosine)
			} else {
				fmt.Fprintf(stdout, "%6s    %-22s\n", "", c.ID)
			}
		}
	}
	return nil
}
