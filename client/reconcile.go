package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// The journal's reconciliation with the cluster: what an operator's
// changes are to be sent again, skipped or settled, given what its
// journal recorded of earlier runs (enroll and delete --resume). The
// wording of what it finds is the caller's: it names inputs in the
// user's terms.

// Conflict says why a journal refuses to enroll an id.
type Conflict int

const (
	// EnrolledOther: the id is enrolled with another template.
	EnrolledOther Conflict = iota + 1
	// SentOther: an earlier run sent the id with another template and
	// got no answer.
	SentOther
	// DeletionInDoubt: the id's deletion got no answer.
	DeletionInDoubt
)

// ItemConflict is an item that conflicts with the journal, and why.
type ItemConflict struct {
	Item int
	Why  Conflict
}

// EnrollPlan is what a journal makes of items to enroll, by what it knows
// of their ids. Items are indices into the ids given to PlanEnroll, in
// increasing order.
type EnrollPlan struct {
	// Send are the items to send: the journal knows no enrollment of
	// them that is committed or in doubt.
	Send []int
	// Unsettled (with resume) holds, by the batch that sent them, the
	// items an earlier run sent with the same template and got no answer
	// for: SettleEnrollments finds out whether they were committed.
	Unsettled map[uint64][]int
	// Skipped (with resume) counts the items enrolled with the same
	// template.
	Skipped int
	// Without resume, Again are the items enrolled with the same
	// template and Doubtful those an earlier run sent with it without an
	// answer: either stops the run before anything is sent.
	Again, Doubtful []int
	// Conflicts stop the run before anything is sent, resume or not.
	Conflicts []ItemConflict
}

// PlanEnroll sorts items (ids with the hashes of their templates) by what
// the journal knows of their ids: to send, to settle, or to skip (with
// resume); an id enrolled or sent with another template, or whose
// deletion got no answer, conflicts.
func (j *Journal) PlanEnroll(ids []string, hashes [][16]byte, resume bool) *EnrollPlan {
	p := &EnrollPlan{Unsettled: map[uint64][]int{}}
	for i, x := range ids {
		e := j.Lookup(x)
		switch {
		case e.State == Enrolled && e.Hash == hashes[i]:
			if resume {
				p.Skipped++
			} else {
				p.Again = append(p.Again, i)
			}
		case e.State == Enrolled:
			p.Conflicts = append(p.Conflicts, ItemConflict{i, EnrolledOther})
		case e.State == InDoubt && e.Op == '+' && e.Hash == hashes[i]:
			if resume {
				p.Unsettled[e.Batch] = append(p.Unsettled[e.Batch], i)
			} else {
				p.Doubtful = append(p.Doubtful, i)
			}
		case e.State == InDoubt && e.Op == '+':
			p.Conflicts = append(p.Conflicts, ItemConflict{i, SentOther})
		case e.State == InDoubt:
			p.Conflicts = append(p.Conflicts, ItemConflict{i, DeletionInDoubt})
		default:
			p.Send = append(p.Send, i)
		}
	}
	return p
}

// SettleError is a failure to settle the items an earlier run sent
// without an answer: Err is the cluster's refusal (Refused) or a missing
// answer, ID the first id of the batch that failed.
type SettleError struct {
	ID  string
	Err error
}

func (e *SettleError) Error() string {
	return fmt.Sprintf("settling the ids an earlier run sent without an answer (%q, ...): %v", e.ID, e.Err)
}

func (e *SettleError) Unwrap() error { return e.Err }

