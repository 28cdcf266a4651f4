// Package client is the device and operator side of idface: it talks to
// the cluster through one entry server with its own pinned identity.
// cmd/idface, the local cluster tooling, the experiments and the tests all
// use it; bulk enrollment (batches, requests in flight, progress) lives
// here once, as do the operator's journal and its reconciliation with the
// cluster (what enroll and delete --resume send again, skip or settle).
package client

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/network"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// Client talks to the cluster through one entry server.
type Client struct {
	p *config.Params
	d network.Dialer
	// entry is where requests go; in a mode that answers with a party
	// down, Identify moves it to a party it can reach.
	mu    sync.Mutex
	entry string
	// name and key sign enrollments and deletions (operators only).
	name string
	key  crypto.Signer
}

// New returns a client that reaches the servers through d (any network)
// and sends requests to entry ("" means the first party).
func New(p *config.Params, d network.Dialer, entry string) (*Client, error) {
	if entry == "" {
		entry = p.Party(0).Name
	}
	if p.PartyIndex(entry) < 0 {
		return nil, fmt.Errorf("no party %q in the cluster config", entry)
	}
	return &Client{p: p, d: d, entry: entry}, nil
}

// Open connects over QUIC as the member whose home is h (a client, or a
// server acting as one: cluster tooling), through entry.
func Open(p *config.Params, h *home.Home, entry string) (*Client, error) {
	if _, err := h.Check(p); err != nil {
		return nil, err
	}
	cert, err := h.Certificate()
	if err != nil {
		return nil, err
	}
	if p.ShardKeyed() { // an operator's home holds the shard key: its enrollments go to their shards
		key, err := h.ShardKey()
		if err != nil {
			return nil, err
		}
		if key != nil {
			if p, err = p.WithShardKey(key); err != nil {
				return nil, err
			}
		}
	}
	d := quicnet.NewDialer(cert, p.Directory(config.Coordinator), protocol.Version) // "name#s" reaches a shard
	c, err := New(p, d, entry)
	if err != nil {
		d.Close()
		return nil, err
	}
	if key, ok := cert.PrivateKey.(crypto.Signer); ok {
		c.SetSigner(h.Self.Name, key)
	}
	return c, nil
}

// SetSigner makes the client sign as the member name with key (its
// certificate's key): an operator's enrollments and deletions, any
// client's hidden probes. Every party checks the signature against the
// certificate in the cluster configuration.
func (c *Client) SetSigner(name string, key crypto.Signer) { c.name, c.key = name, key }

// operator refuses, before sending, a change from a client without a
// key.
func (c *Client) operator(op protocol.OpKind) error {
	if c.key == nil {
		return notSent{fmt.Errorf("this client has no operator key: only an operator (idface client init --role operator) may %s", op)}
	}
	return nil
}

// RoleError is a request the client's role may not send (a device's
// enrollment, deletion or reshare): every server refuses it on its type
// alone, so the client refuses it before sending. Sent, a large request
// would be cut off while it is written, and the refusal read as a lost
// answer.
type RoleError struct {
	Name string
	Role network.Role
	Type protocol.Type
	To   string
}

func (e *RoleError) Error() string {
	return fmt.Sprintf("%s (%s) may not send %v to %s: only an operator enrolls, deletes and reshares; use an operator's identity (idface client init --role operator)", e.Name, e.Role, e.Type, e.To)
}

// role is the role the servers know this client by: its member's in the
// configuration (0 when it signs as no member).
func (c *Client) role() network.Role {
	if c.name == "" {
		return 0
	}
	for _, peer := range c.p.Pins() {
		if peer.Name == c.name {
			return peer.Role
		}
	}
	return 0
}

// mayChange refuses, before sending it to server to, a change of type t
// from a member whose role the servers refuse it to (engine.Operators:
// operators, and parties forwarding).
func (c *Client) mayChange(t protocol.Type, to string) error {
	switch r := c.role(); r {
	case network.RoleDevice, network.RoleHelper:
		return notSent{&RoleError{Name: c.name, Role: r, Type: t, To: to}}
	}
	return nil
}

// MayChange reports, without sending anything, whether this client may
// send op: a *RoleError (Refused) when its role may not.
func (c *Client) MayChange(op protocol.OpKind) error {
	t := protocol.TDelete
	if op == protocol.OpPut {
		t = protocol.TEnroll
		if c.p.Spec().Sealed {
			t = protocol.TSealedEnroll
		}
	}
	return c.mayChange(t, c.Entry())
}

