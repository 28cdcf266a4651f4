package abis

import (
	"context"
	"errors"
	"sync"

	"github.com/idface/idface/protocol"
)

// Enrollments in batches. Inserts of different referenceIds run beside
// each other (Serve orders only the changes of one referenceId), and
// every enrollment is one transaction at the cluster, whose entry runs
// them one at a time: so the inserts that wait while one enrollment runs
// go together in the next, one transaction for all of them. A batch the
// cluster refuses as a whole for one of its items (a referenceId already
// enrolled, a template it refuses) is enrolled again item by item, so that
// each insert gets its own answer; any other failure (the cluster
// unreachable, a timeout: the batch may or may not be enrolled) is every
// item's, as it would be alone.

// maxEnrollBatch bounds one batch (well below any cluster's limit; a
// batch over the cluster's is refused and enrolled item by item).
const maxEnrollBatch = 64

type enrollment struct {
	item protocol.Item
	done chan error
}

// batcher queues enrollments while one batch runs.
type batcher struct {
	mu      sync.Mutex
	queue   []*enrollment
	running bool
}

// enroll enrolls item with the next batch and returns its outcome.
func (a *Adapter) enroll(item protocol.Item) error {
	e := &enrollment{item: item, done: make(chan error, 1)}
	b := &a.batches
	b.mu.Lock()
	b.queue = append(b.queue, e)
	if !b.running {
		b.running = true
		go a.runBatches()
	}
	b.mu.Unlock()
	return <-e.done
}

// runBatches enrolls the queue, a batch at a time, until it is empty.
func (a *Adapter) runBatches() {
	b := &a.batches
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxEnrollBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		items := make([]protocol.Item, len(batch))
		for i, e := range batch {
			items[i] = e.item
		}
		err := a.enrollNow(items)
		if len(batch) > 1 && refusedForAnItem(err) {
			for _, e := range batch {
				e.done <- a.enrollNow([]protocol.Item{e.item})
			}
			continue
		}
		for _, e := range batch {
			e.done <- err
		}
	}
}

func (a *Adapter) enrollNow(items []protocol.Item) error {
	ctx, cancel := context.WithTimeout(context.Background(), a.o.Timeout)
	defer cancel()
	return a.c.Enroll(ctx, items)
}

// refusedForAnItem reports whether err refuses a whole batch for what
// one of its items is (nothing of it was enrolled).
func refusedForAnItem(err error) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && (pe.Code == protocol.CodeDuplicate || pe.Code == protocol.CodeBadRequest)
}
