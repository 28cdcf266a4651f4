package abis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"
)

// Broker says where the queues are: a STOMP 1.2 broker (ActiveMQ's
// STOMP connector) and the two queues MOSIP's ABIS middleware uses.
type Broker struct {
	Addr     string // host:port of the STOMP connector
	User     string
	Password string
	Inbound  string // requests from MOSIP (e.g. /queue/ctk-to-abis)
	Outbound string // answers to MOSIP (e.g. /queue/abis-to-ctk)
	// InFlight bounds the requests held at once (received, not yet
	// acknowledged): the broker's prefetch and the adapter's workers.
	// Default 8. What is not acknowledged stays at the broker, which is
	// the back-pressure.
	InFlight int
	// Bytes sends answers as bytes messages (a content-length header);
	// default text messages. MOSIP reads either (its ABIS middleware's
	// message format setting).
	Bytes     bool
	HeartBeat time.Duration // default 10 s
	// TLS, when set, reaches the broker over TLS (ActiveMQ's stomp+ssl
	// connector) with this configuration; nil: plain TCP.
	TLS *tls.Config
}

// Transport names how the broker is reached: TLS or TCP.
func (b Broker) Transport() string {
	if b.TLS != nil {
		return "TLS"
	}
	return "TCP"
}

// dial connects to the broker and logs in.
func (b Broker) dial(ctx context.Context) (*stomp.Conn, error) {
	opts := []func(*stomp.Conn) error{
		stomp.ConnOpt.Login(b.User, b.Password),
		stomp.ConnOpt.AcceptVersion(stomp.V12),
		stomp.ConnOpt.HeartBeat(b.HeartBeat, b.HeartBeat),
		stomp.ConnOpt.Host("/"),
		// pendingJobs' browse unsubscribes when it ends: its wait is
		// bounded with the browse's (jobs.go).
		stomp.ConnOpt.UnsubscribeReceiptTimeout(unsubscribeWait),
	}
	if b.TLS == nil {
		conn, err := stomp.Dial("tcp", b.Addr, opts...)
		if err != nil {
			return nil, fmt.Errorf("abis: connecting to the broker at %s: %w", b.Addr, err)
		}
		return conn, nil
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second}, Config: b.TLS}
	nc, err := d.DialContext(ctx, "tcp", b.Addr)
	if err != nil {
		return nil, fmt.Errorf("abis: connecting to the broker at %s over TLS: %w", b.Addr, err)
	}
	conn, err := stomp.Connect(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("abis: logging in to the broker at %s over TLS: %w", b.Addr, err)
	}
	return conn, nil
}