// RoleRefused reports whether err refuses a change for the sender's role
// or authority (this client's RoleError, or a server's CodeForbidden):
// sending it again, --resume included, is refused alike; another
// identity is needed.
func RoleRefused(err error) bool {
	var re *RoleError
	var pe *protocol.Error
	return errors.As(err, &re) || errors.As(err, &pe) && pe.Code == protocol.CodeForbidden
}

// sign authorises op on ids, with a fresh nonce for each request.
func (c *Client) sign(op protocol.OpKind, ids []string) (protocol.Auth, error) {
	if err := c.operator(op); err != nil {
		return protocol.Auth{}, err
	}
	a, err := protocol.Sign(c.key, c.name, c.p.ClusterID(), op, ids)
	if err != nil {
		return a, notSent{err}
	}
	return a, nil
}

// notSent is a failure before a request left the client.
type notSent struct{ error }

func (e notSent) Unwrap() error { return e.error }

// Close closes the connections.
func (c *Client) Close() { c.d.Close() }

// Entry names the entry server.
func (c *Client) Entry() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entry
}

func (c *Client) call(ctx context.Context, to string, req protocol.Msg, want protocol.Type) (protocol.Msg, error) {
	resp, err := rpc.Call(ctx, c.d, to, req)
	if err != nil {
		return nil, err
	}
	if resp.Type() != want {
		return nil, fmt.Errorf("unexpected answer %v to %v", resp.Type(), req.Type())
	}
	return resp, nil
}

