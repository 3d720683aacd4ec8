package rollout

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// fakeClock is a Store.now the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustStats(t *testing.T, s *Store) *Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReadConsistencyIntervalOwnWrites: with a long read consistency
// interval, a process still reads its own writes at once: every commit of
// its own (seal, merge, index build, compaction, checkout) ends the reuse
// of the snapshot metadata, while reads between commits reuse it (no
// listing).
func TestReadConsistencyIntervalOwnWrites(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(objstore.NewMemory(), 0)
	s := mustStore(t, newCatalog(t, c, "w", quiet(Options{ReadConsistencyInterval: time.Hour})), "own")

	lists := func(op func()) int {
		t.Helper()
		c.Reset()
		op()
		return c.Counts().Calls[objstore.OpList]
	}
	appendFlush(t, s, recs("a", 10, "r"))
	if st := mustStats(t, s); st.Rows != 10 {
		t.Fatalf("after the first flush: %d rows, want 10", st.Rows)
	}
	// Within the interval and with no commit of this process: no listing.
	if n := lists(func() { mustStats(t, s) }); n != 0 {
		t.Fatalf("a second stats within the interval listed %d times, want 0", n)
	}
	if n := lists(func() {
		if _, err := s.Get(ctx, "a-003"); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("a get within the interval listed %d times, want 0", n)
	}

	// A seal (flush) is seen at once.
	appendFlush(t, s, recs("b", 5, "r"))
	if r, err := s.Get(ctx, "b-004"); err != nil || r.ID != "b-004" {
		t.Fatalf("own flushed record not visible with a long interval: %v, %v", r, err)
	}
	res, err := s.List(ctx, ListOptions{Source: SourceAll, Limit: 100})
	if err != nil || len(res.Records) != 15 {
		t.Fatalf("list all after own flush: %d records (%v), want 15", len(res.Records), err)
	}
	// A merge is seen at once.
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, s); st.BaseRows != 15 || st.PendingRows != 0 {
		t.Fatalf("after own merge: base %d pending %d, want 15 and 0", st.BaseRows, st.PendingRows)
	}
	latest := func() uint64 {
		t.Helper()
		d, err := table.Open(ctx, s.Root())
		if err != nil {
			t.Fatal(err)
		}
		return d.Version()
	}
	if got, want := mustStats(t, s).Version, latest(); got != want {
		t.Fatalf("after own merge and its index upkeep: version %d, want the latest %d", got, want)
	}
	// A compaction and the index build after it (two commits) are seen at
	// once.
	appendFlush(t, s, recs("c", 5, "r"))
	if _, err := s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	before := mustStats(t, s)
	if _, err := s.Compact(ctx, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	after := mustStats(t, s)
	if after.Version != latest() || after.Fragments >= before.Fragments {
		t.Fatalf("after own compaction: version %d fragments %d, before %d and %d", after.Version, after.Fragments, before.Version, before.Fragments)
	}
	// A checkout back to the latest version reads the latest, at once.
	if _, err := s.Checkout(ctx, before.Version); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, s); st.Version != before.Version {
		t.Fatalf("checked out %d, stats read %d", before.Version, st.Version)
	}
	if _, err := s.Checkout(ctx, after.Version); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, s); st.Version != after.Version || st.Rows != 20 {
		t.Fatalf("after checkout of the latest: version %d rows %d, want %d and 20", st.Version, st.Rows, after.Version)
	}
}

