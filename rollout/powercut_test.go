package rollout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// powerCutRuns is how many seeded cuts the suite makes: def, or
// LC_POWERCUT_RUNS.
func powerCutRuns(t *testing.T, def int) int {
	if s := os.Getenv("LC_POWERCUT_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("LC_POWERCUT_RUNS=%q: want a positive count", s)
		}
		return n
	}
	if testing.Short() {
		return def / 10
	}
	return def
}

// storeWorkload appends from three goroutines while a fourth flushes,
// merges and compacts, until each appender tried n appends or the power is cut (then
// the process is dead: it stops). It returns the ids acknowledged.
// compactions counts the compactions that succeeded (all runs).
var compactions atomic.Int64

func storeWorkload(t *testing.T, s *Store, fsys *vfs.MemFS, n int) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range 3 {
		wg.Go(func() {
			for i := range n {
				if fsys.IsCut() {
					return
				}
				batch := recs(fmt.Sprintf("g%d-%03d", g, i), 1+i%3, fmt.Sprintf("r%d", g))
				ids, err := s.Append(ctx, batch)
				if err == nil {
					mu.Lock()
					acked = append(acked, ids...)
					mu.Unlock()
				}
			}
		})
	}
	var bg sync.WaitGroup
	bg.Go(func() {
		for i := 0; ; i++ {
			// At least two rounds of flush, merge and compaction, however
			// fast the appenders finish (under -race on a loaded machine
			// they finished before the first compaction).
			select {
			case <-done:
				if i >= 14 {
					return
				}
			default:
			}
			if fsys.IsCut() {
				return
			}
			switch {
			case i%7 == 6:
				if _, err := s.Compact(ctx, CompactOptions{}); err == nil {
					compactions.Add(1)
				}
			case i%3 == 2:
				_, _ = s.Merge(ctx)
			default:
				_ = s.Flush(ctx)
			}
		}
	})
	wg.Wait()
	close(done)
	bg.Wait()
	return acked
}

// checkStoreRecovered opens the store in a new process (same shard), lets
// it replay, and checks every acknowledged id is read back exactly once.
// It returns how many ids are in the base table (merged).
func checkStoreRecovered(t *testing.T, root objstore.Store, fsys vfs.FS, acked []string) int {
	t.Helper()
	c := newCatalog(t, root, "pc", Options{LogFS: fsys})
	s := mustStore(t, c, "cut")
	if err := s.Flush(context.Background()); err != nil {
		t.Fatalf("flush after the cut: %v", err)
	}
	seen := map[string]int{}
	merged := 0
	for _, src := range []Source{SourceFragments, SourceWAL} {
		for _, id := range listIDs(t, s, ListOptions{Source: src}) {
			seen[id]++
			if src == SourceFragments {
				merged++
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("id %s read back %d times (base table and generations)", id, n)
		}
	}
	all := map[string]bool{}
	for _, id := range listIDs(t, s, ListOptions{Source: SourceAll}) {
		all[id] = true
	}
	for _, id := range acked {
		if !all[id] || seen[id] != 1 {
			t.Fatalf("acknowledged id %s lost (%d acknowledged, %d read back)", id, len(acked), len(all))
		}
	}
	return merged
}

// TestStorePowerCuts: appends, flushes, merges and compactions of a store
// under load
// with its WAL segment log on a crash-simulating file system, the power
// cut at a seeded operation, many times; after each cut a new process
// (same shard) reads every acknowledged record back exactly once. The
// table and the generations are on an object store (durable on put).
// Replay a run with -run 'TestStorePowerCuts/seed=N' (up to scheduling);
// LC_POWERCUT_RUNS sets the number of runs.
func TestStorePowerCuts(t *testing.T) {
	const perAppender = 30
	ctx := context.Background()
	setup := func() (objstore.Store, *vfs.MemFS, *Store) {
		root := objstore.NewMemory()
		fsys := vfs.NewMem()
		if err := fsys.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		c := NewCatalog(root, ShardID("pc"), Options{LogFS: fsys, MaxMemtableRows: 9})
		s, err := c.Create(ctx, "cut")
		if err != nil {
			t.Fatal(err)
		}
		return root, fsys, s
	}
	root, fsys, s := setup()
	acked := storeWorkload(t, s, fsys, perAppender)
	total := fsys.Ops()
	crash(s)
	if total < 30 || len(acked) == 0 {
		t.Fatalf("uncut run: %d operations, %d ids acknowledged", total, len(acked))
	}
	fsys.Restart()
	if merged := checkStoreRecovered(t, root, fsys, acked); merged == 0 || compactions.Load() == 0 {
		t.Fatalf("uncut run: %d ids merged into the base table, %d compactions: the workload does not merge and compact", merged, compactions.Load())
	}

	for seed := uint64(1); seed <= uint64(powerCutRuns(t, 150)); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			root, fsys, s := setup()
			fsys.CutAfter(1 + rand.New(rand.NewPCG(seed, 2)).Int64N(total))
			acked := storeWorkload(t, s, fsys, perAppender)
			if !fsys.IsCut() {
				fsys.Cut()
			}
			crashStore(s)
			fsys.Restart()
			checkStoreRecovered(t, root, fsys, acked)
		})
	}
}

// crashStore is crash for a store whose writer may be gone (the power cut
// failed its last claim).
func crashStore(s *Store) {
	s.mu.Lock()
	w := s.writer.Load()
	s.writer.Store(nil)
	s.closed = true
	s.mu.Unlock()
	if w != nil {
		w.Abandon()
	}
}

// TestStoreLogFaults: the same workload with seeded faults in the
// segment log's file operations (each failure makes the store claim its
// shard again), then a power cut: every acknowledged record is read back
// exactly once.
func TestStoreLogFaults(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(max(powerCutRuns(t, 150)/5, 1)); seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			root := objstore.NewMemory()
			fsys := vfs.NewMem()
			if err := fsys.SyncDir("/"); err != nil {
				t.Fatal(err)
			}
			s, err := NewCatalog(root, ShardID("pc"), Options{LogFS: fsys, MaxMemtableRows: 9}).Create(ctx, "cut")
			if err != nil {
				t.Fatal(err)
			}
			fsys.Faults(seed, 0.02)
			acked := storeWorkload(t, s, fsys, 20)
			fsys.Cut()
			crashStore(s)
			fsys.Restart()
			checkStoreRecovered(t, root, fsys, acked)
		})
	}
}