// Enroll enrolls a batch atomically: every id at every server, or none.
// In a sharded cluster a batch is atomic per shard: the client splits it
// by shard (an operator's signature covers one request's ids, which one
// shard holds) and sends the parts at once.
func (c *Client) Enroll(ctx context.Context, items []protocol.Item) error {
	if err := c.MayChange(protocol.OpPut); err != nil {
		return err
	}
	for i, it := range items { // the servers check again; this says so before the templates travel
		if err := protocol.CheckID(it.ID); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	if c.p.Shards() > 1 {
		return c.enrollShards(ctx, items)
	}
	return c.enroll(ctx, items)
}

// enrollShards enrolls the items of each shard in one request, the shards
// at once.
func (c *Client) enrollShards(ctx context.Context, items []protocol.Item) error {
	if err := c.p.CanPlace(); err != nil {
		return notSent{err}
	}
	parts := make([][]protocol.Item, c.p.Shards())
	for _, it := range items {
		s := c.p.ShardOf(it.ID)
		parts[s] = append(parts[s], it)
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for s, part := range parts {
		if len(part) > 0 {
			wg.Go(func() { errs[s] = c.enroll(ctx, part) })
		}
	}
	wg.Wait()
	var done []int
	var first error
	for s, err := range errs {
		switch {
		case err != nil && first == nil:
			first = fmt.Errorf("shard %d: %w", s, err)
		case err == nil && len(parts[s]) > 0:
			done = append(done, s)
		}
	}
	if first != nil && len(done) > 0 {
		return fmt.Errorf("%w (the ids of shards %v were enrolled: a sharded cluster's batch is atomic per shard)", first, done)
	}
	return first
}

// enroll enrolls a batch that one shard holds, or any batch outside
// shards.
func (c *Client) enroll(ctx context.Context, items []protocol.Item) error {
	if c.p.Spec().Sealed { // no server sees a template
		return c.enrollSealed(ctx, items)
	}
	m := &protocol.Enroll{Items: items}
	auth, err := c.sign(protocol.OpPut, m.IDs())
	if err != nil {
		return err
	}
	m.Auth = auth
	resp, err := c.call(ctx, c.Entry(), m, protocol.TEnrollOK)
	if err != nil {
		return err
	}
	if n := resp.(*protocol.EnrollOK).Count; int(n) != len(items) {
		return fmt.Errorf("the entry acknowledged %d of %d enrollments", n, len(items))
	}
	return nil
}

// Identify returns the entry's answer for a template: the accepted ids (at
// most k) or a rejection. In a mode that answers with a party down
// (config.ModeSpec.Outage), an entry that cannot be reached is replaced by
// the next party that can, which stays the entry.
func (c *Client) Identify(ctx context.Context, tmpl []float32, k int) (*protocol.IdentifyOK, error) {
	// A hidden probe is sealed afresh for every attempt: holders run a
	// probe's nonce once, and the unreachable entry may have relayed it.
	var verdictKey [32]byte
	msg := func() (protocol.Msg, error) {
		if c.p.HideProbes() { // no server sees the probe
			if c.key == nil {
				return nil, fmt.Errorf("this client has no key to sign its probe: a hidden-probe cluster runs only probes signed by one of its clients (open the client from its home)")
			}
			pr, err := HideProbe(c.p, c.key, c.name, tmpl, k)
			if err != nil {
				return nil, err
			}
			verdictKey = pr.VerdictKey
			return pr.HiddenIdentify, nil
		}
		return &protocol.Identify{TopK: uint16(k), Template: tmpl}, nil
	}
	m, err := msg()
	if err != nil {
		return nil, err
	}
	entry := c.Entry()
	if c.p.Spec().Outage {
		if entry, err = c.reachable(ctx, entry); err != nil {
			return nil, err
		}
	}
	resp, err := c.call(ctx, entry, m, protocol.TIdentifyOK)
	if c.p.Spec().Outage {
		from := c.p.PartyIndex(entry)
		for i := 1; i < c.p.Mu() && err != nil && c.unreached(ctx, err); i++ {
			next := c.p.Party((from + i) % c.p.Mu()).Name
			if m, err = msg(); err != nil {
				return nil, err
			}
			if resp, err = c.call(ctx, next, m, protocol.TIdentifyOK); err == nil {
				c.mu.Lock()
				c.entry = next
				c.mu.Unlock()
			}
		}
	}
	if err != nil {
		return nil, err
	}
	ans := resp.(*protocol.IdentifyOK)
	if c.p.HideProbes() {
		if err := CheckVerdicts(c.p, verdictKey, ans); err != nil {
			return nil, err
		}
	}
	return ans, nil
}

// raceAfter is how long a client waits for its entry's handshake before
// it also tries the other parties (a mode that answers with a party
// down): an entry that is down shows only as a handshake timeout (3 s),
// which a new client (a gate restarted during an outage) would otherwise
// wait out on its first identify. A live entry's handshake takes a round
// trip or two; on a link slower than that, another party that answers
// first becomes the entry (any party serves as one in these modes).
const raceAfter = time.Second

// Reach makes the entry a party this client reaches, in a mode that
// answers with a party down (as Identify does before it sends), and
// returns it; in other modes the entry as it is.
func (c *Client) Reach(ctx context.Context) string {
	if !c.p.Spec().Outage {
		return c.Entry()
	}
	entry, _ := c.reachable(ctx, c.Entry()) // none reached: the caller's request says why
	return entry
}

// reachable returns the entry to send an identify to: entry when it is
// connected, or connects within raceAfter; else the first party (entry
// included) to connect, which becomes the entry. Only handshakes race:
// the probe goes to one party. Where no party connects, an error naming
// the last failure (before, each party's handshake timed out in turn).
func (c *Client) reachable(ctx context.Context, entry string) (string, error) {
	cn, ok := c.d.(network.Connector)
	if !ok || c.p.Mu() < 2 || cn.Connected(entry) { // the common case, on every identify: nothing to race
		return entry, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel() // the handshakes still running are given up
	won := make(chan string, c.p.Mu())
	failed := make(chan error, c.p.Mu())
	try := func(name string) {
		go func() {
			if err := cn.Connect(rctx, name); err != nil {
				failed <- err
			} else {
				won <- name
			}
		}()
	}
	try(entry)
	timer := time.NewTimer(raceAfter)
	defer timer.Stop()
	tried, done, raced := 1, 0, false
	race := func() { // the entry is slow or failed: try the others too
		if raced {
			return
		}
		raced = true
		from := c.p.PartyIndex(entry)
		for i := 1; i < c.p.Mu(); i++ {
			try(c.p.Party((from + i) % c.p.Mu()).Name)
		}
		tried = c.p.Mu()
	}
	var last error
	for done < tried {
		select {
		case name := <-won:
			if name != entry {
				c.mu.Lock()
				c.entry = name
				c.mu.Unlock()
			}
			return name, nil
		case last = <-failed:
			done++
			race()
		case <-timer.C:
			race()
		case <-ctx.Done():
			return entry, nil // the call says the context ended
		}
	}
	return entry, fmt.Errorf("no party of the cluster could be reached (%d tried): %w", tried, last)
}

// unreached reports whether err is a failure to reach a server, not its
// answer, while ctx still has time; or a sharded entry's answer that it
// cannot reach one of its own shards (CodeShardDown): another entry's
// shards answer without it. Any other refusal stays the answer (asking
// another entry would show the probe to one more member for nothing).
func (c *Client) unreached(ctx context.Context, err error) bool {
	var pe *protocol.Error
	if ctx.Err() != nil {
		return false
	}
	return !errors.As(err, &pe) || c.p.Shards() > 1 && pe.Code == protocol.CodeShardDown
}

// Reshare asks share holder server, as an operator, to reshare its
// segment at every holder (replicated mode): every row's shares refreshed
// with a zero-sharing, the answer unchanged.
func (c *Client) Reshare(ctx context.Context, server string) (*protocol.ReshareOK, error) {
	if err := c.mayChange(protocol.TReshareRequest, server); err != nil {
		return nil, err
	}
	resp, err := c.call(ctx, server, &protocol.ReshareRequest{}, protocol.TReshareOK)
	if err != nil {
		return nil, err
	}
	return resp.(*protocol.ReshareOK), nil
}

// Delete revokes id at every server.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := c.MayChange(protocol.OpDelete); err != nil {
		return err
	}
	if err := protocol.CheckStoredID(id); err != nil {
		return err
	}
	auth, err := c.sign(protocol.OpDelete, []string{id})
	if err != nil {
		return err
	}
	_, err = c.call(ctx, c.Entry(), &protocol.Delete{Auth: auth, ID: id}, protocol.TDeleteOK)
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeUnknownID {
		if nfc := protocol.CheckID(id); nfc != nil { // ids are enrolled in NFC
			return fmt.Errorf("%w; %v", err, nfc)
		}
	}
	return err
}

// Health asks any server of the cluster for its state: a client gets the
// configuration the server runs and, as an operator, how many changes are
// unsettled there; never row counts or digests (protocol.HealthOK).
func (c *Client) Health(ctx context.Context, server string) (*protocol.HealthOK, error) {
	return c.health(ctx, server, false)
}

// ComparePeers is Health that also has the server compare its row map with
// every other server holding one and report each one's agreement
// (HealthOK.Peers; operators only: a device gets none). It may take the
// digest wait (at most 2 s) and a timed-out call to an unreachable peer.
func (c *Client) ComparePeers(ctx context.Context, server string) (*protocol.HealthOK, error) {
	return c.health(ctx, server, true)
}

func (c *Client) health(ctx context.Context, server string, peers bool) (*protocol.HealthOK, error) {
	resp, err := c.call(ctx, server, &protocol.Health{Peers: peers}, protocol.THealthOK)
	if err != nil {
		return nil, err
	}
	return resp.(*protocol.HealthOK), nil
}

// Bulk configures EnrollAll.
type Bulk struct {
	Batch int // templates per request; default 2048
	// InFlight is the number of requests in flight (in a sharded
	// cluster, per shard); default 1: batches commit in input order and
	// a failure leaves a committed prefix. In a sharded cluster a batch
	// holds one shard's items and the shards enroll at once, so what
	// commits before a failure is a prefix of each shard's items: items
	// of the input may be committed after others that were not sent.
	InFlight int
	Timeout  time.Duration // how long a server may stay silent on one request (rpc.Patient); default 60 s
	// Progress, when set, is told the acknowledged count after each batch.
	Progress func(done, total int)
	// Before, when set, is called before a batch is sent with its items'
	// indices, in increasing order (a journal records it); an error stops
	// the enrollment there.
	Before func(items []int) error
	// After, when set, is told each sent batch's outcome: nil when it was
	// committed, the error otherwise.
	After func(items []int, err error)
	// Dedupe searches the gallery for every template before it is sent,
	// and compares it with the batch's earlier items (Client.Dedupe): a
	// match is left out and told to Duplicate (nil: not told). Batches
	// then go one at a time, shards too, so that every search sees every
	// earlier batch enrolled.
	Dedupe    bool
	Duplicate func(Duplicate)
	// EnrollRefused, with Dedupe, in a cluster that hides probes, enrolls
	// an item whose search this client refused by its verdict (a check of
	// its hidden probe failed: one of the share holders deviates;
	// protocol.IsRefusedHidden), unchecked, and tells it to Unchecked once
	// its batch is enrolled; without it such a refusal stops the
	// enrollment there. The holders then see an enrollment follow a
	// search whatever its check's outcome (but for a duplicate, which a
	// passed search leaves out), so a deviating checker does not learn its
	// test's outcome from it; an unchecked item may be a duplicate: search
	// it again once the faulty holder is mended (docs/HIDDEN-PROBES.md).
	EnrollRefused bool
	Unchecked     func(item int, id string)
	// Spread sends the batches of an unsharded cluster through every
	// party in turn instead of through this client's entry, in a mode
	// whose parties are origins (config.Layout.Origins): each commits the
	// batches sent to it, one at a time, to its own segment, so the
	// parties' transactions run beside each other. InFlight is then per
	// party, and items commit out of input order even with InFlight 1.
	// Every party must be reachable: a batch sent through one that is
	// down fails the enrollment, where a single entry would have kept
	// that party's part for it. Ignored with Dedupe, in a sharded
	// cluster, and in other modes (HE's local servers forward every
	// change to one of them).
	Spread bool
}

// Range is the items [Lo, Hi).
type Range struct{ Lo, Hi int }

// BulkError reports a bulk enrollment that stopped. Committed lists the
// items acknowledged (durable at every server) in order; Refused the
// batches the cluster refused (rolled back everywhere); InDoubt the
// batches that got no answer, which may or may not be enrolled. No other
// item was sent.
type BulkError struct {
	Total                       int
	Committed, Refused, InDoubt []Range
	Duplicates                  []Range // left out as duplicates (Bulk.Dedupe)
	Err                         error   // the first failure
}

// Done is the number of items committed.
func (e *BulkError) Done() int {
	n := 0
	for _, r := range e.Committed {
		n += r.Hi - r.Lo
	}
	return n
}

// NotSent lists the items never sent.
func (e *BulkError) NotSent() []Range {
	var sent []Range
	sent = append(append(append(append(sent, e.Committed...), e.Refused...), e.InDoubt...), e.Duplicates...)
	slices.SortFunc(sent, func(a, b Range) int { return a.Lo - b.Lo })
	var out []Range
	at := 0
	for _, r := range sent {
		if r.Lo > at {
			out = append(out, Range{at, r.Lo})
		}
		at = max(at, r.Hi)
	}
	if at < e.Total {
		out = append(out, Range{at, e.Total})
	}
	return out
}

func (e *BulkError) Error() string {
	msg := fmt.Sprintf("enrolled %d of %d", e.Done(), e.Total)
	if len(e.Committed) > 0 {
		msg += " (items " + FormatRanges(e.Committed, 0) + ")"
	}
	if len(e.Refused) > 0 {
		msg += "; items " + FormatRanges(e.Refused, 0) + " were refused and rolled back"
	}
	if len(e.Duplicates) > 0 {
		msg += "; items " + FormatRanges(e.Duplicates, 0) + " were left out as duplicates"
	}
	if len(e.InDoubt) > 0 {
		msg += "; items " + FormatRanges(e.InDoubt, 0) + " got no answer and may or may not be enrolled"
	}
	if ns := e.NotSent(); len(ns) > 0 {
		msg += "; items " + FormatRanges(ns, 0) + " were not sent"
	}
	return msg + ": " + e.Err.Error()
}

func (e *BulkError) Unwrap() error { return e.Err }

// MaxListedRanges is how many ranges a report lists before it counts the
// rest (a sharded bulk enrollment that stopped leaves each shard's items
// interleaved: hundreds of ranges; the journal has every id).
const MaxListedRanges = 8

// FormatRanges writes ranges as "0-499, 600-699", each number plus base,
// listing MaxListedRanges of them and counting the others.
func FormatRanges(rs []Range, base int) string {
	var b strings.Builder
	for i, r := range rs {
		if i == MaxListedRanges {
			fmt.Fprintf(&b, " and %d more ranges", len(rs)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if r.Hi-r.Lo == 1 {
			fmt.Fprintf(&b, "%d", r.Lo+base)
		} else {
			fmt.Fprintf(&b, "%d-%d", r.Lo+base, r.Hi-1+base)
		}
	}
	return b.String()
}

// addRange adds r to sorted, non-overlapping ranges, merging neighbours.
func addRange(rs []Range, r Range) []Range {
	i, _ := slices.BinarySearchFunc(rs, r.Lo, func(x Range, lo int) int { return x.Lo - lo })
	rs = slices.Insert(rs, i, r)
	out := rs[:1]
	for _, x := range rs[1:] {
		if last := &out[len(out)-1]; last.Hi == x.Lo {
			last.Hi = x.Hi
		} else {
			out = append(out, x)
		}
	}
	return out
}

// Refused reports whether err is the cluster's definite refusal of a
// change (it was rolled back everywhere) or a failure before the request
// was sent, rather than a missing answer
// (a timeout, a lost connection, or an entry that could not reach the
// server deciding it), after which the change may or may not be applied.
func Refused(err error) bool {
	var pe *protocol.Error
	var ns notSent
	return errors.As(err, &ns) || (errors.As(err, &pe) && pe.Code != protocol.CodeUnavailable)
}

// EnrollAll enrolls n items (item(i) makes the i-th) in batches, with
// o.InFlight requests at a time, and stops at the first failure: no batch
// is sent after it. On failure the *BulkError says exactly which items
// were committed, refused, left in doubt and not sent.
//
// In a sharded cluster every batch holds the items of one shard (up to
// o.Batch of them, in input order), so that each request commits or
// fails as a whole: a batch split over shards could commit in one shard
// and be refused in another. Each shard has o.InFlight requests in
// flight, so the shards enroll at once, and each gets batches as large
// as the unsharded cluster's (an HE shard encrypts a whole column group's
// delta however few of its rows a request carries). A shard's items
// wait as indices (item is called again to send them), not as templates.
func (c *Client) EnrollAll(ctx context.Context, n int, item func(i int) protocol.Item, o Bulk) (int, error) {
	o, err := c.bulkDefaults(o)
	if err != nil {
		return 0, err
	}
	S := c.p.Shards()
	if S > 1 {
		if err := c.p.CanPlace(); err != nil {
			return 0, err
		}
	}
	b := &bulkRun{c: c, ctx: ctx, n: n, item: item, o: o, res: &BulkError{Total: n}, sems: make([]chan struct{}, S)}
	if S == 1 && o.Spread && !o.Dedupe && c.p.Spec().Origins {
		for k := range c.p.Mu() {
			b.vias = append(b.vias, c.via(c.p.Party(k).Name))
		}
		b.sems = make([]chan struct{}, len(b.vias))
	}
	for s := range b.sems {
		b.sems[s] = make(chan struct{}, o.InFlight)
	}
	if S == 1 {
		b.sendUnsharded()
	} else {
		b.sendSharded(S)
	}
	b.wg.Wait()
	if b.res.Err != nil {
		return b.done, b.res
	}
	return b.done, nil
}

// bulkDefaults fills o's defaults and checks its batch size.
func (c *Client) bulkDefaults(o Bulk) (Bulk, error) {
	if o.Batch == 0 {
		o.Batch = 2048
	}
	if o.InFlight == 0 {
		o.InFlight = 1
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Batch < 1 || o.Batch > protocol.MaxBatch {
		return o, fmt.Errorf("batch of %d: want 1..%d", o.Batch, protocol.MaxBatch)
	}
	o.Batch = min(o.Batch, c.p.MaxEnrollBatch()) // what the cluster takes in one request
	return o, nil
}

// bulkRun is one EnrollAll: its batches in flight, per shard, and what
// became of the items.
type bulkRun struct {
	c    *Client
	ctx  context.Context
	n    int
	item func(i int) protocol.Item
	o    Bulk
	sems []chan struct{} // requests in flight, per shard (per party with Spread)
	vias []*Client       // with Spread: a client through each party
	wg   sync.WaitGroup

	mu   sync.Mutex
	res  *BulkError
	done int
}

// sendUnsharded sends the items in batches of o.Batch, in input order
// (with Spread, batch k through party k mod mu).
func (b *bulkRun) sendUnsharded() {
	for k, lo := 0, 0; lo < b.n; k, lo = k+1, lo+b.o.Batch {
		hi := min(lo+b.o.Batch, b.n)
		idx, items := make([]int, 0, hi-lo), make([]protocol.Item, 0, hi-lo)
		for i := lo; i < hi; i++ {
			idx, items = append(idx, i), append(items, b.item(i))
		}
		if !b.send(k%len(b.sems), idx, items) {
			return
		}
	}
}

// via is a client like c that sends its requests to party entry.
func (c *Client) via(entry string) *Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &Client{p: c.p, d: c.d, entry: entry, name: c.name, key: c.key}
}

// sendSharded sends each shard's items in batches: they wait until they
// fill a batch; what is left is sent at the end, shard by shard.
func (b *bulkRun) sendSharded(S int) {
	idx := make([][]int, S)
	stopped := false
	for i := 0; i < b.n && !stopped; i++ {
		s := b.c.p.ShardOf(b.item(i).ID)
		idx[s] = append(idx[s], i)
		if len(idx[s]) == b.o.Batch {
			stopped = !b.send(s, idx[s], nil)
			idx[s] = nil
		}
	}
	for s := range idx {
		if !stopped && len(idx[s]) > 0 {
			stopped = !b.send(s, idx[s], nil)
		}
	}
}

// failed reports whether the enrollment has stopped.
func (b *bulkRun) failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.res.Err != nil
}

// stop records err as the enrollment's failure unless one came first.
func (b *bulkRun) stop(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.res.Err == nil {
		b.res.Err = err
	}
}

// send sends one batch of lane s (the shard, 0 unsharded; the party with
// Spread), items idx (made from idx when nil); false once the enrollment
// has stopped.
func (b *bulkRun) send(s int, idx []int, items []protocol.Item) bool {
	sem := b.sems[s]
	sem <- struct{}{}
	if b.failed() { // checked once a slot is free: a batch that failed meanwhile stops the rest
		<-sem
		return false
	}
	if items == nil {
		items = make([]protocol.Item, len(idx))
		for k, i := range idx {
			items[k] = b.item(i)
		}
	}
	var unchecked []int // items of this batch enrolled with their search refused (EnrollRefused)
	if b.o.Dedupe {
		keepIdx, keep, refused, ok := b.dedupe(idx, items)
		if !ok || len(keep) == 0 {
			<-sem
			return ok
		}
		idx, items, unchecked = keepIdx, keep, refused
	}
	if b.o.Before != nil {
		if err := b.o.Before(idx); err != nil {
			b.stop(err)
			<-sem
			return false
		}
	}
	b.wg.Go(func() {
		defer func() { <-sem }()
		cl := b.c
		if b.vias != nil {
			cl = b.vias[s]
		}
		err := cl.Enroll(rpc.Patient(b.ctx, b.o.Timeout), items)
		b.record(idx, len(items), err)
		if err == nil && b.o.Unchecked != nil { // told once enrolled
			for _, i := range unchecked {
				b.o.Unchecked(i, items[slices.Index(idx, i)].ID)
			}
		}
	})
	if b.o.Dedupe {
		b.wg.Wait() // the next batch's search must see this one
	}
	return true
}

// dedupe leaves out of a batch the items that match an enrolled row or
// an earlier item (o.Dedupe), counting them; ok is false when the search
// failed (the enrollment stops).
func (b *bulkRun) dedupe(idx []int, items []protocol.Item) (keepIdx []int, keep []protocol.Item, unchecked []int, ok bool) {
	keepIdx, keep, dups, unchecked, err := b.c.dedupe(b.ctx, idx, items, b.o.Timeout, b.o.EnrollRefused)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil && b.res.Err == nil {
		b.res.Err = err
	}
	for _, d := range dups {
		b.res.Duplicates = addRange(b.res.Duplicates, Range{d.Item, d.Item + 1})
		if b.o.Duplicate != nil {
			b.o.Duplicate(d)
		}
	}
	return keepIdx, keep, unchecked, err == nil
}

// record files a batch's items (idx, count of them sent) by the outcome
// of its request.
func (b *bulkRun) record(idx []int, count int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.o.After != nil {
		b.o.After(idx, err)
	}
	into := &b.res.InDoubt
	switch {
	case err == nil:
		into = &b.res.Committed
		b.done += count
		if b.o.Progress != nil {
			b.o.Progress(b.done, b.n)
		}
	case Refused(err):
		into = &b.res.Refused
	}
	for _, r := range Ranges(idx) {
		*into = addRange(*into, r)
	}
	if err != nil && b.res.Err == nil {
		b.res.Err = err
	}
}

// Ranges are the runs of consecutive indices in idx (increasing).
func Ranges(idx []int) []Range {
	var out []Range
	for _, i := range idx {
		if k := len(out) - 1; k >= 0 && out[k].Hi == i {
			out[k].Hi++
			continue
		}
		out = append(out, Range{i, i + 1})
	}
	return out
}
