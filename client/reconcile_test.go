package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

func openJournal(t *testing.T, cluster [16]byte) *client.Journal {
	t.Helper()
	j, err := client.OpenJournal(filepath.Join(t.TempDir(), "j.jsonl"), cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// journalled is an operator's client of a 2PCFace cluster, its journal,
// and items to enroll with their ids and template hashes.
type journalled struct {
	c     *inproc.Cluster
	cl    *client.Client
	ctx   context.Context
	j     *client.Journal
	items []protocol.Item
	ids   []string
	hs    [][16]byte
}

func newJournalled(t *testing.T, n int, seed uint64) *journalled {
	c := start2PC(t)
	f := &journalled{c: c, cl: c.Client("client", ""), ctx: inproc.Ctx(t, 60*time.Second), j: openJournal(t, c.P.ClusterID()),
		items: inproc.Items(inproc.Templates(n, 64, seed), "p")}
	for _, it := range f.items {
		f.ids, f.hs = append(f.ids, it.ID), append(f.hs, client.TemplateHash(it.Template))
	}
	return f
}

// item is the i-th item (SettleEnrollments', EnrollAll's).
func (f *journalled) item(i int) protocol.Item { return f.items[i] }

// enroll enrolls the items idx outside the journal.
func (f *journalled) enroll(t *testing.T, idx ...int) {
	t.Helper()
	var items []protocol.Item
	for _, i := range idx {
		items = append(items, f.items[i])
	}
	if err := f.cl.Enroll(f.ctx, items); err != nil {
		t.Fatal(err)
	}
}

// TestPlanEnroll: each state the journal knows of an id, with and without
// resume: enrolled with the same template (skipped, or stops the run),
// with another (a conflict), sent without an answer with the same
// template (settled, or stops the run) or another (a conflict), a
// deletion without an answer (a conflict), and ids to send.
func TestPlanEnroll(t *testing.T) {
	j := openJournal(t, [16]byte{7})
	ha, hb := client.TemplateHash([]float32{1, 2}), client.TemplateHash([]float32{2, 1})
	ok, _ := j.Begin('+', []string{"same", "other", "deleted", "undeleted"}, [][16]byte{ha, hb, ha, ha})
	j.End(ok, true)
	del, _ := j.Begin('-', []string{"deleted"}, nil)
	j.End(del, true)
	refused, _ := j.Begin('+', []string{"refused"}, [][16]byte{ha})
	j.End(refused, false)
	doubt, _ := j.Begin('+', []string{"doubt", "doubt-other"}, [][16]byte{ha, hb})
	j.Begin('-', []string{"undeleted"}, nil)

	ids := []string{"same", "other", "doubt", "doubt-other", "undeleted", "new", "deleted", "refused"}
	hs := slices.Repeat([][16]byte{ha}, len(ids))
	conflicts := []client.ItemConflict{{Item: 1, Why: client.EnrolledOther}, {Item: 3, Why: client.SentOther}, {Item: 4, Why: client.DeletionInDoubt}}
	p := j.PlanEnroll(ids, hs, true)
	if !slices.Equal(p.Send, []int{5, 6, 7}) || p.Skipped != 1 || len(p.Unsettled) != 1 || !slices.Equal(p.Unsettled[doubt], []int{2}) ||
		p.Again != nil || p.Doubtful != nil || !slices.Equal(p.Conflicts, conflicts) {
		t.Errorf("resume: %+v", p)
	}
	p = j.PlanEnroll(ids, hs, false)
	if !slices.Equal(p.Send, []int{5, 6, 7}) || p.Skipped != 0 || len(p.Unsettled) != 0 ||
		!slices.Equal(p.Again, []int{0}) || !slices.Equal(p.Doubtful, []int{2}) || !slices.Equal(p.Conflicts, conflicts) {
		t.Errorf("without resume: %+v", p)
	}
}

// TestSettleEnrollments: of two batches an earlier run sent without an
// answer, the one the cluster committed is found enrolled whole from its
// first request, the other is enrolled now, request by request; the
// journal then shows every id enrolled and nothing unanswered. A device
// settling is refused before it sends: the earlier batches stay in doubt.
func TestSettleEnrollments(t *testing.T) {
	f := newJournalled(t, 10, 4)
	f.j.Begin('+', f.ids[:4], f.hs[:4]) // committed, its answer lost
	f.enroll(t, 0, 1, 2, 3)
	f.j.Begin('+', f.ids[4:7], f.hs[4:7]) // never arrived

	p := f.j.PlanEnroll(f.ids, f.hs, true)
	if len(p.Unsettled) != 2 || !slices.Equal(p.Send, []int{7, 8, 9}) {
		t.Fatalf("plan %+v", p)
	}
	_, _, err := f.c.Client("device", "").SettleEnrollments(f.ctx, f.j, p.Unsettled, f.item, f.hs, 2, 10*time.Second)
	var se *client.SettleError
	var re *client.RoleError
	if !errors.As(err, &se) || se.ID != "p-0" || !client.Refused(se.Err) || !errors.As(err, &re) {
		t.Fatalf("a device settling: %v; want its RoleError on p-0", err)
	}
	if u := f.j.Unanswered(); len(u) != 2 {
		t.Fatalf("after the device's refusal, unanswered %v; want both earlier batches", u)
	}

	enrolled, found, err := f.cl.SettleEnrollments(f.ctx, f.j, p.Unsettled, f.item, f.hs, 2, 10*time.Second)
	if enrolled != 3 || found != 4 || err != nil {
		t.Fatalf("settled: enrolled %d, found %d, %v; want 3, 4", enrolled, found, err)
	}
	for i := range 7 {
		if e := f.j.Lookup(f.ids[i]); e.State != client.Enrolled || e.Hash != f.hs[i] {
			t.Errorf("%s: %+v, want enrolled", f.ids[i], e)
		}
	}
	if u := f.j.Unanswered(); len(u) != 0 {
		t.Errorf("unanswered %v", u)
	}
	if n := live(t, f.c); n != 7 {
		t.Errorf("%d live rows, want 7", n)
	}
	if p := f.j.PlanEnroll(f.ids, f.hs, true); p.Skipped != 7 || len(p.Unsettled) != 0 || !slices.Equal(p.Send, []int{7, 8, 9}) {
		t.Errorf("plan after settling: %+v", p)
	}
}

// TestRecordBulk: a bulk enrollment recorded by RecordBulk leaves the
// committed batches enrolled in the journal and the refused one not.
func TestRecordBulk(t *testing.T) {
	f := newJournalled(t, 6, 5)
	f.enroll(t, 0)                // outside the journal
	f.items[4].ID = f.items[0].ID // so the batch of item 4 is refused
	send := []int{1, 2, 3, 4, 5}  // the inputs to send
	rec := f.j.RecordBulk(func(k int) (string, [16]byte) { return f.items[send[k]].ID, f.hs[send[k]] })
	done, err := f.cl.EnrollAll(f.ctx, len(send), func(k int) protocol.Item { return f.items[send[k]] }, client.Bulk{
		Batch: 2, Before: rec.Before, After: rec.After,
	})
	if done != 2 || err == nil || rec.Err() != nil {
		t.Fatalf("done %d, %v, record %v; want 2 and the refusal", done, err, rec.Err())
	}
	want := map[int]client.State{0: client.Unknown, 1: client.Enrolled, 2: client.Enrolled, 3: client.Unknown, 4: client.Unknown, 5: client.Unknown}
	for i, st := range want {
		if e := f.j.Lookup(f.items[i].ID); e.State != st || st == client.Enrolled && e.Hash != f.hs[i] {
			t.Errorf("%s: %+v, want state %d", f.items[i].ID, e, st)
		}
	}
	if u := f.j.Unanswered(); len(u) != 0 {
		t.Errorf("unanswered %v", u)
	}
}

// TestDeleter: a deletion recorded in the journal; again, without resume,
// it is known deleted; an unknown id is refused; with resume an id the
// journal shows deleted is skipped, a deletion sent without an answer
// that was applied is skipped, and one that was not is sent.
func TestDeleter(t *testing.T) {
	f := newJournalled(t, 3, 6)
	rec := f.j.RecordBulk(func(k int) (string, [16]byte) { return f.ids[k], f.hs[k] })
	if _, err := f.cl.EnrollAll(f.ctx, len(f.items), f.item, client.Bulk{Before: rec.Before, After: rec.After}); err != nil {
		t.Fatal(err)
	}
	check := func(d *client.Deleter, id string, want client.DeleteResult, state client.State) error {
		t.Helper()
		res, err := d.Delete(f.ctx, id)
		if res != want {
			t.Errorf("delete %s: %d (%v), want %d", id, res, err, want)
		}
		if e := f.j.Lookup(id); e.State != state {
			t.Errorf("%s after its deletion: %+v, want state %d", id, e, state)
		}
		return err
	}
	d := f.cl.NewDeleter(f.j, false, 10*time.Second)
	for _, want := range []client.DeleteResult{client.DeleteDone, client.DeleteKnown} {
		if err := check(d, "p-0", want, client.Deleted); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(d, "never", client.DeleteFailed, client.Unknown); !client.Refused(err) {
		t.Fatalf("an unknown id: %v, want a refusal", err)
	}

	applied, _ := f.j.Begin('-', []string{"p-1"}, nil) // its answer lost
	if err := f.cl.Delete(f.ctx, "p-1"); err != nil {
		t.Fatal(err)
	}
	f.j.Begin('-', []string{"p-2"}, nil) // never arrived
	d = f.cl.NewDeleter(f.j, true, 10*time.Second)
	for _, x := range []struct {
		id   string
		want client.DeleteResult
	}{{"p-0", client.DeleteSkipped}, {"p-1", client.DeleteSkipped}, {"p-2", client.DeleteDone}} {
		if err := check(d, x.id, x.want, client.Deleted); err != nil {
			t.Fatal(err)
		}
	}
	// The applied deletion is settled; the one that never arrived stays
	// unanswered beside the deletion that went through (its id's last
	// change).
	if u := f.j.Unanswered(); len(u) != 1 || u[applied] != nil {
		t.Errorf("unanswered %v", u)
	}
	if n := live(t, f.c); n != 0 {
		t.Errorf("%d live rows, want none", n)
	}
}

// TestMayChangeJournal: a device may not enroll, and the enrollments its
// journal holds without an answer are recorded as refused (its deletion
// stays); an operator may, and its journal is left as it is.
func TestMayChangeJournal(t *testing.T) {
	f := newJournalled(t, 2, 7)
	f.j.Begin('+', f.ids, f.hs)
	del, _ := f.j.Begin('-', []string{"c"}, nil)
	if n, refused, err := f.cl.MayChangeJournal(f.j, protocol.OpPut); n != 0 || refused != nil || err != nil {
		t.Fatalf("an operator: %d, %v, %v", n, refused, err)
	}
	if u := f.j.Unanswered(); len(u) != 2 {
		t.Fatalf("an operator's check changed the journal: unanswered %v", u)
	}
	n, refused, err := f.c.Client("device", "").MayChangeJournal(f.j, protocol.OpPut)
	var re *client.RoleError
	if n != 2 || !errors.As(refused, &re) || err != nil {
		t.Fatalf("a device: %d, %v, %v; want 2 ids and its RoleError", n, refused, err)
	}
	if u := f.j.Unanswered(); len(u) != 1 || len(u[del]) != 1 {
		t.Errorf("unanswered %v; want the deletion", u)
	}
}
