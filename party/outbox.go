package party

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/idface/idface/protocol"
	"github.com/idface/idface/transport"
)

// outbox holds messages (decisions, deletions) that other servers have not
// acknowledged yet, per server, in order. They are retried in the
// background and before the next transaction, which must not start while
// a server still misses an earlier change.
type outbox struct {
	mu      sync.Mutex
	q       map[int][]protocol.Msg
	members []Member
	dialer  *transport.Dialer
	log     *slog.Logger
}

func newOutbox(members []Member, d *transport.Dialer, log *slog.Logger) *outbox {
	return &outbox{q: map[int][]protocol.Msg{}, members: members, dialer: d, log: log}
}

func (o *outbox) add(k int, m protocol.Msg) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.q[k] = append(o.q[k], m)
	o.log.Warn("message not delivered; will retry", "to", o.members[k].Name, "type", fmt.Sprintf("%T", m))
}

// len counts the unacknowledged messages.
func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ms := range o.q {
		n += len(ms)
	}
	return n
}

// flush delivers every queued message in order; it fails naming the
// servers that still have not acknowledged.
func (o *outbox) flush(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var missing []string
	for k, ms := range o.q {
		for len(ms) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _, err := call(cctx, o.dialer, o.members[k], ms[0])
			cancel()
			if err != nil {
				missing = append(missing, fmt.Sprintf("%s (%v)", o.members[k].Name, err))
				break
			}
			ms = ms[1:]
		}
		if len(ms) == 0 {
			delete(o.q, k)
		} else {
			o.q[k] = ms
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("servers have not confirmed an earlier change: %s", strings.Join(missing, ", "))
	}
	return nil
}

// loop retries every 500 ms while ctx lives, whenever txn (the lock that
// serialises this server's transactions) is free.
func (o *outbox) loop(ctx context.Context, txn *sync.Mutex) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if o.len() > 0 && txn.TryLock() {
				if o.flush(ctx) == nil {
					o.log.Info("outstanding decisions delivered")
				}
				txn.Unlock()
			}
		}
	}
}

// readRequest reads and decodes one request; on failure it has already
// answered with an error and returns nil.
func readRequest(s *transport.Stream) protocol.Msg {
	b, err := s.ReadFrame(protocol.MaxFrame)
	if err != nil {
		s.WriteFrame(protocol.Marshal(protocol.Errorf(protocol.CodeBadRequest, "reading the request: %v", err)))
		return nil
	}
	m, err := protocol.Decode(b)
	if err != nil {
		s.WriteFrame(protocol.Marshal(protocol.Errorf(protocol.CodeBadRequest, "%v", err)))
		return nil
	}
	return m
}