// Serve consumes b.Inbound and answers on b.Outbound until ctx ends or
// the connection fails (the caller reconnects). Each request is
// acknowledged in the same STOMP transaction that sends its answer, after
// a change's answer is in the journal: a request the broker redelivers
// (the adapter stopped before the commit) is answered from the journal,
// or served afresh if it changes nothing, and MOSIP receives each answer
// once.
//
// The changes (insert, delete) of one referenceId are served in the order
// received; changes of different referenceIds run beside each other (the
// inserts among them enrolled in batches: batch.go); an identify or
// referenceCount waits for every change received before it; identifies
// run beside each other.
func (a *Adapter) Serve(ctx context.Context, b Broker) error {
	if b.InFlight <= 0 {
		b.InFlight = 8
	}
	if b.HeartBeat <= 0 {
		b.HeartBeat = 10 * time.Second
	}
	conn, err := b.dial(ctx)
	if err != nil {
		return err
	}
	sub, err := conn.Subscribe(b.Inbound, stomp.AckClientIndividual,
		stomp.SubscribeOpt.Header("activemq.prefetchSize", strconv.Itoa(b.InFlight)))
	if err != nil {
		conn.MustDisconnect()
		return fmt.Errorf("abis: subscribing to %s: %w", b.Inbound, err)
	}
	if strings.HasPrefix(conn.Server(), "ActiveMQ/") {
		// Only ActiveMQ's STOMP browses a queue (another broker would take
		// a browse for a consumer, and consume the requests).
		a.jobs.serving(func(ctx context.Context, skip func(string) bool) (int, error) {
			return Queued(ctx, conn, b.Inbound, maxBrowse, skip)
		})
		defer a.jobs.serving(nil)
	} else {
		a.o.Log.Warn("abis: the broker is not ActiveMQ: pendingJobs counts only the requests the adapter holds", "server", conn.Server())
	}
	a.o.Log.Info("abis: serving", "broker", b.Addr, "inbound", b.Inbound, "outbound", b.Outbound, "in_flight", b.InFlight)

	slots := make(chan struct{}, b.InFlight)
	var wg sync.WaitGroup
	failed := make(chan error, 1)
	stop := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	defer func() {
		wg.Wait()
		conn.MustDisconnect()
	}()
	var ord ordering
	for {
		var msg *stomp.Message
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case msg = <-sub.C:
		}
		if msg == nil {
			return errors.New("abis: the subscription ended")
		}
		if msg.Err != nil {
			return fmt.Errorf("abis: broker: %w", msg.Err)
		}
		select {
		case slots <- struct{}{}:
		case err := <-failed:
			return err
		case <-ctx.Done():
			return nil
		}
		id := msg.Header.Get("message-id")
		a.jobs.take(id)
		q, bad := Decode(msg.Body)
		after, done := ord.next(q, bad)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer a.jobs.done(id)
			served := func() {
				if done != nil {
					close(done)
					done = nil
				}
			}
			defer served()
			if err := a.handle(ctx, conn, b, msg, q, bad, after, served); err != nil {
				a.o.Log.Error("abis: a request was not answered (the broker redelivers it)", "request", q.RequestID, "err", err)
				stop(err)
			}
		}()
	}
}

// handle answers one request: served is called once the request's
// change (if any) is done and recorded, so that the next one may start
// while this answer goes to the broker.
func (a *Adapter) handle(ctx context.Context, conn *stomp.Conn, b Broker, msg *stomp.Message, q *Request, bad *Error, after []chan struct{}, served func()) error {
	turn := func() error {
		for _, c := range after {
			select {
			case <-c:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	// A request begun is finished even when the adapter is told to
	// stop (but for waiting its turn): a change's answer is final once
	// recorded.
	resp, err := a.Answer(context.WithoutCancel(ctx), q, bad, turn)
	if err != nil {
		return err
	}
	served()
	tx, err := conn.BeginWithError()
	if err != nil {
		return err
	}
	opts := []func(*frame.Frame) error{stomp.SendOpt.Header("persistent", "true")}
	if !b.Bytes {
		opts = append(opts, stomp.SendOpt.NoContentLength)
	}
	if err := tx.Send(b.Outbound, "application/json", resp, opts...); err != nil {
		tx.Abort()
		return err
	}
	if err := tx.Ack(msg); err != nil {
		tx.Abort()
		return err
	}
	// No receipt is awaited: a commit that does not reach the broker
	// leaves the request unacknowledged, and its redelivery is answered
	// again (a change from the journal).
	return tx.Commit()
}

// ordering is Serve's order of requests: the changes not yet served, and
// the last change of each referenceId.
type ordering struct {
	changes []chan struct{}
	last    map[string]chan struct{}
}

// next is what request q (bad: refused by Decode) waits for before its
// turn, and, for a change, the channel to close once it is served.
func (o *ordering) next(q *Request, bad *Error) (after []chan struct{}, done chan struct{}) {
	o.changes = slices.DeleteFunc(o.changes, closed)
	if bad != nil || !q.Change() {
		return slices.Clone(o.changes), nil // every change received before it
	}
	if o.last == nil || len(o.last) > 4*len(o.changes)+1024 {
		live := map[string]chan struct{}{}
		for ref, c := range o.last {
			if !closed(c) {
				live[ref] = c
			}
		}
		o.last = live
	}
	done = make(chan struct{})
	if prev, ok := o.last[q.Ref()]; ok && !closed(prev) {
		after = []chan struct{}{prev}
	}
	o.last[q.Ref()] = done
	o.changes = append(o.changes, done)
	return after, done
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
