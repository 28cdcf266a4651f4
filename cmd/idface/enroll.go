package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/host/input"
	"github.com/idface/idface/protocol"
)

// journalFlags are enroll's and delete's journal flags.
type journalFlags struct {
	resume *bool
	path   *string
}

func addJournalFlags(fs *flag.FlagSet, what string) journalFlags {
	return journalFlags{
		resume: fs.Bool("resume", false, "skip the ids this operator's journal shows "+what+" already, and settle the changes an earlier run sent without an answer"),
		path:   fs.String("journal", "", "the journal of this operator's changes (default HOME/journal-CLUSTERID.jsonl in the operator's home)"),
	}
}

func (f journalFlags) open(cfg *config.Params, h *home.Home) (*client.Journal, error) {
	path := *f.path
	if path == "" {
		path = client.JournalPath(h.Dir, cfg.ClusterID())
	}
	return client.OpenJournal(path, cfg.ClusterID())
}

// source names the items of a bulk file in the user's terms: the lines
// of the ids file (or of a JSON lines file with ids), or the rows of the
// templates.
type source struct {
	file string
	unit string // "line" or "row"
	num  []int  // the line or row of each item
}

func (s source) at(i int) string {
	if s.unit == "" { // a single id on the command line
		return s.file
	}
	return fmt.Sprintf("%s %s %d", s.file, s.unit, s.num[i])
}

// ranges writes the items idx (input indices, ascending) as "ids.txt
// lines 1-500, 601-700".
func (s source) ranges(idx []int) string {
	rs := client.Ranges(idx)
	var b strings.Builder
	for k, r := range rs {
		if k == client.MaxListedRanges {
			fmt.Fprintf(&b, " and %d more ranges", len(rs)-k)
			break
		}
		if k > 0 {
			b.WriteString(", ")
		}
		if lo, hi := s.num[r.Lo], s.num[r.Hi-1]; lo == hi {
			fmt.Fprint(&b, lo)
		} else {
			fmt.Fprintf(&b, "%d-%d", lo, hi)
		}
	}
	unit := s.unit
	if len(idx) > 1 {
		unit += "s"
	}
	return fmt.Sprintf("%s %s %s", s.file, unit, b.String())
}

// were is "were" after several items, "was" after one.
func were(idx []int) string {
	if len(idx) == 1 {
		return "was"
	}
	return "were"
}

// indices maps ranges of positions in send to input indices.
func indices(send []int, rs []client.Range) []int {
	var out []int
	for _, r := range rs {
		out = append(out, send[r.Lo:r.Hi]...)
	}
	slices.Sort(out)
	return out
}

// listSome writes up to five problems and how many more there are.
func listSome(problems []string) string {
	var b strings.Builder
	for _, p := range problems[:min(5, len(problems))] {
		b.WriteString("\n  " + p)
	}
	if len(problems) > 5 {
		fmt.Fprintf(&b, "\n  and %d more", len(problems)-5)
	}
	return b.String()
}

func cmdEnroll(args []string, stdout, stderr io.Writer) error {
	o, err := enrollFlags(args, stderr)
	if err != nil {
		return err
	}
	var st enrollState
	err = o.run(&st, stdout, stderr)
	if err != nil && o.asJSON && !st.reported { // a script reads what happened on stdout, a failure too
		return errors.Join(err, json.NewEncoder(stdout).Encode(st.failure(err, o.dedupe)))
	}
	return err
}

// enrollState is what a run of enroll got to: the input read, the entry
// and journal opened, what was sent, and how it failed.
type enrollState struct {
	in             *enrollInput
	entry, journal string
	r              *enrollRun
	be             *client.BulkError
	reported       bool // report wrote what the run did (exit 3 follows it)
}

