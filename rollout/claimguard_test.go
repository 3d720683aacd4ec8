package rollout

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lance-context/lance-context/internal/clock"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/wal"
)

// dupProcess is a catalog as one process with instance id "dup" sees it:
// processes differ in OwnerID and share the time of one fake clock.
func dupProcess(t *testing.T, root objstore.Store, owner string, clk clock.Clock) *Store {
	t.Helper()
	o := quiet(Options{OwnerID: owner, InstanceID: "dup", Clock: clk, HeartbeatInterval: 3 * time.Second, HeartbeatTTL: 8 * time.Second})
	o.metrics = newMetrics(prometheus.NewRegistry(), NewGenCache(1<<20))
	return mustStore(t, newCatalog(t, root, "dup", o), "exp")
}

// watchedClock is a process's view of a shared fake clock that records
// the waits the process starts on it, so that a test moves the time only
// once that process waits, and as far as its wait.
type watchedClock struct {
	*clock.Fake
	mu     sync.Mutex
	waits  int
	last   time.Duration // of the last wait
	signal chan struct{} // closed and replaced at each wait
	ignore time.Duration // waits this long or longer are not the process's claim
}

// watch returns a view of f that records the waits of a claim of a
// process that renews its heartbeat every 3 s (its own heartbeat's waits
// are that long; a claim waits for half of it at most).
func watch(f *clock.Fake) *watchedClock {
	return &watchedClock{Fake: f, signal: make(chan struct{}), ignore: 3 * time.Second}
}

func (c *watchedClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.Fake.After(d)
	if d >= c.ignore {
		return ch
	}
	c.waits++
	c.last = d
	close(c.signal)
	c.signal = make(chan struct{})
	return ch
}

// stepUntil moves the clock to the end of each wait the watched process
// starts, until done answers; it fails when limit has passed first. Before
// each move it also waits until atRest waits are pending on the clock (the
// watched process's and the other processes' heartbeats, each renewed
// before it waits again), so that no process falls behind the clock. It
// returns the answer and how far the clock moved.
func stepUntil(t *testing.T, c *watchedClock, limit time.Duration, atRest int, done <-chan error) (error, time.Duration) {
	t.Helper()
	seen := 0
	timeout := time.After(30 * time.Second)
	for moved := time.Duration(0); ; {
		c.mu.Lock()
		waits, last, signal := c.waits, c.last, c.signal
		c.mu.Unlock()
		if waits > seen && c.Waiters() >= atRest {
			if moved >= limit {
				t.Fatalf("no answer within %s of the fake clock", limit)
			}
			seen = waits
			c.Advance(last)
			moved += last
			continue
		}
		select {
		case err := <-done:
			return err, moved
		case <-signal:
		case <-time.After(time.Millisecond): // the others' waits are not signalled
		case <-timeout:
			t.Fatalf("neither an answer nor a wait after %s of the fake clock", moved)
		}
	}
}

func epochOf(t *testing.T, root objstore.Store) uint64 {
	t.Helper()
	m, err := wal.LoadManifest(context.Background(), StoreRoot(root, "exp"), ShardID("dup"))
	if err != nil {
		t.Fatal(err)
	}
	return m.Epoch
}

func gaugeOf(t *testing.T, g *prometheus.GaugeVec, store string) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.WithLabelValues(store).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// appendAsync appends one record in the background.
func appendAsync(s *Store, id string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(context.Background(), []Record{{ID: id, RolloutID: "r"}})
		done <- err
	}()
	return done
}

// heartbeatGate fails the heartbeat writes of a process while on, as a
// process stalled or cut off from the store would miss them.
type heartbeatGate struct {
	objstore.Store
	on atomic.Bool
}

func (g *heartbeatGate) Put(ctx context.Context, key string, data []byte) error {
	if g.on.Load() && strings.Contains(key, "/heartbeat/") {
		return errors.New("heartbeat blocked by the test")
	}
	return g.Store.Put(ctx, key, data)
}

