package rollout

import (
	"context"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// appendQueue is a store's group commit: appends wait in it for a driver
// to write them, with the others waiting at the same time, as one WAL entry
// (see doc.go, "Writes"). It knows nothing of the WAL: write is the store's
// (Store.appendBatch).
type appendQueue struct {
	// write makes the batches of appends callers durable in one entry.
	write func(ctx context.Context, appends int, batches ...arrow.RecordBatch) error

	mu      sync.Mutex
	queue   []*queuedAppend
	drivers int
	last    time.Time // when a driver last took from queue
	// The groups being written: how many (one, or two with one queued
	// in the WAL writer behind the other), when the running one started,
	// the moving average of a write, and a channel closed when a write
	// ends (see takeAt).
	writing    int
	writeStart time.Time
	writeAvg   time.Duration
	wrote      chan struct{}
}

// queuedAppend is one caller's append waiting in an appendQueue: records to
// be built into the group's shared batch (a small JSON append), or batches
// the caller built or sent (a large JSON append, an Arrow append).
type queuedAppend struct {
	ctx     context.Context
	recs    []Record
	batches []arrow.RecordBatch // retained by the queue
	rows    int
	size    int // approximate bytes
	done    chan error
}

func (a *queuedAppend) release() {
	for _, b := range a.batches {
		b.Release()
	}
}

// The store's group commit (see doc.go, "Writes"): the only place where
// appends wait for one another.
const (
	// buildBelowRecords: JSON appends with fewer records are built into
	// one batch together with the other such appends of their group.
	// Building and encoding a batch of the 38-column schema has a fixed
	// cost (about 170 µs) far above that of a small row.
	buildBelowRecords = 64
	// groupMaxRecords and groupMaxBytes bound one group (one WAL entry);
	// an append larger than that is a group of its own.
	groupMaxRecords = 4096
	groupMaxBytes   = 8 << 20
	// groupDrivers is how many groups may be in flight at once: one being
	// written while the next is formed and built.
	groupDrivers = 2
	// groupTimeout bounds the write of one group.
	groupTimeout = 2 * time.Minute
	// groupWindow is the least time between two takes from the queue
	// while the other driver's group is in flight: the fixed costs of a
	// group (building its batch, encoding, one WAL write) are then shared
	// by every append of the window instead of the few that arrived
	// during the last take. An idle store appends at once.
	groupWindow = 2 * time.Millisecond
	// groupLead: while a group is being written, the next is taken when
	// that write is expected to be groupLead (as a fraction of a write)
	// from its end, or when it ends, so that the next group is built
	// while the write runs and holds every append that arrived meanwhile:
	// on S3 (a 20 ms put) the window alone would send the next group 2 ms
	// after the last, to wait 18 ms in the WAL writer with a tenth of the
	// appends it could carry.
	groupLead = 8
)

// takeAt returns when the next group may be taken from the queue while
// another is in flight (mu held).
func (q *appendQueue) takeAt() time.Time {
	at := q.last.Add(groupWindow)
	if q.writing > 0 {
		if due := q.writeStart.Add(q.writeAvg - q.writeAvg/groupLead); due.After(at) {
			at = due
		}
	}
	return at
}

// enqueue puts a in the append queue, to be written together with the
// other appends waiting at the same time as one WAL entry. It returns when
// that entry is durable (or failed), or when ctx ends, in which case the
// rows may still be written but are not acknowledged, as with wal.Append.
// It takes over a's batches.
func (q *appendQueue) enqueue(ctx context.Context, a *queuedAppend) error {
	a.ctx, a.done = ctx, make(chan error, 1)
	q.mu.Lock()
	q.queue = append(q.queue, a)
	start := q.drivers < groupDrivers
	if start {
		q.drivers++
	}
	q.mu.Unlock()
	if start {
		go q.drive()
	}
	select {
	case err := <-a.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drive writes queued appends, as many as are waiting (up to the group
// bounds) per WAL entry, until the queue is empty.
func (q *appendQueue) drive() {
	for {
		q.mu.Lock()
		if wait := time.Until(q.takeAt()); wait > 0 && q.drivers > 1 && len(q.queue) > 0 && len(q.queue) < groupMaxRecords/4 {
			if q.wrote == nil {
				q.wrote = make(chan struct{})
			}
			wrote := q.wrote
			q.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-wrote: // the WAL writer is free: no reason to wait on
			}
			t.Stop()
			q.mu.Lock()
		}
		q.last = time.Now()
		n, rows, size := 0, 0, 0
		for n < len(q.queue) && (n == 0 || (rows+q.queue[n].rows <= groupMaxRecords && size+q.queue[n].size <= groupMaxBytes)) {
			rows += q.queue[n].rows
			size += q.queue[n].size
			n++
		}
		if n == 0 {
			q.drivers--
			q.mu.Unlock()
			return
		}
		taken := q.queue[:n:n]
		q.queue = q.queue[n:]
		q.mu.Unlock()
		q.writeGroup(taken)
	}
}

// writeGroup writes the appends of one group as one WAL entry and answers
// each of them.
func (q *appendQueue) writeGroup(taken []*queuedAppend) {
	group := taken[:0:0]
	var small []Record
	var batches []arrow.RecordBatch
	for _, a := range taken {
		if err := a.ctx.Err(); err != nil {
			// Its caller has gone: not written, not acknowledged.
			a.release()
			a.done <- err
			continue
		}
		group = append(group, a)
		small = append(small, a.recs...)
		batches = append(batches, a.batches...)
	}
	if len(group) == 0 {
		return
	}
	if len(small) > 0 {
		built := buildBatch(small)
		defer built.Release()
		batches = append(batches, built)
	}
	// Not a caller's context: the entry carries several callers' rows.
	// Each caller stops waiting on its own context; the bound keeps a
	// stuck store from holding the driver forever.
	q.mu.Lock()
	if q.writing == 0 {
		q.writeStart = time.Now()
	}
	q.writing++
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	err := q.write(ctx, len(group), batches...)
	cancel()
	q.mu.Lock()
	// The WAL writer takes groups in order: this write ran from
	// awriteStart (its start, or the end of the write before it), and the
	// one queued behind it, if any, runs from now.
	q.writing--
	now := time.Now()
	q.writeAvg += (now.Sub(q.writeStart) - q.writeAvg) / 4
	if q.writing > 0 {
		q.writeStart = now
	}
	if q.wrote != nil {
		close(q.wrote)
		q.wrote = nil
	}
	q.mu.Unlock()
	for _, a := range group {
		a.release()
		a.done <- err
	}
}
