package rollout

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// fakeWrites is an appendQueue's write that records each group and can be
// held, to let appends pile up behind a write in flight.
type fakeWrites struct {
	mu      sync.Mutex
	groups  []int // appends per write
	started int   // appends in writes begun
	gate    chan struct{}
	err     error
}

func (f *fakeWrites) inWrites() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started
}

func (f *fakeWrites) write(ctx context.Context, appends int, _ ...arrow.RecordBatch) error {
	f.mu.Lock()
	f.started += appends
	f.mu.Unlock()
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = append(f.groups, appends)
	return f.err
}

// waitFor polls cond, under q's lock, until it holds.
func waitFor(t *testing.T, q *appendQueue, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		q.mu.Lock()
		ok := cond()
		q.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the queue never reached the state the test waits for")
		}
	}
}

// TestAppendQueueGroupsWhatWaits: appends arriving while a write is in
// flight go out together in a few writes, each caller answered once, and
// a write's error reaches every append of its group.
func TestAppendQueueGroupsWhatWaits(t *testing.T) {
	f := &fakeWrites{gate: make(chan struct{})}
	q := &appendQueue{write: f.write}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- q.enqueue(ctx, &queuedAppend{rows: 1, size: 1}) }()
	waitFor(t, q, func() bool { return q.writing > 0 }) // the first write is in flight
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- q.enqueue(ctx, &queuedAppend{rows: 1, size: 1}) })
	}
	// All 51 are queued or in a write held at the gate.
	waitFor(t, q, func() bool { return len(q.queue)+f.inWrites() == 51 })
	close(f.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, g := range f.groups {
		total += g
	}
	if total != 51 || len(f.groups) > 4 {
		t.Fatalf("writes of %v appends: want 51 appends in at most 4 writes", f.groups)
	}

	f2 := &fakeWrites{err: errors.New("the log is full")}
	q2 := &appendQueue{write: f2.write}
	if err := q2.enqueue(ctx, &queuedAppend{rows: 1, size: 1}); !errors.Is(err, f2.err) {
		t.Fatalf("a failed write answered %v", err)
	}
}

// TestAppendQueueSkipsCallersThatLeft: an append whose caller's context
// ended while it waited is not written (its caller was told it failed).
func TestAppendQueueSkipsCallersThatLeft(t *testing.T) {
	f := &fakeWrites{gate: make(chan struct{})}
	q := &appendQueue{write: f.write}
	go func() { _ = q.enqueue(context.Background(), &queuedAppend{rows: 1, size: 1}) }()
	waitFor(t, q, func() bool { return q.writing > 0 })
	// The second driver takes the next append at once: let it take a
	// live one and hang in its write too, so that the one that leaves
	// waits in the queue with no driver free.
	live := make(chan error, 1)
	go func() { live <- q.enqueue(context.Background(), &queuedAppend{rows: 1, size: 1}) }()
	waitFor(t, q, func() bool { return q.writing == 2 })
	gone, leave := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() { left <- q.enqueue(gone, &queuedAppend{rows: 7, size: 1}) }()
	waitFor(t, q, func() bool { return len(q.queue) == 1 })
	leave()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that left got %v", err)
	}
	close(f.gate)
	if err := <-live; err != nil {
		t.Fatal(err)
	}
	waitFor(t, q, func() bool { return q.drivers == 0 })
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if g > 1 {
			t.Fatalf("writes %v: the append of the caller that left was written", f.groups)
		}
	}
}