func (o *enrollOptions) run(st *enrollState, stdout, stderr io.Writer) error {
	cfg, h, _, err := o.cf.member.open("client")
	if err != nil {
		return err
	}
	if o.enrollRefused && !cfg.HideProbes() {
		return fmt.Errorf("--enroll-refused is for a cluster that hides probes (a search there is refused by a verdict sealed to this client); this cluster shows them to its servers")
	}
	in, err := o.read(cfg) // everything is read and checked before anything is sent
	if err != nil {
		return err
	}
	st.in = in
	j, err := o.jf.open(cfg, h)
	if err != nil {
		return err
	}
	defer j.Close()
	st.journal = j.Path()
	cl, err := client.Open(cfg, h, *o.cf.entry)
	if err != nil {
		return err
	}
	defer cl.Close()
	st.entry = cl.Entry()
	if err := mayChange(cl, j, protocol.OpPut); err != nil {
		return err
	}
	r, err := o.send(cl, j, in, stderr)
	st.r = r
	dupsTo := stdout
	if o.asJSON { // stdout holds the one JSON object (its duplicates)
		dupsTo = stderr
	}
	for _, d := range r.dups { // the same person enrolled twice: reported, never sent
		fmt.Fprintf(dupsTo, "%s: %s\n", in.src.at(r.send[d.Item]), d)
	}

	if err != nil {
		errors.As(err, &st.be)
		return o.failed(err, in, r)
	}
	st.reported = true
	if err := o.report(cl, cfg, j, r, stdout); err != nil {
		return err
	}
	if len(r.dups) > 0 { // said above, one line each: a script must tell
		what := fmt.Sprintf("%d of the %d templates were", len(r.dups), len(r.send))
		if len(r.dups) == 1 {
			what = fmt.Sprintf("1 of the %d templates was", len(r.send))
		}
		return &exitError{exitDuplicates, fmt.Errorf("%s left out as the same people as enrolled ids (exit %d; the others were enrolled)", what, exitDuplicates)}
	}
	return nil
}

// exitDuplicates is enroll --dedupe's exit status when it left templates
// out: the others were enrolled.
const exitDuplicates = 3

// enrollOptions are enroll's flags, checked.
type enrollOptions struct {
	cf                   clientFlags
	jf                   journalFlags
	id, tmpl, ids, tmpls string
	batch                int
	asJSON, quiet        bool
	dedupe               bool
	enrollRefused        bool // --enroll-refused
	single               bool // --id with --template
}

func enrollFlags(args []string, stderr io.Writer) (*enrollOptions, error) {
	fs := newFlags("enroll", "idface enroll --cluster DIR --id ID --template x.npy\n"+
		"idface enroll --cluster DIR --ids ids.txt --templates X.npy|X.csv|X.jsonl [--batch 2048] [--resume]\n"+
		"idface enroll --cluster DIR --templates X.jsonl   (ids in the file: {\"id\": ..., \"template\": [...]})\n\n"+
		"Enrolls templates under string ids. Batches are sent one after another; each\n"+
		"is acknowledged only when every party has stored its share durably, and is\n"+
		"otherwise rolled back everywhere (replicated mode: a holder that cannot be\n"+
		"reached is left out, the entry keeps its part and delivers it once it is\n"+
		"back, and the command names it). The command stops at the first failure\n"+
		"and says which ids were enrolled, refused, left without an answer, and not\n"+
		"sent. Every template is checked before anything is sent. In a sharded\n"+
		"cluster each batch holds one shard's ids and the shards enroll at once, so\n"+
		"after a failure ids later in the file may be enrolled and earlier ones not\n"+
		"sent (--resume sends exactly the rest).\n\n"+
		"A journal in the operator's home records each change this operator sends\n"+
		"(ids and a hash of each template; no template) and its outcome: with\n"+
		"--resume, ids already enrolled with the same template are skipped and\n"+
		"batches an earlier run got no answer for are settled. An id enrolled\n"+
		"with another template is refused (delete it first). The journal knows\n"+
		"only this operator's changes.\n\n"+
		"With --dedupe each template is first identified against the gallery\n"+
		"through the cluster's protected search (the servers see what they see of\n"+
		"any identify; this client learns the accepted id, never a score) and\n"+
		"compared here with the batch's earlier templates: a match at the\n"+
		"cluster's threshold is not enrolled and is reported with the id it\n"+
		"matched (an ABIS insert). An enrollment through another client at the\n"+
		"same time is not seen. A search the cluster refuses for a failed check of\n"+
		"its hidden probe (a share holder deviates) stops the enrollment there;\n"+
		"with --enroll-refused that template is enrolled anyway, unchecked, and\n"+
		"listed on stderr once enrolled (and as unchecked in --json), so that no\n"+
		"holder learns the check's outcome from whether an enrollment follows\n"+
		"(docs/HIDDEN-PROBES.md): search it again once the faulty holder is\n"+
		"mended, and do not act on the list at once (a script that stops or\n"+
		"runs again when it is not empty shows the outcome as well).\n\n"+
		"Exit status: 0 everything was enrolled (or skipped with --resume); 3\n"+
		"with --dedupe, some templates were left out as duplicates and the others\n"+
		"enrolled; 1 a failure (what was enrolled is said); 2 bad usage.\n\n"+
		"With --json one object on stdout: enrolled, skipped, seconds, per_second,\n"+
		"entry, journal, duplicates (with --dedupe; on stderr one line each),\n"+
		"unchecked (with --enroll-refused: the ids enrolled unchecked) and\n"+
		"held_for (replicated mode: holders that were unreachable). A run that\n"+
		"fails writes it too, and exits non-zero: then also error (as on stderr),\n"+
		"refused (rolled back), unanswered (may or may not be enrolled), not_sent\n"+
		"(counts) and where (the lines or rows of each outcome).\n\n"+
		input.Formats+"\n\n"+input.IDRules+"\n\n"+fmt.Sprintf("A batch holds 1 to %d templates (fewer in mode he: at most four column\ngroups per request).", protocol.MaxBatch), stderr)
	o := &enrollOptions{cf: addClientFlags(fs)}
	fs.StringVar(&o.id, "id", "", "id of a single template")
	fs.StringVar(&o.tmpl, "template", "", "file holding one template")
	fs.StringVar(&o.ids, "ids", "", "text file with one id per line (bulk)")
	fs.StringVar(&o.tmpls, "templates", "", "one template per id (bulk): .npy, CSV or JSON lines")
	fs.IntVar(&o.batch, "batch", 2048, fmt.Sprintf("templates per transaction in bulk mode (1..%d)", protocol.MaxBatch))
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object on stdout, also when the command fails")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	fs.BoolVar(&o.dedupe, "dedupe", false, "search the gallery (and the earlier templates of the same batch) for each template first, and leave out the people already enrolled, naming the id each matched; batches then go one at a time")
	fs.BoolVar(&o.enrollRefused, "enroll-refused", false, "with --dedupe: enroll a template whose search was refused for a failed check of its hidden probe, unchecked, and list it, instead of stopping")
	o.jf = addJournalFlags(fs, "enrolled")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if o.enrollRefused && !o.dedupe {
		fmt.Fprintln(stderr, "idface enroll: --enroll-refused goes with --dedupe (in a cluster that hides probes)")
		fs.Usage()
		return nil, errUsage
	}
	o.single = o.id != "" && o.tmpl != "" && o.ids == "" && o.tmpls == ""
	if !o.single && (o.tmpls == "" || o.id != "" || o.tmpl != "") {
		fmt.Fprintln(stderr, "idface enroll: give either --id with --template, or --templates with --ids (or a JSON lines file with ids)")
		fs.Usage()
		return nil, errUsage
	}
	if o.batch == 0 {
		o.batch = 2048
	}
	if o.batch < 1 || o.batch > protocol.MaxBatch {
		return nil, fmt.Errorf("--batch %d: a batch holds 1 to %d templates", o.batch, protocol.MaxBatch)
	}
	if o.single {
		if err := input.CheckID(o.id); err != nil {
			return nil, fmt.Errorf("--id: %w", err)
		}
	}
	return o, nil
}