// TestReadConsistencyIntervalOtherProcess: another process's commit is not
// seen while the reader reuses metadata it validated less than the interval
// ago (and the reader makes no listing meanwhile), and is seen by the first
// read once the interval has passed (that read lists again): never staler
// than the interval.
func TestReadConsistencyIntervalOtherProcess(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	const interval = 10 * time.Second
	w := mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "writer", quiet(Options{})), "other")
	rc := objstore.NewCounting(mem, 0)
	r := mustStore(t, newCatalog(t, rc, "reader", quiet(Options{ReadConsistencyInterval: interval})), "other")
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	r.now = clock.now

	appendFlush(t, w, recs("a", 10, "r"))
	if st := mustStats(t, r); st.Rows != 10 {
		t.Fatalf("first read: %d rows, want 10", st.Rows)
	}
	// The other process commits: a seal, then a merge (a new base version).
	appendFlush(t, w, recs("b", 5, "r"))
	clock.advance(interval / 2)
	rc.Reset()
	if st := mustStats(t, r); st.Rows != 10 {
		t.Fatalf("within the interval: %d rows, want the validated 10", st.Rows)
	}
	if _, err := r.Get(ctx, "b-000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("within the interval, get of the other process's new record: %v, want not found", err)
	}
	if n := rc.Counts().Calls[objstore.OpList]; n != 0 {
		t.Fatalf("reads within the interval listed %d times, want 0", n)
	}
	clock.advance(interval - interval/2 - time.Nanosecond)
	if st := mustStats(t, r); st.Rows != 10 {
		t.Fatalf("just inside the interval: %d rows, want 10", st.Rows)
	}
	clock.advance(time.Nanosecond) // the validation is now interval old
	rc.Reset()
	if st := mustStats(t, r); st.Rows != 15 {
		t.Fatalf("once the interval passed: %d rows, want 15", st.Rows)
	}
	if n := rc.Counts().Calls[objstore.OpList]; n == 0 {
		t.Fatal("the read after the interval made no listing")
	}
	if rec, err := r.Get(ctx, "b-000"); err != nil || rec.ID != "b-000" {
		t.Fatalf("get after the interval: %v, %v", rec, err)
	}
	// A merge by the other process: the base version moves.
	if _, err := w.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	wv := mustStats(t, w).Version
	if st := mustStats(t, r); st.Version == wv {
		t.Fatalf("the merge's version %d seen within the interval", wv)
	}
	clock.advance(interval)
	if st := mustStats(t, r); st.Version != wv || st.BaseRows != 15 {
		t.Fatalf("after the interval: version %d base rows %d, want %d and 15", st.Version, st.BaseRows, wv)
	}
}

// TestReadConsistencyIntervalZeroRevalidates: with no interval (the
// default) every read lists again, as before.
func TestReadConsistencyIntervalZeroRevalidates(t *testing.T) {
	c := objstore.NewCounting(objstore.NewMemory(), 0)
	s := mustStore(t, newCatalog(t, c, "w", quiet(Options{})), "zero")
	appendFlush(t, s, recs("a", 10, "r"))
	mustStats(t, s)
	for range 2 {
		c.Reset()
		mustStats(t, s)
		// The shard markers, the shard's manifests, the base's versions.
		if n := c.Counts().Calls[objstore.OpList]; n != 3 {
			t.Fatalf("stats listed %d times, want 3", n)
		}
	}
}

// TestReadConsistencyIntervalRetryRevalidates: a read that reuses metadata
// naming a generation another process's merge has since deleted retries on
// a fresh snapshot, not on the same reused one.
func TestReadConsistencyIntervalRetryRevalidates(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	w := mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "writer", quiet(Options{})), "retry")
	// A tiny generation cache: the reader reads generation files each time.
	r := mustStore(t, newCatalog(t, objstore.NewCounting(mem, 0), "reader", quiet(Options{ReadConsistencyInterval: time.Hour, Cache: NewGenCache(1)})), "retry")
	appendFlush(t, w, recs("a", 10, "r"))
	appendFlush(t, w, recs("b", 10, "r"))
	if res, err := r.List(ctx, ListOptions{Source: SourceAll, Limit: 100}); err != nil || len(res.Records) != 20 {
		t.Fatalf("list: %v", err)
	}
	if _, err := w.Merge(ctx); err != nil { // drains and deletes the generations
		t.Fatal(err)
	}
	res, err := r.List(ctx, ListOptions{Source: SourceAll, Limit: 100})
	if err != nil {
		t.Fatalf("list after another process merged: %v", err)
	}
	if len(res.Records) != 20 {
		t.Fatalf("list after another process merged: %d records, want 20", len(res.Records))
	}
}