// TestDuplicateInstanceIDReported (regression): two workers started with
// one INSTANCE_ID on one store fought over the shard: each append of the
// fenced one claimed it back (the epoch climbed 1 to 45 in 100 s) and was
// answered 201, so the mistake was never reported. Now the worker that
// finds the shard held by another live process (its heartbeat renewed,
// or its claim just fenced ours) refuses writes with ErrClaimedElsewhere,
// naming the instance id, on a metric and in Conflict; the epoch stays.
func TestDuplicateInstanceIDReported(t *testing.T) {
	ctx := context.Background()
	t.Run("second refused", func(t *testing.T) {
		root := objstore.NewMemory()
		clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		bclk := watch(clk)
		a := dupProcess(t, root, "proc-a", clk)
		b := dupProcess(t, root, "proc-b", bclk)
		if _, err := a.Append(ctx, []Record{{ID: "a1", RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
		// b waits for a sign of life from a, which renews its heartbeat
		// every 3 s, and must see one before a's 8 s TTL runs out.
		err, took := stepUntil(t, bclk, 8*time.Second, 2, appendAsync(b, "b1"))
		if !errors.Is(err, ErrClaimedElsewhere) {
			t.Fatalf("append of the second process: %v after %s, want ErrClaimedElsewhere", err, took)
		}
		if took < 3*time.Second || took >= 8*time.Second {
			t.Fatalf("refused after %s: a renews at 3 s, its TTL is 8 s", took)
		}
		for _, want := range []string{`"dup"`, "INSTANCE_ID", "own INSTANCE_ID"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %s", err, want)
			}
		}
		for i := range 5 { // refused at once now, and a goes on writing
			if _, err := b.Append(ctx, []Record{{ID: "b2", RolloutID: "r"}}); !errors.Is(err, ErrClaimedElsewhere) {
				t.Fatalf("append %d of the second process: %v", i, err)
			}
			if _, err := a.Append(ctx, []Record{{ID: "a2", RolloutID: "r"}}); err != nil {
				t.Fatalf("append %d of the first process: %v", i, err)
			}
		}
		if e := epochOf(t, root); e != 1 {
			t.Fatalf("epoch %d, want 1: the second process claimed", e)
		}
		c := b.Conflict()
		if c == nil || c.InstanceID != "dup" || c.Epoch != 1 || a.Conflict() != nil {
			t.Fatalf("conflicts: b %+v, a %+v", c, a.Conflict())
		}
		if g := gaugeOf(t, b.opts.metrics.claimedElsewhere, "exp"); g != 1 {
			t.Fatalf("shard_claimed_elsewhere gauge %v", g)
		}
	})
	t.Run("fenced one stops", func(t *testing.T) {
		// The case: a's heartbeat lapses (stalled), b takes the
		// shard over, a wakes up and writes again, alternating with b.
		mem := objstore.NewMemory()
		gate := &heartbeatGate{Store: mem}
		clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		a := dupProcess(t, gate, "proc-a", clk)
		b := dupProcess(t, mem, "proc-b", clk)
		if _, err := a.Append(ctx, []Record{{ID: "a1", RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
		gate.on.Store(true)
		clk.Advance(9 * time.Second) // a's last heartbeat is past its TTL
		if _, err := b.Append(ctx, []Record{{ID: "b1", RolloutID: "r"}}); err != nil {
			t.Fatalf("b takes over a shard whose heartbeat expired: %v", err)
		}
		gate.on.Store(false)
		for i := range 10 {
			_, err := a.Append(ctx, []Record{{ID: "a2", RolloutID: "r"}})
			if !errors.Is(err, ErrClaimedElsewhere) {
				t.Fatalf("append %d of the fenced process: %v, want ErrClaimedElsewhere", i, err)
			}
			if _, err := b.Append(ctx, []Record{{ID: "b2", RolloutID: "r"}}); err != nil {
				t.Fatalf("append %d of the holder: %v", i, err)
			}
		}
		if e := epochOf(t, mem); e != 2 {
			t.Fatalf("epoch %d, want 2: the processes fought over the shard", e)
		}
		if a.Conflict() == nil || b.Conflict() != nil {
			t.Fatalf("conflicts: a %+v, b %+v", a.Conflict(), b.Conflict())
		}
		// Nothing acknowledged is lost: a1 (a's, replayed by b's claim),
		// b1 and b2.
		settle(t, b)
		verifyExactlyOnce(t, b, map[string]bool{"a1": true, "b1": true, "b2": true})
	})
}

// TestReplacementAfterCrashTakesOver: a worker killed with -9 leaves its
// heartbeat unreleased; its replacement (same instance id, another
// process) waits for a sign of life, sees none, and takes the shard over
// within the TTL, replaying what the dead one acknowledged. After a
// graceful Close it takes over at once.
func TestReplacementAfterCrashTakesOver(t *testing.T) {
	ctx := context.Background()
	t.Run("kill -9", func(t *testing.T) {
		root := objstore.NewMemory()
		clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		a := dupProcess(t, root, "proc-a", clk)
		if _, err := a.Append(ctx, []Record{{ID: "a1", RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
		a.writer.Load().Abandon() // the crash: no seal, no release, no more heartbeats
		bclk := watch(clk)
		b := dupProcess(t, root, "proc-b", bclk)
		err, took := stepUntil(t, bclk, 10*time.Second, 0, appendAsync(b, "b1"))
		if err != nil {
			t.Fatalf("the replacement's append: %v after %s", err, took)
		}
		if took > 8*time.Second || took == 0 {
			t.Fatalf("took over after %s of the fake clock, want within the 8 s TTL (and not before a look)", took)
		}
		if e := epochOf(t, root); e != 2 || b.Conflict() != nil {
			t.Fatalf("epoch %d, conflict %+v", e, b.Conflict())
		}
		settle(t, b)
		verifyExactlyOnce(t, b, map[string]bool{"a1": true, "b1": true})
	})
	t.Run("after Close", func(t *testing.T) {
		root := objstore.NewMemory()
		clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		a := dupProcess(t, root, "proc-a", clk)
		if _, err := a.Append(ctx, []Record{{ID: "a1", RolloutID: "r"}}); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		b := dupProcess(t, root, "proc-b", clk) // the clock does not move
		if _, err := b.Append(ctx, []Record{{ID: "b1", RolloutID: "r"}}); err != nil {
			t.Fatalf("append after the holder closed: %v", err)
		}
		settle(t, b)
		verifyExactlyOnce(t, b, map[string]bool{"a1": true, "b1": true})
	})
}

// TestOrphanMergeIsTakenBack: a master's orphan merge claims the shard of
// a live worker (another process); the worker's next append takes it back
// as before, since a merge is not a rival owner.
func TestOrphanMergeIsTakenBack(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	w := dupProcess(t, root, "proc-w", clk)
	if _, err := w.Append(ctx, []Record{{ID: "w1", RolloutID: "r"}}); err != nil {
		t.Fatal(err)
	}
	master := mustStore(t, newCatalog(t, root, "master", quiet(Options{OwnerID: "proc-master", Clock: clk})), "exp")
	if _, err := master.MergeShard(ctx, ShardID("dup")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []Record{{ID: "w2", RolloutID: "r"}}); err != nil {
		t.Fatalf("append after an orphan merge: %v", err)
	}
	if e := epochOf(t, root); e != 3 || w.Conflict() != nil {
		t.Fatalf("epoch %d (want 3: worker, merge, worker again), conflict %+v", e, w.Conflict())
	}
}