// enrollInput is what enroll sends: every template checked, with its id,
// where it came from (for messages) and its hash (for the journal).
type enrollInput struct {
	tm     *input.Templates
	ids    []string
	src    source
	hashes [][16]byte
}

func (in *enrollInput) item(i int) protocol.Item {
	return protocol.Item{ID: in.ids[i], Template: in.tm.Row(i, nil)}
}

// read reads the templates and ids and checks every template.
func (o *enrollOptions) read(cfg *config.Params) (*enrollInput, error) {
	path := o.tmpls
	if o.single {
		path = o.tmpl
	}
	tm, err := input.ReadTemplates(path, cfg.Dim())
	if err != nil {
		return nil, err
	}
	in := &enrollInput{tm: tm}
	switch {
	case o.single:
		if tm.Rows() != 1 {
			return nil, fmt.Errorf("%s holds %d templates; --template takes one (use --ids and --templates for many)", path, tm.Rows())
		}
		in.ids, in.src = []string{o.id}, source{file: "--id", num: []int{1}}
	case o.ids != "" && tm.IDs != nil:
		return nil, fmt.Errorf("%s carries its own ids: leave out --ids", path)
	case o.ids != "":
		var lines []int
		if in.ids, lines, err = input.ReadIDs(o.ids); err != nil {
			return nil, err
		}
		if tm.Rows() != len(in.ids) {
			return nil, fmt.Errorf("%s holds %d templates but %s has %d ids: give one id per template, in the same order", path, tm.Rows(), o.ids, len(in.ids))
		}
		in.src = source{file: o.ids, unit: "line", num: lines}
	case tm.IDs != nil:
		in.ids = tm.IDs
		in.src = source{file: path, unit: "line"}
		for i := range tm.Rows() {
			in.src.num = append(in.src.num, tm.Line(i))
		}
		if err := checkIDs(in.ids, in.src); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s has no ids: give --ids ids.txt (one id per template), or write JSON lines {\"id\": ..., \"template\": [...]}", path)
	}
	var bad []string
	for i := range tm.Rows() {
		if err := tm.Check(i); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("nothing was enrolled: %d of the %d templates cannot be enrolled:%s\nfix or remove them", len(bad), tm.Rows(), listSome(bad))
	}
	in.hashes = make([][16]byte, len(in.ids))
	for i := range in.ids {
		in.hashes[i] = client.TemplateHash(tm.Row(i, nil))
	}
	return in, nil
}