// SettleEnrollments finds out, for the batches an earlier run sent
// without an answer (EnrollPlan.Unsettled), whether they were committed,
// and records it in the journal: once the servers have settled every
// transaction (WaitSettled), a batch is atomic, so enrolling its items
// again (item(i) makes the i-th, hashes[i] is its template's hash), batch
// items a request, either succeeds (it was not committed) or finds them
// enrolled (it was). It returns the items enrolled now and those found
// enrolled.
func (c *Client) SettleEnrollments(ctx context.Context, j *Journal, unsettled map[uint64][]int,
	item func(i int) protocol.Item, hashes [][16]byte, batch int, timeout time.Duration) (enrolled, found int, err error) {
	if len(unsettled) == 0 {
		return 0, 0, nil
	}
	if err := c.WaitSettled(ctx, timeout); err != nil {
		return 0, 0, err
	}
	olds := make([]uint64, 0, len(unsettled))
	for b := range unsettled {
		olds = append(olds, b)
	}
	slices.Sort(olds)
	for _, old := range olds {
		idx := unsettled[old]
		for lo := 0; lo < len(idx); lo += batch {
			n, whole, err := c.settleChunk(ctx, j, old, idx[lo:min(lo+batch, len(idx))], item, hashes, timeout)
			if whole { // the earlier batch was committed whole
				found += len(idx) - lo
				lo = len(idx)
			}
			enrolled += n
			if err != nil {
				return enrolled, found, err
			}
		}
	}
	return enrolled, found, nil
}

// settleChunk enrolls again chunk, items of the earlier batch old: it
// returns how many it enrolled now, or whether it found the earlier batch
// committed (whole).
func (c *Client) settleChunk(ctx context.Context, j *Journal, old uint64, chunk []int,
	item func(i int) protocol.Item, hashes [][16]byte, timeout time.Duration) (enrolled int, whole bool, err error) {
	var xs []string
	var hs [][16]byte
	var items []protocol.Item
	for _, i := range chunk {
		it := item(i)
		xs, hs, items = append(xs, it.ID), append(hs, hashes[i]), append(items, it)
	}
	b, err := j.Begin('+', xs, hs)
	if err != nil {
		return 0, false, err
	}
	err = c.Enroll(rpc.Patient(ctx, timeout), items)
	switch {
	case err == nil:
		return len(chunk), false, errors.Join(j.End(b, true), j.End(old, false))
	case hasCode(err, protocol.CodeDuplicate):
		return 0, true, errors.Join(j.End(b, false), j.End(old, true))
	case Refused(err):
		j.End(b, false)
	}
	return 0, false, &SettleError{ID: xs[0], Err: err}
}

func hasCode(err error, c protocol.Code) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == c
}

