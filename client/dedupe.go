package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/template"
)

// Duplicate is an item not enrolled because its template matches a
// person enrolled already, or an earlier item of the same batch: the
// ABIS "insert" that searches before it adds. No score is reported, only
// the decision the threshold makes.
type Duplicate struct {
	Item    int    // the item's index in the input
	ID      string // the id it would have been enrolled under
	Matched string // the enrolled id, or the earlier item's id, it matched
	InBatch bool   // Matched is an earlier item of the batch, not an enrolled id
}

func (d Duplicate) String() string {
	if d.InBatch {
		return fmt.Sprintf("%q not enrolled: the same person as %q earlier in this input", d.ID, d.Matched)
	}
	return fmt.Sprintf("%q not enrolled: the same person as the enrolled id %q", d.ID, d.Matched)
}

// dedupeInFlight is how many identifications a dedupe keeps in flight:
// enough for the entry to batch them.
const dedupeInFlight = 8

// Dedupe splits a batch into the items to enroll and the duplicates.
// Each template is identified against the gallery through the cluster's
// protected search, as any identification (the servers learn what they
// learn of any query; this client the accepted id, never a score), and
// compared with the earlier kept items of the batch here, in the clear,
// under the cluster's transforms and threshold (this client holds the
// templates anyway). idx are the items' indices in the input (reported
// in Duplicate.Item). Items of earlier batches are in the gallery by
// then; an enrollment running at the same time through another client
// is not seen (the search and the enrollment are not one transaction).
func (c *Client) Dedupe(ctx context.Context, idx []int, items []protocol.Item, timeout time.Duration) (keepIdx []int, keep []protocol.Item, dups []Duplicate, err error) {
	keepIdx, keep, dups, _, err = c.dedupe(ctx, idx, items, timeout, false)
	return keepIdx, keep, dups, err
}

// dedupe is Dedupe; with enrollRefused an item whose search was refused
// for a failed check of its hidden probe is kept, unchecked (listed in
// unchecked by its index in the input), instead of failing the dedupe.
func (c *Client) dedupe(ctx context.Context, idx []int, items []protocol.Item, timeout time.Duration, enrollRefused bool) (keepIdx []int, keep []protocol.Item, dups []Duplicate, unchecked []int, err error) {
	matched := make([]string, len(items))
	refused := make([]bool, len(items))
	errs := make([]error, len(items))
	sem := make(chan struct{}, dedupeInFlight)
	var wg sync.WaitGroup
	for i, it := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			a, err := c.Identify(cctx, it.Template, 1)
			switch {
			case err != nil && enrollRefused && protocol.IsRefusedHidden(err):
				refused[i] = true
			case err != nil:
				errs[i] = fmt.Errorf("searching the gallery for %q before enrolling it: %w", it.ID, err)
			case a.Accepted && len(a.Candidates) > 0:
				matched[i] = a.Candidates[0].ID
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, nil, nil, err
		}
	}
	sc, err := newPlainScorer(c.p)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var keptG [][]int8 // the gallery transforms of the kept items
	for i, it := range items {
		if matched[i] != "" {
			dups = append(dups, Duplicate{Item: idx[i], ID: it.ID, Matched: matched[i]})
			continue
		}
		g, q, err := sc.transforms(it.Template)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("item %q: %w", it.ID, err)
		}
		if k := sc.match(q, keptG); k >= 0 {
			dups = append(dups, Duplicate{Item: idx[i], ID: it.ID, Matched: keep[k].ID, InBatch: true})
			continue
		}
		keptG = append(keptG, g)
		keepIdx, keep = append(keepIdx, idx[i]), append(keep, it)
		if refused[i] {
			unchecked = append(unchecked, idx[i])
		}
	}
	return keepIdx, keep, dups, unchecked, nil
}

// plainScorer scores two templates as the cluster does: <G(x), Q(y)>
// under the gallery and query transforms, accepted from the threshold.
type plainScorer struct {
	g, q      *template.LevelTransformer
	threshold int
}

func newPlainScorer(p *config.Params) (*plainScorer, error) {
	gl, ql := p.GalleryLevels(), p.QueryLevels()
	if gl.L() == 0 { // the paper's T_alpha and T_beta
		gl = template.TernaryLevels(p.Alpha())
	}
	if ql.L() == 0 {
		ql = template.TernaryLevels(p.Beta())
	}
	g, err := template.NewLevelTransformer(p.Dim(), gl)
	if err != nil {
		return nil, err
	}
	q, err := template.NewLevelTransformer(p.Dim(), ql)
	if err != nil {
		return nil, err
	}
	return &plainScorer{g: g, q: q, threshold: p.Threshold()}, nil
}

func (s *plainScorer) transforms(x []float32) (g, q []int8, err error) {
	g, q = make([]int8, len(x)), make([]int8, len(x))
	if err := template.ApplyLevels(s.g, x, g); err != nil {
		return nil, nil, err
	}
	if err := template.ApplyLevels(s.q, x, q); err != nil {
		return nil, nil, err
	}
	return g, q, nil
}

// match returns the first of gs that q's score reaches the threshold
// with, or -1.
func (s *plainScorer) match(q []int8, gs [][]int8) int {
	var nz []int // the query's support: T_beta is sparse
	for j, v := range q {
		if v != 0 {
			nz = append(nz, j)
		}
	}
	for k, g := range gs {
		score := 0
		for _, j := range nz {
			score += int(g[j]) * int(q[j])
		}
		if score >= s.threshold {
			return k
		}
	}
	return -1
}