// enrollRun is what a run of enroll did.
type enrollRun struct {
	send      []int // the inputs sent (not skipped by the journal)
	done      int   // enrolled, by this run or settled from an earlier one
	settled   int
	skipped   int
	dups      []client.Duplicate // Item: an index of send
	unchecked []string           // enrolled with their search refused (--enroll-refused)
	start     time.Time
}

// send settles what the journal left without an answer, then enrolls the
// rest in batches, journalling each.
func (o *enrollOptions) send(cl *client.Client, j *client.Journal, in *enrollInput, stderr io.Writer) (*enrollRun, error) {
	r := &enrollRun{}
	if o.enrollRefused {
		r.unchecked = []string{}
	}
	plan := j.PlanEnroll(in.ids, in.hashes, *o.jf.resume)
	if err := journalRefusal(plan, j.Path(), in.ids, in.src); err != nil {
		return r, err
	}
	r.send, r.skipped, r.start = plan.Send, plan.Skipped, time.Now()
	settled, already, err := cl.SettleEnrollments(context.Background(), j, plan.Unsettled, in.item, in.hashes, o.batch, *o.cf.timeout)
	r.done = settled
	var se *client.SettleError
	if errors.As(err, &se) && !client.Refused(se.Err) { // no answer: settling it is settling it again
		err = fmt.Errorf("%w; run the same command with --resume again", err)
	}
	if err != nil {
		return r, err
	}
	r.settled, r.skipped = settled, r.skipped+already

	var pb bar
	if len(r.send) > o.batch && !o.quiet {
		pb = newBar(len(r.send), "enrolling", stderr)
	}
	rec := j.RecordBulk(func(k int) (string, [16]byte) { return in.ids[r.send[k]], in.hashes[r.send[k]] })
	done, err := cl.EnrollAll(context.Background(), len(r.send), func(k int) protocol.Item { return in.item(r.send[k]) }, client.Bulk{
		Batch: o.batch, Timeout: *o.cf.timeout, Dedupe: o.dedupe, EnrollRefused: o.enrollRefused,
		Duplicate: func(d client.Duplicate) { r.dups = append(r.dups, d) },
		Unchecked: func(_ int, id string) {
			r.unchecked = append(r.unchecked, id)
			fmt.Fprintf(stderr, "%q enrolled unchecked: its search was refused for a failed check (a share holder is faulty or compromised); search it again once the holder is mended\n", id)
		},
		Progress: func(done, _ int) {
			if pb != nil {
				pb.Set(done)
			}
		},
		Before: rec.Before,
		After:  rec.After,
	})
	if pb != nil {
		pb.done(err == nil)
	}
	if err == nil {
		err = rec.Err()
	}
	r.done = done + settled
	return r, err
}

// failed says what a run that stopped did: which inputs were enrolled,
// refused, left without an answer and not sent, and what to do.
func (o *enrollOptions) failed(err error, in *enrollInput, r *enrollRun) error {
	var be *client.BulkError
	if !errors.As(err, &be) {
		return err
	}
	if o.single {
		if len(be.InDoubt) > 0 {
			return fmt.Errorf("%w\n%q got no answer and may or may not be enrolled: run the same command with --resume to find out", be.Err, o.id)
		}
		return be.Err
	}
	send := r.send
	msg := fmt.Sprintf("enrolled %d of %d", r.done, len(send)+r.settled)
	if c := indices(send, be.Committed); len(c) > 0 {
		msg += " (" + in.src.ranges(c) + ")"
	}
	if r.skipped > 0 {
		msg += fmt.Sprintf("; %d enrolled before were skipped", r.skipped)
	}
	if len(r.dups) > 0 {
		msg += fmt.Sprintf("; %d duplicates left out (listed above)", len(r.dups))
	}
	if rf := indices(send, be.Refused); len(rf) > 0 {
		msg += "; " + in.src.ranges(rf) + " " + were(rf) + " refused and rolled back"
	}
	if d := indices(send, be.InDoubt); len(d) > 0 {
		msg += "; " + in.src.ranges(d) + " got no answer and may or may not be enrolled"
	}
	if ns := indices(send, be.NotSent()); len(ns) > 0 {
		msg += "; " + in.src.ranges(ns) + " " + were(ns) + " not sent"
	}
	hint := "fix the cause, then run the same command with --resume: it skips what is enrolled"
	switch {
	case isCode(be.Err, protocol.CodeDuplicate):
		hint = "the journal does not know that id (enrolled by another operator, or with another journal): delete it or remove it from the input, then run the same command with --resume"
	case client.RoleRefused(be.Err): // the same identity is refused again, --resume or not
		hint = "the cluster refuses this member's enrollments: enroll as an operator of the cluster (its --home, or --client NAME in a local cluster)"
	}
	return fmt.Errorf("%s: %v\n%s", msg, be.Err, hint)
}