// WaitSettled waits, up to timeout, until no server that holds rows holds
// an undecided change, so that a change sent without an answer has been
// committed or rolled back.
func (c *Client) WaitSettled(ctx context.Context, timeout time.Duration) error {
	// The servers that hold rows: each party, or in a sharded cluster each
	// of its shards (a coordinator holds no transactions).
	var names []string
	for _, p := range c.p.Parties() {
		if c.p.Shards() == 1 {
			names = append(names, p.Name)
			continue
		}
		for s := range c.p.Shards() {
			names = append(names, config.ShardName(p.Name, s))
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		busy, err := c.unsettled(ctx, names)
		if err != nil || busy == "" {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the servers are still settling earlier changes (%s): try again shortly", busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// unsettled asks each of names whether it holds undecided changes, and
// says where (the last one that does; "" when none does).
func (c *Client) unsettled(ctx context.Context, names []string) (busy string, err error) {
	for _, name := range names {
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		h, err := c.Health(hctx, name)
		cancel()
		if err != nil {
			return "", fmt.Errorf("asking %s whether earlier changes are settled: %w", name, err)
		}
		if h.InDoubt > 0 {
			busy = fmt.Sprintf("%s has %d unsettled changes", name, h.InDoubt)
		}
	}
	return busy, nil
}

// MayChangeJournal is MayChange (refused: its *RoleError, nil when this
// client may send op) that also settles the journal: every server refuses
// such a request on its type, before reading it, so the changes of that
// kind the journal holds without an answer (a run cut off while it wrote
// a large request) were refused too, and the journal records them so.
// n counts their ids; err is a failure to record it.
func (c *Client) MayChangeJournal(j *Journal, op protocol.OpKind) (n int, refused, err error) {
	refused = c.MayChange(op)
	if refused == nil {
		return 0, nil, nil
	}
	kind := byte('+')
	if op == protocol.OpDelete {
		kind = '-'
	}
	n, err = j.RefuseUnanswered(kind)
	if err != nil {
		return 0, refused, errors.Join(refused, err)
	}
	return n, refused, nil
}

// BulkRecord records each batch of an EnrollAll in a journal: Before and
// After are the Bulk's (Bulk.Before, Bulk.After), which a sharded
// cluster's shards call at once.
type BulkRecord struct {
	j       *Journal
	item    func(k int) (id string, hash [16]byte)
	mu      sync.Mutex
	batchOf map[int]uint64 // batches never share an item: the first names it
	err     error
}

// RecordBulk returns the record in j of a bulk enrollment whose k-th item
// has id and the template of hash.
func (j *Journal) RecordBulk(item func(k int) (id string, hash [16]byte)) *BulkRecord {
	return &BulkRecord{j: j, item: item, batchOf: map[int]uint64{}}
}

// Before records a batch about to be sent.
func (r *BulkRecord) Before(batch []int) error {
	var xs []string
	var hs [][16]byte
	for _, k := range batch {
		x, h := r.item(k)
		xs, hs = append(xs, x), append(hs, h)
	}
	b, err := r.j.Begin('+', xs, hs)
	r.mu.Lock()
	r.batchOf[batch[0]] = b
	r.mu.Unlock()
	return err
}

// After records a sent batch's outcome: committed (err nil), or refused
// (Refused(err)); a batch without an answer stays in doubt.
func (r *BulkRecord) After(batch []int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.batchOf[batch[0]]
	var e error
	switch {
	case err == nil:
		e = r.j.End(b, true)
	case Refused(err):
		e = r.j.End(b, false)
	}
	if r.err == nil {
		r.err = e
	}
}

// Err is the first failure to record an outcome.
func (r *BulkRecord) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// DeleteResult is what Deleter.Delete did with an id.
type DeleteResult int

const (
	// DeleteNotSent: nothing was sent; the error (settling earlier
	// changes, or the journal) says why.
	DeleteNotSent DeleteResult = iota
	// DeleteDone: the id was deleted now.
	DeleteDone
	// DeleteSkipped: the id was deleted before: the journal shows it
	// (with resume), or the deletion an earlier run sent without an
	// answer turned out applied.
	DeleteSkipped
	// DeleteKnown: the cluster knows no such id and the journal shows an
	// earlier run deleted it (without resume).
	DeleteKnown
	// DeleteFailed: the cluster refused the deletion (Refused) or did not
	// answer; the error is its.
	DeleteFailed
)

// Deleter deletes ids one at a time and records each deletion in a
// journal; with resume it skips the ids the journal shows deleted and
// settles a deletion an earlier run got no answer for.
type Deleter struct {
	c       *Client
	j       *Journal
	resume  bool
	timeout time.Duration // how long a server may stay silent (rpc.Patient), and the wait for earlier changes to settle
	settled bool          // the servers have settled earlier changes
}

// NewDeleter returns a Deleter through c recording in j.
func (c *Client) NewDeleter(j *Journal, resume bool, timeout time.Duration) *Deleter {
	return &Deleter{c: c, j: j, resume: resume, timeout: timeout}
}

// Delete deletes id, or skips it, and records the change in the journal.
// An error with a result other than DeleteNotSent and DeleteFailed is the
// journal's, after the result.
func (d *Deleter) Delete(ctx context.Context, id string) (DeleteResult, error) {
	e := d.j.Lookup(id)
	if d.resume && e.State == Deleted {
		return DeleteSkipped, nil
	}
	doubt := d.resume && e.State == InDoubt && e.Op == '-'
	if doubt && !d.settled {
		if err := d.c.WaitSettled(ctx, d.timeout); err != nil {
			return DeleteNotSent, err
		}
		d.settled = true
	}
	b, err := d.j.Begin('-', []string{id}, nil)
	if err != nil {
		return DeleteNotSent, err
	}
	err = d.c.Delete(rpc.Patient(ctx, d.timeout), id)
	switch {
	case err == nil:
		return DeleteDone, d.j.End(b, true)
	case doubt && hasCode(err, protocol.CodeUnknownID): // the earlier run's deletion was applied
		return DeleteSkipped, errors.Join(d.j.End(b, false), d.j.End(e.Batch, true))
	case e.State == Deleted && hasCode(err, protocol.CodeUnknownID): // deleted by an earlier run, as the journal shows
		return DeleteKnown, d.j.End(b, false)
	}
	if Refused(err) {
		d.j.End(b, false)
	}
	return DeleteFailed, err
}