// summary is enroll --json's object for a run that sent r (nil: it
// stopped before sending): enrolled, skipped, seconds, per_second,
// entry, journal, and with dedupe the duplicates left out.
func summary(r *enrollRun, dedupe bool, entry, journal string) map[string]any {
	if r == nil {
		r = &enrollRun{}
	}
	secs := 0.0
	if !r.start.IsZero() {
		secs = time.Since(r.start).Seconds()
	}
	out := map[string]any{"enrolled": r.done, "skipped": r.skipped, "seconds": secs, "per_second": 0.0}
	if secs > 0 {
		out["per_second"] = float64(r.done) / secs
	}
	if entry != "" {
		out["entry"] = entry
	}
	if journal != "" {
		out["journal"] = journal
	}
	if r.unchecked != nil { // --enroll-refused
		out["unchecked"] = r.unchecked
	}
	if dedupe {
		type dup struct {
			ID      string `json:"id"`
			Matched string `json:"matched"`
			InInput bool   `json:"in_input,omitempty"` // matched an earlier template of this input, not an enrolled id
		}
		list := []dup{}
		for _, d := range r.dups {
			list = append(list, dup{d.ID, d.Matched, d.InBatch})
		}
		out["duplicates"] = list
	}
	return out
}

// failure is enroll --json's object for a run that failed with err: the
// summary, error (the message and advice printed on stderr), the inputs
// refused (and rolled back), unanswered (which may or may not be
// enrolled) and not_sent, counted, and where (the lines or rows of each
// outcome, as the message names them).
func (st *enrollState) failure(err error, dedupe bool) map[string]any {
	out := summary(st.r, dedupe, st.entry, st.journal)
	out["error"] = err.Error()
	refused, unanswered, notSent := 0, 0, 0
	where := map[string]string{}
	switch {
	case st.be != nil && st.r != nil:
		list := func(key string, rs []client.Range) int {
			idx := indices(st.r.send, rs)
			if len(idx) > 0 && st.in.src.unit != "" {
				where[key] = st.in.src.ranges(idx)
			}
			return len(idx)
		}
		list("enrolled", st.be.Committed)
		refused, unanswered, notSent = list("refused", st.be.Refused), list("unanswered", st.be.InDoubt), list("not_sent", st.be.NotSent())
	case st.in != nil && st.r == nil: // stopped before sending
		notSent = len(st.in.ids)
	case st.in != nil: // stopped settling an earlier run's changes
		notSent = len(st.in.ids) - st.r.done - st.r.skipped
	}
	out["refused"], out["unanswered"], out["not_sent"] = refused, unanswered, notSent
	if len(where) > 0 {
		out["where"] = where
	}
	return out
}

// report prints what a run that went through did.
func (o *enrollOptions) report(cl *client.Client, cfg *config.Params, j *client.Journal, r *enrollRun, stdout io.Writer) error {
	secs := time.Since(r.start).Seconds()
	var held []string // parties whose part the entry keeps for delivery
	if r.done > 0 {
		held = heldFor(cl, cfg)
	}
	if o.asJSON {
		out := summary(r, o.dedupe, cl.Entry(), j.Path())
		if len(held) > 0 {
			out["held_for"] = held
		}
		return json.NewEncoder(stdout).Encode(out)
	}
	at, note := heldAt(cfg, cl.Entry(), held)
	if o.single && len(r.dups) > 0 {
		return nil // said above: not enrolled, and why
	}
	if o.single {
		fmt.Fprintf(stdout, "enrolled %s %s%s\n", o.id, at, note)
		return nil
	}
	fmt.Fprintf(stdout, "enrolled %d %s in %.2f s", r.done, at, secs)
	if r.skipped > 0 {
		fmt.Fprintf(stdout, "; %d enrolled before were skipped", r.skipped)
	}
	if o.dedupe {
		fmt.Fprintf(stdout, "; %d duplicates left out", len(r.dups))
	}
	fmt.Fprintln(stdout, note)
	return nil
}

// mayChange refuses, before anything is sent or settled, a change (op)
// that this member's role may not make, saying how many ids of the
// journal's changes without an answer were refused the same way
// (client.MayChangeJournal).
func mayChange(cl *client.Client, j *client.Journal, op protocol.OpKind) error {
	n, refused, err := cl.MayChangeJournal(j, op)
	if err != nil || refused == nil {
		return err
	}
	what := "enrolled"
	if op == protocol.OpDelete {
		what = "deleted"
	}
	more := ""
	if n > 0 {
		more = fmt.Sprintf("\nthe %d ids that earlier runs sent without an answer were refused the same way and are not %s; journal %s records so", n, what, j.Path())
	}
	return fmt.Errorf("nothing was %s: %w%s", what, refused, more)
}

// conflictText says why an id conflicts with the journal, after the id.
var conflictText = map[client.Conflict]string{
	client.EnrolledOther:   " is already enrolled with another template",
	client.SentOther:       " was sent with another template by an earlier run that got no answer",
	client.DeletionInDoubt: ": its deletion got no answer; run 'idface delete --resume' with it first",
}

// journalRefusal is the error, before anything is sent, of a plan with
// ids that conflict with the journal (journal), or, without --resume,
// with ids to skip or settle; nil when there are none.
func journalRefusal(p *client.EnrollPlan, journal string, ids []string, src source) error {
	what := func(i int) string { return fmt.Sprintf("%q (%s)", ids[i], src.at(i)) }
	switch {
	case len(p.Conflicts) > 0:
		var conflicts []string
		for _, c := range p.Conflicts {
			conflicts = append(conflicts, what(c.Item)+conflictText[c.Why])
		}
		return fmt.Errorf("nothing was enrolled: %d of the ids conflict with what this operator enrolled before (journal %s):%s\n"+
			"delete them first (idface delete --id ID) or remove them from the input", len(conflicts), journal, listSome(conflicts))
	case len(p.Again)+len(p.Doubtful) > 0:
		var parts []string
		if len(p.Again) > 0 {
			parts = append(parts, fmt.Sprintf("%d ids are already enrolled with these templates", len(p.Again)))
		}
		if len(p.Doubtful) > 0 {
			parts = append(parts, fmt.Sprintf("%d ids were sent by an earlier run that got no answer", len(p.Doubtful)))
		}
		return fmt.Errorf("nothing was enrolled: %s (journal %s), e.g.%s\nrun the same command with --resume to skip what is enrolled and settle the rest",
			strings.Join(parts, " and "), journal, listSome([]string{what(append(p.Again, p.Doubtful...)[0])}))
	}
	return nil
}

// checkIDs checks ids taken from a templates file as ReadIDs checks an
// ids file.
func checkIDs(ids []string, src source) error {
	first := map[string]int{}
	for i, x := range ids {
		if err := input.CheckID(x); err != nil {
			return fmt.Errorf("%s: %w", src.at(i), err)
		}
		if k, ok := first[x]; ok {
			return fmt.Errorf("%s repeats the id of %s %d (%q): ids are unique", src.at(i), src.unit, src.num[k], x)
		}
		first[x] = i
	}
	return nil
}

func isCode(err error, c protocol.Code) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == c
}

// deleteResult is 'delete --json'.
type deleteResult struct {
	Deleted int `json:"deleted"`
	Skipped int `json:"skipped"`
	// AlreadyDeleted counts the ids the cluster knows no more and the
	// journal shows deleted by an earlier run (exit 3).
	AlreadyDeleted int    `json:"already_deleted,omitempty"`
	Entry          string `json:"entry"`
	Journal        string `json:"journal"`
	// HeldFor names the parties that were unreachable: the entry keeps
	// their part of the deletions and delivers it once they are back.
	HeldFor []string `json:"held_for,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func cmdDelete(args []string, stdout, stderr io.Writer) error {
	o, err := deleteFlags(args, stderr)
	if err != nil {
		return err
	}
	ids, src, err := o.read()
	if err != nil {
		return err
	}
	cfg, h, cl, err := o.cf.openHome()
	if err != nil {
		return err
	}
	defer cl.Close()
	j, err := o.jf.open(cfg, h)
	if err != nil {
		return err
	}
	defer j.Close()
	if err := mayChange(cl, j, protocol.OpDelete); err != nil {
		return err
	}
	d := &deletion{o: o, cfg: cfg, cl: cl, j: j, del: cl.NewDeleter(j, *o.jf.resume, *o.cf.timeout), ids: ids, src: src}
	if len(ids) > 100 && !o.quiet {
		d.bar = newBar(len(ids), "deleting", stderr)
		defer d.bar.done(false) // a failure's: after a success, nothing
	}
	if err := d.run(); err != nil {
		return d.result(err, stdout)
	}
	return d.report(stdout)
}

// deleteOptions are delete's flags, checked.
type deleteOptions struct {
	cf            clientFlags
	jf            journalFlags
	id, ids       string
	asJSON, quiet bool
}

func deleteFlags(args []string, stderr io.Writer) (*deleteOptions, error) {
	fs := newFlags("delete", "idface delete --cluster DIR --id ID\n"+
		"idface delete --cluster DIR --ids ids.txt [--resume]\n\n"+
		"Revokes enrolled ids at every party, one after another (an unknown id is an\n"+
		"error). With --ids the command stops at the first failure and says which\n"+
		"ids were deleted, refused and not sent. Each deletion is recorded in the\n"+
		"operator's journal (see idface enroll --help); with --resume, ids the\n"+
		"journal shows deleted are skipped and a deletion an earlier run got no\n"+
		"answer for is settled.\n\n"+
		"With --json one object at the end: deleted, skipped (deleted before, with\n"+
		"--resume), entry, journal, held_for (replicated mode: the holders that\n"+
		"were unreachable; the entry keeps their part and delivers it once they\n"+
		"are back), already_deleted and, when the command failed, error.\n\n"+
		"Exit status: 0 every id was deleted (or skipped with --resume); 3 some\n"+
		"ids were deleted before, as the journal shows (nothing to delete for\n"+
		"them; the others were deleted); 1 a failure; 2 bad usage.\n\n"+
		"An ids file that holds no id is refused (exit 2): nothing to delete is\n"+
		"a mistake in the script that made the list, not a deletion.\n\n"+input.IDRules, stderr)
	o := &deleteOptions{cf: addClientFlags(fs)}
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	fs.StringVar(&o.id, "id", "", "id to revoke")
	fs.StringVar(&o.ids, "ids", "", "text file with one id per line to revoke")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	o.jf = addJournalFlags(fs, "deleted")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if (o.id == "") == (o.ids == "") {
		fmt.Fprintln(stderr, "idface delete: give --id or --ids")
		fs.Usage()
		return nil, errUsage
	}
	return o, nil
}

// read returns the ids to delete (--id, checked, or the lines of --ids)
// and where each came from.
func (o *deleteOptions) read() ([]string, source, error) {
	if o.id != "" {
		if err := input.CheckID(o.id); err != nil {
			return nil, source{}, fmt.Errorf("--id: %w", err)
		}
		return []string{o.id}, source{file: "--id", num: []int{1}}, nil
	}
	ids, num, err := input.ReadIDs(o.ids)
	if err == nil && len(ids) == 0 { // a script whose list came out empty must not read "deleted 0" as done
		return nil, source{}, &exitError{2, fmt.Errorf("nothing was deleted: %s holds no ids: give one id per line (or --id ID for one)", o.ids)}
	}
	return ids, source{file: o.ids, unit: "line", num: num}, err
}

// deletion is one run of delete: the ids it deletes one after another and
// what it has done so far.
type deletion struct {
	o       *deleteOptions
	cfg     *config.Params
	cl      *client.Client
	j       *client.Journal
	del     *client.Deleter
	ids     []string
	src     source
	bar     bar      // nil: none
	deleted []int    // indices into ids
	skipped int      // deleted before (--resume)
	already []int    // deleted before, as the journal shows (without --resume): indices into ids
	held    []string // parties whose part the entry keeps for delivery
}

// run deletes the ids in order and stops at the first failure.
func (d *deletion) run() error {
	for i := range d.ids {
		if d.bar != nil {
			d.bar.Set(i)
		}
		if err := d.one(i); err != nil {
			return err
		}
	}
	if d.bar != nil {
		d.bar.done(true)
	}
	return nil
}

// one deletes the i-th id, or skips it if the journal shows it deleted
// (--resume), and records the change in the journal (client.Deleter).
func (d *deletion) one(i int) error {
	res, err := d.del.Delete(context.Background(), d.ids[i])
	switch res {
	case client.DeleteDone:
		d.deleted = append(d.deleted, i)
	case client.DeleteSkipped:
		d.skipped++
	case client.DeleteKnown:
		d.already = append(d.already, i)
	case client.DeleteFailed:
		if len(d.ids) == 1 {
			return err
		}
		return d.failed(i, err)
	}
	return err
}

// failed says what a bulk deletion did before the i-th id failed with
// err, and how to go on.
func (d *deletion) failed(i int, err error) error {
	what := "was refused"
	if !client.Refused(err) {
		what = "got no answer and may or may not be deleted"
	}
	msg := fmt.Sprintf("deleted %d of %d", len(d.deleted), len(d.ids))
	if len(d.deleted) > 0 {
		msg += " (" + d.src.ranges(d.deleted) + ")"
	}
	if d.skipped > 0 {
		msg += fmt.Sprintf("; %d deleted before were skipped", d.skipped)
	}
	if len(d.already) > 0 {
		msg += "; " + d.src.ranges(d.already) + " " + were(d.already) + " already deleted (the journal shows it)"
	}
	msg += fmt.Sprintf("; %q (%s) %s", d.ids[i], d.src.at(i), what)
	if i+1 < len(d.ids) {
		var rest []int
		for k := i + 1; k < len(d.ids); k++ {
			rest = append(rest, k)
		}
		msg += "; " + d.src.ranges(rest) + " " + were(rest) + " not sent"
	}
	hint := "fix the cause, then run the same command with --resume: it skips what is deleted"
	if client.RoleRefused(err) { // the same identity is refused again, --resume or not
		hint = "the cluster refuses this member's deletions: delete as an operator of the cluster (its --home, or --client NAME in a local cluster)"
	}
	return fmt.Errorf("%s: %w\n%s", msg, err, hint)
}

// result reports the run with --json, a failure too, before err.
func (d *deletion) result(err error, stdout io.Writer) error {
	if !d.o.asJSON {
		return err
	}
	r := deleteResult{Deleted: len(d.deleted), Skipped: d.skipped, AlreadyDeleted: len(d.already), Entry: d.cl.Entry(), Journal: d.j.Path(), HeldFor: d.held}
	if err != nil {
		r.Error = err.Error()
	}
	if jerr := json.NewEncoder(stdout).Encode(r); jerr != nil {
		return errors.Join(err, jerr)
	}
	return err
}

// report prints what a run that succeeded did, and where.
func (d *deletion) report(stdout io.Writer) error {
	if len(d.deleted) > 0 {
		d.held = heldFor(d.cl, d.cfg)
	}
	if d.o.asJSON {
		return d.result(d.alreadyDeleted(), stdout)
	}
	at, note := heldAt(d.cfg, d.cl.Entry(), d.held)
	switch {
	case len(d.ids) == 1 && len(d.already) == 1:
	case len(d.ids) == 1 && d.skipped == 0:
		fmt.Fprintf(stdout, "deleted %s %s%s\n", d.ids[0], at, note)
	default:
		fmt.Fprintf(stdout, "deleted %d %s", len(d.deleted), at)
		if d.skipped > 0 {
			fmt.Fprintf(stdout, "; %d deleted before were skipped", d.skipped)
		}
		if len(d.already) > 0 {
			fmt.Fprintf(stdout, "; %d already deleted", len(d.already))
		}
		fmt.Fprintln(stdout, note)
	}
	return d.alreadyDeleted()
}

// exitAlreadyDeleted is delete's exit status when ids were deleted
// before, as the journal shows: nothing to delete for them.
const exitAlreadyDeleted = 3

// alreadyDeleted says which ids were deleted before (nil: none).
func (d *deletion) alreadyDeleted() error {
	if len(d.already) == 0 {
		return nil
	}
	what, known := fmt.Sprintf("%q was", d.ids[d.already[0]]), "no such id and journal %s records its deletion"
	if d.src.unit != "" {
		what = d.src.ranges(d.already) + " " + were(d.already)
	}
	if len(d.already) > 1 {
		known = "none of them and journal %s records their deletion"
	}
	rest := ""
	if len(d.ids) > len(d.already) {
		rest = "; the others were deleted"
	}
	return &exitError{exitAlreadyDeleted, fmt.Errorf("%s already deleted: the cluster knows "+known+" by an earlier run; nothing to delete (exit %d)%s", what, d.j.Path(), exitAlreadyDeleted, rest)}
}
