package rollout

// Reliability tests of the store as a whole: merge crashes at each step,
// seeded storage faults under concurrency, two writers on one shard, and a
// stalled writer that wakes after an orphan merge and WAL garbage collection.
// The kill -9 test is in crash_test.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout/row"
	"github.com/lance-context/lance-context/wal"
)

// quiet returns o with a logger that drops everything: fault suites log
// thousands of expected warnings.
func quiet(o Options) Options {
	o.Logger = slog.New(slog.DiscardHandler)
	return o
}

// idCounts pages through one source and counts how often each id appears.
func idCounts(ctx context.Context, s *Store, src Source, limit int) (map[string]int, error) {
	seen := map[string]int{}
	o := ListOptions{Source: src, Limit: limit}
	for {
		res, err := s.List(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("list %s offset %d: %w", src, o.Offset, err)
		}
		for _, r := range res.Records {
			seen[r.ID]++
		}
		if !res.HasMore {
			return seen, nil
		}
		o.Offset += limit
	}
}

// mustCounts returns the number of rows of each source (fragments, wal,
// all) and fails on any id listed twice within one source.
func mustCounts(t *testing.T, s *Store) [3]int {
	t.Helper()
	var out [3]int
	for i, src := range []Source{SourceFragments, SourceWAL, SourceAll} {
		seen, err := idCounts(context.Background(), s, src, 7)
		if err != nil {
			t.Fatal(err)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("source %s lists %s %d times", src, id, n)
			}
			out[i] += n
		}
	}
	return out
}

// settle flushes and merges the store's own shard until nothing is pending,
// riding out transient failures (a fenced writer is claimed again). It
// gives up after 50 calls that failed or made no progress.
func settle(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	var last error
	for stuck := 0; stuck < 50; {
		if err := s.Flush(ctx); err != nil {
			last = err
			stuck++
			continue
		}
		res, err := s.Merge(ctx)
		switch {
		case err != nil:
			last = err
			stuck++
		case res.Remaining == 0:
			return
		case res.Generations == 0:
			last = fmt.Errorf("a merge pass made no progress: %+v", res)
			stuck++
		}
	}
	t.Fatalf("store did not settle: %v", last)
}

// verifyExactlyOnce checks, on a settled store, that every acknowledged id
// is read exactly once from all and from fragments, that nothing is
// pending, that no id at all is duplicated, and that Get finds a sample.
func verifyExactlyOnce(t *testing.T, s *Store, acked map[string]bool) {
	t.Helper()
	ctx := context.Background()
	for _, src := range []Source{SourceAll, SourceFragments} {
		seen, err := idCounts(ctx, s, src, 1000)
		if err != nil {
			t.Fatal(err)
		}
		missing, dups := 0, 0
		for id := range acked {
			if seen[id] == 0 {
				if missing < 5 {
					t.Errorf("%s: acknowledged id %s is lost", src, id)
				}
				missing++
			}
		}
		for id, n := range seen {
			if n > 1 {
				if dups < 5 {
					t.Errorf("%s: id %s appears %d times", src, id, n)
				}
				dups++
			}
		}
		if missing > 0 || dups > 0 {
			t.Fatalf("%s: %d of %d acknowledged ids lost, %d ids duplicated (%d listed)", src, missing, len(acked), dups, len(seen))
		}
	}
	if seen, err := idCounts(ctx, s, SourceWAL, 1000); err != nil || len(seen) != 0 {
		t.Fatalf("wal after a full merge: %d rows, %v", len(seen), err)
	}
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	step := max(1, len(ids)/20)
	for i := 0; i < len(ids); i += step {
		r, err := s.Get(ctx, ids[i])
		if err != nil || r.ID != ids[i] {
			t.Fatalf("get %s: %+v %v", ids[i], r, err)
		}
	}
}

// genFiles lists the generation files of a shard on storage.
func genFiles(t *testing.T, s *Store, shard string) []string {
	t.Helper()
	objs, err := s.root.List(context.Background(), wal.Root+shard+"/gen/")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

func passAll(objstore.Op, string, int) objstore.Fault { return objstore.FaultPass }

// TestMergeCrash stops a merge at each step (before the base commit, after
// it, after the drain of the shard manifest) and checks that readers are
// right in between and that the next merge finishes the work, in the same
// process or after a restart.
func TestMergeCrash(t *testing.T) {
	isShardManifest := func(k string) bool { return strings.Contains(k, "/manifest/") && strings.Contains(k, wal.Root) }
	isBaseVersion := func(k string) bool { return strings.Contains(k, "/_versions/") && strings.HasSuffix(k, ".manifest") }
	isGeneration := func(k string) bool { return strings.Contains(k, "/gen/") }
	stages := []struct {
		name string
		hook func(objstore.Op, string, int) objstore.Fault
		// rows of fragments, wal and all while the merge is stopped
		want    [3]int
		mergeOK bool // Merge reports success (the failure is in the background)
	}{
		{"before-base-commit", objstore.FailKey(objstore.OpPutIfAbsent, isBaseVersion, objstore.FaultError), [3]int{5, 10, 15}, false},
		{"base-commit-lost-ack", objstore.FailKey(objstore.OpPutIfAbsent, isBaseVersion, objstore.FaultLostAck), [3]int{15, 0, 15}, false},
		{"after-base-commit", objstore.FailKey(objstore.OpPutIfAbsent, isShardManifest, objstore.FaultError), [3]int{15, 0, 15}, false},
		{"after-drain", objstore.FailKey(objstore.OpDelete, isGeneration, objstore.FaultError), [3]int{15, 0, 15}, true},
	}
	for _, st := range stages {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", st.name, restart), func(t *testing.T) {
				ctx := context.Background()
				local, err := objstore.NewLocal(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				f := objstore.NewFaulty(local, objstore.FaultConfig{Hook: passAll})
				c1 := NewCatalog(f, ShardID("w"), quiet(Options{}))
				s := mustStore(t, c1, "exp")
				shard := s.Shard()
				appendFlush(t, s, recs("base", 5, "r"))
				if _, err := s.Merge(ctx); err != nil {
					t.Fatal(err)
				}
				appendFlush(t, s, recs("g1", 5, "r"))
				appendFlush(t, s, recs("g2", 5, "r"))

				f.SetHook(st.hook)
				_, err = s.Merge(ctx)
				s.writer.Load().WaitCollect()
				f.SetHook(passAll)
				if (err == nil) != st.mergeOK {
					t.Fatalf("merge stopped at %s returned %v", st.name, err)
				}
				if got := mustCounts(t, s); got != st.want {
					t.Fatalf("while stopped: fragments/wal/all = %v, want %v", got, st.want)
				}
				if restart {
					s.writer.Load().Abandon() // the process dies here
					c2 := newCatalog(t, local, "w", quiet(Options{}))
					s = mustStore(t, c2, "exp")
				} else {
					t.Cleanup(func() { _ = c1.Close(context.Background()) })
				}
				if got := mustCounts(t, s); got != st.want {
					t.Fatalf("after restart: %v, want %v", got, st.want)
				}
				// The next merge finishes the work, with nothing new to merge.
				if _, err := s.Merge(ctx); err != nil {
					t.Fatal(err)
				}
				s.writer.Load().WaitCollect()
				if got := mustCounts(t, s); got != [3]int{15, 0, 15} {
					t.Fatalf("after the next merge: %v", got)
				}
				if man := s.writer.Load().Manifest(); len(man.Generations) != 0 {
					t.Fatalf("shard manifest still lists %d generations", len(man.Generations))
				}
				if files := genFiles(t, s, shard); len(files) != 0 {
					t.Fatalf("generation files left behind after the next merge: %v", files)
				}
				acked := map[string]bool{}
				for _, p := range []string{"base", "g1", "g2"} {
					for _, r := range recs(p, 5, "r") {
						acked[r.ID] = true
					}
				}
				verifyExactlyOnce(t, s, acked)
			})
		}
	}
}

// faultSeeds returns the seeds of the fault suite: 1, 2 and 3, or those of
// LC_FAULT_SEEDS (e.g. LC_FAULT_SEEDS=$(seq -s, 1 50) for a long run).
func faultSeeds(t *testing.T) []uint64 {
	if v := os.Getenv("LC_FAULT_SEEDS"); v != "" {
		var out []uint64
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("LC_FAULT_SEEDS: %v", err)
			}
			out = append(out, n)
		}
		return out
	}
	return []uint64{1, 2, 3}
}

// expectedFault reports whether err is one a caller should see under storage
// faults: the injected fault itself (possibly wrapped by the layers), or the
// fencing and closing that a writer that lost track of its manifest goes
// through before it claims its shard again.
func expectedFault(err error) bool {
	return errors.Is(err, objstore.ErrInjected) || errors.Is(err, wal.ErrFenced) || errors.Is(err, wal.ErrClosed)
}

// TestFaults runs concurrent appends, flushes, merges and reads against a
// store that fails 5% of all calls, loses 3% of acknowledgements and delays
// every call. Every call must return (no hang), every error must be a
// storage error, and every acknowledged id must be read exactly once at the
// end. Seeds are logged; LC_FAULT_SEEDS replays them.
func TestFaults(t *testing.T) {
	for _, seed := range faultSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay: LC_FAULT_SEEDS=%d go test -run 'TestFaults' ./rollout)", seed, seed)
			runFaults(t, seed, objstore.NewMemory())
		})
	}
}

// runFaults runs the fault workload on a faulty wrapper of inner, which
// must be empty.
func runFaults(t *testing.T, seed uint64, inner objstore.Store) {
	const (
		appenders = 8
		appends   = 40
		callLimit = 30 * time.Second // a call that takes longer hangs
	)
	f := objstore.NewFaulty(inner, objstore.FaultConfig{
		Seed:    seed,
		Default: objstore.Rates{Error: 0.05, LostAck: 0.03, MaxLatency: 2 * time.Millisecond},
		// A streaming write makes about 120 Write calls for a small
		// generation file. They are not requests (local disk writes a
		// temporary file, S3 buffers a part), and at 8% each no seal, so
		// no flush or merge, would ever succeed: Create and Commit carry
		// the request faults, Write only a rare error.
		PerOp: map[objstore.Op]objstore.Rates{objstore.OpWrite: {Error: 0.0005}},
		Hook:  passAll, // set up without faults
	})
	c := NewCatalog(f, ShardID("w"), quiet(Options{MergeMaxGenerations: 3, MaxMemtableRows: 40}))
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := mustStore(t, c, "exp")
	f.SetHook(nil) // random faults from here on

	var (
		mu      sync.Mutex
		acked   = map[string]bool{}
		calls   = map[string]int{}
		errs    = map[string]int{}
		first   = map[string]string{} // the first error of each kind of call
		stop    = make(chan struct{})
		wg, mwg sync.WaitGroup
	)
	call := func(what string, fn func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), callLimit)
		defer cancel()
		start := time.Now()
		err := fn(ctx)
		if d := time.Since(start); d >= callLimit || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s hung for %v: %v", what, d, err)
		}
		mu.Lock()
		calls[what]++
		if err != nil {
			errs[what]++
			if first[what] == "" {
				first[what] = err.Error()
			}
		}
		mu.Unlock()
		if err != nil {
			if !expectedFault(err) {
				t.Errorf("%s: unexpected kind of error under storage faults: %v", what, err)
			}
		}
		return err
	}
	for g := 0; g < appenders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for n := 0; n < appends; n++ {
				batch := make([]Record, 1+rng.IntN(3))
				for i := range batch {
					batch[i] = Record{ID: fmt.Sprintf("g%d-%03d-%d", g, n, i), RolloutID: fmt.Sprintf("r%d", g), Content: ptr("fault suite")}
				}
				// A client retries a failed append with the same ids.
				for try := 0; try < 3; try++ {
					err := call("append", func(ctx context.Context) error { _, err := s.Append(ctx, batch); return err })
					if err == nil {
						mu.Lock()
						for _, r := range batch {
							acked[r.ID] = true
						}
						mu.Unlock()
						break
					}
				}
				time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
			}
		}()
	}
	// Maintenance and readers, as the sweeper, the scheduler and the UI
	// would run them, each on its own goroutine.
	background := func(what string, fn func(context.Context) error) {
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = call(what, fn)
				time.Sleep(3 * time.Millisecond)
			}
		}()
	}
	background("flush", s.Flush)
	background("merge", func(ctx context.Context) error { _, err := s.Merge(ctx); return err })
	background("list", func(ctx context.Context) error {
		res, err := s.List(ctx, ListOptions{Source: SourceAll, Limit: 50})
		if err == nil {
			seen := map[string]bool{}
			for _, r := range res.Records {
				if seen[r.ID] {
					t.Errorf("a page of all lists %s twice", r.ID)
				}
				seen[r.ID] = true
			}
		}
		return err
	})
	wg.Wait()
	close(stop)
	mwg.Wait()

	events := f.Events()
	f.SetHook(passAll)
	t.Logf("seed %d: %d ids acknowledged, %d faults injected; calls %v, failed %v; first errors %q", seed, len(acked), len(events), calls, errs, first)
	if len(events) == 0 || len(acked) == 0 {
		t.Fatalf("the suite exercised nothing: %d faults, %d acknowledged", len(events), len(acked))
	}
	settle(t, s)
	verifyExactlyOnce(t, s, acked)
}

// TestTwoWritersOneShard runs two catalogs with the same instance id (two
// processes that both believe they own one shard) appending concurrently.
// Each fences the other in turn and claims the shard back; every
// acknowledged record survives and none is duplicated after the merge.
func TestTwoWritersOneShard(t *testing.T) {
	mem := objstore.NewMemory()
	// A little latency interleaves the two writers' storage calls.
	root := objstore.NewFaulty(mem, objstore.FaultConfig{Seed: 7, Default: objstore.Rates{MaxLatency: time.Millisecond}})
	const inst = "same-instance"
	cats := []*Catalog{
		NewCatalog(root, ShardID(inst), quiet(Options{MergeMaxGenerations: 4})),
		NewCatalog(root, ShardID(inst), quiet(Options{MergeMaxGenerations: 4})),
	}
	stores := []*Store{mustStore(t, cats[0], "exp"), mustStore(t, cats[1], "exp")}
	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		fenced atomic.Int64
		wg     sync.WaitGroup
	)
	ctx := context.Background()
	for w, s := range stores {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; n < 20; n++ {
					batch := []Record{
						{ID: fmt.Sprintf("w%d-g%d-%03d-a", w, g, n), RolloutID: "r"},
						{ID: fmt.Sprintf("w%d-g%d-%03d-b", w, g, n), RolloutID: "r"},
					}
					_, err := s.Append(ctx, batch)
					switch {
					case err == nil:
						mu.Lock()
						acked[batch[0].ID], acked[batch[1].ID] = true, true
						mu.Unlock()
					case errors.Is(err, wal.ErrFenced) || errors.Is(err, wal.ErrClosed):
						fenced.Add(1)
					default:
						t.Errorf("append: %v", err)
					}
					if n%7 == 0 {
						_ = s.Flush(ctx)
					}
					if g == 0 && n%8 == 5 {
						_, _ = s.Merge(ctx)
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, c := range cats {
		_ = c.Close(ctx) // the deposed one fails: it is fenced
	}
	m, err := wal.LoadManifest(ctx, stores[0].root, ShardID(inst))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ids acknowledged, %d appends refused (fenced), final epoch %d", len(acked), fenced.Load(), m.Epoch)
	if m.Epoch < 3 {
		t.Fatalf("epoch %d: the writers never fenced each other, the test proved nothing", m.Epoch)
	}
	s := mustStore(t, newCatalog(t, mem, inst, quiet(Options{})), "exp")
	settle(t, s)
	verifyExactlyOnce(t, s, acked)
}

// stallStore stalls the first WAL put after arm until release is closed.
type stallStore struct {
	objstore.Store
	armed   atomic.Bool
	once    sync.Once
	stalled chan struct{}
	release chan struct{}
	landed  atomic.Bool // the stalled put succeeded (on a collected name)
}

func (s *stallStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	stalledPut := false
	if s.armed.Load() && strings.Contains(key, "/wal/") {
		s.once.Do(func() { close(s.stalled); <-s.release; stalledPut = true })
	}
	err := s.Store.PutIfAbsent(ctx, key, data)
	if stalledPut && err == nil {
		s.landed.Store(true)
	}
	return err
}

// TestStalledAppendAfterOrphanMergeAndGC is wal.TestStalledWriterAfterGC
// through the store: a worker's append stalls inside its WAL put; a master
// merges the shard as an orphan (its claim puts a fence entry at the
// stalled position); the worker's replacement (same instance id) appends,
// seals past that position and merges, and collection deletes the entries
// below it but not the fence entry; then the stalled put meets the fence
// entry. The stalled writer must not acknowledge: it is fenced, the store
// claims the shard back and retries, and the append is acknowledged once
// and read once.
func TestStalledAppendAfterOrphanMergeAndGC(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	st := &stallStore{Store: mem, stalled: make(chan struct{}), release: make(chan struct{})}
	zombie := mustStore(t, newCatalog(t, st, "w", quiet(Options{})), "exp")
	var releaseOnce sync.Once
	unstall := func() { releaseOnce.Do(func() { close(st.release) }) }
	// Registered after the catalog, so it runs before the catalog's Close,
	// which would wait for the stalled put.
	t.Cleanup(unstall)
	if _, err := zombie.Append(ctx, []Record{{ID: "a1", RolloutID: "r"}}); err != nil { // position 1
		t.Fatal(err)
	}
	st.armed.Store(true)
	res := make(chan error, 1)
	go func() { _, err := zombie.Append(ctx, []Record{{ID: "z1", RolloutID: "r"}}); res <- err }() // position 2
	select {
	case <-st.stalled:
	case err := <-res:
		t.Fatalf("the append did not reach its WAL put: %v", err)
	}

	master := mustStore(t, newCatalog(t, mem, "master", quiet(Options{})), "exp")
	if mr, err := master.MergeShard(ctx, ShardID("w")); err != nil || mr.Rows != 1 {
		t.Fatalf("orphan merge: %+v %v", mr, err)
	}
	successor := mustStore(t, newCatalog(t, mem, "w", quiet(Options{})), "exp")
	// The master's fence entry is at 2, the successor's at 3.
	if _, err := successor.Append(ctx, []Record{{ID: "b1", RolloutID: "r"}}); err != nil { // position 4
		t.Fatal(err)
	}
	if _, err := successor.Merge(ctx); err != nil { // seals replay_after=4, GC deletes positions 1 and 4
		t.Fatal(err)
	}
	successor.writer.Load().WaitCollect()
	entry := func(p int) string {
		return "exp" + storeSuffix + "/" + wal.Root + ShardID("w") + fmt.Sprintf("/wal/%020d.arrow", p)
	}
	for _, p := range []int{1, 4} {
		if _, err := mem.Head(ctx, entry(p)); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("position %d was not collected (%s): %v", p, entry(p), err)
		}
	}
	// The hazard: were position 2 collected, the stalled put would land on
	// a name no replay reads. The fence entry there is kept.
	if _, err := mem.Head(ctx, entry(2)); err != nil {
		t.Fatalf("the orphan merge's fence entry at position 2 was collected: %v", err)
	}
	unstall()
	if err := <-res; err != nil {
		t.Fatalf("the stalled append, retried after the fence, failed: %v", err)
	}
	if st.landed.Load() {
		t.Fatal("the stalled put landed on the fence entry's name")
	}
	epoch := zombie.writer.Load().Epoch()
	settle(t, zombie)
	verifyExactlyOnce(t, zombie, map[string]bool{"a1": true, "b1": true, "z1": true})
	if epoch < 4 {
		t.Fatalf("the stalled writer acknowledged at epoch %d: it was not fenced and did not claim the shard again", epoch)
	}
	seen, err := idCounts(ctx, zombie, SourceAll, 10)
	if got := slices.Sorted(maps.Keys(seen)); err != nil || !slices.Equal(got, []string{"a1", "b1", "z1"}) {
		t.Fatalf("rows %v %v", got, err)
	}
}

// TestRegression_LeftoverGenerationFilesAreSwept: a merge drained its
// generations from the shard manifest, but deleting their files failed (or
// the process died before it deleted them). Nothing ever deleted those files
// again; they leaked. Now the next drop (the next merge, even with nothing
// to merge, in this process or after a restart) sweeps generation files at
// or below the watermark that the manifest does not list, including the
// file of a seal whose manifest commit failed.
func TestRegression_LeftoverGenerationFilesAreSwept(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			ctx := context.Background()
			mem := objstore.NewMemory()
			f := objstore.NewFaulty(mem, objstore.FaultConfig{Hook: passAll})
			c := NewCatalog(f, ShardID("w"), quiet(Options{}))
			s := mustStore(t, c, "exp")
			// A seal whose manifest commit fails leaves a generation file
			// the manifest never lists.
			if _, err := s.Append(ctx, recs("a", 3, "r")); err != nil {
				t.Fatal(err)
			}
			f.SetHook(objstore.FailKey(objstore.OpPutIfAbsent, func(k string) bool { return strings.Contains(k, "/manifest/") }, objstore.FaultError))
			if err := s.Flush(ctx); err == nil {
				t.Fatal("the seal succeeded although its manifest commit failed")
			}
			f.SetHook(passAll)
			appendFlush(t, s, recs("b", 3, "r"))
			// The merge drains, but the file deletes fail.
			f.SetHook(objstore.FailKey(objstore.OpDelete, func(k string) bool { return strings.Contains(k, "/gen/") }, objstore.FaultError))
			if _, err := s.Merge(ctx); err != nil {
				t.Fatal(err)
			}
			s.writer.Load().WaitCollect()
			f.SetHook(passAll)
			if n := len(genFiles(t, s, s.Shard())); n != 2 {
				t.Fatalf("%d generation files before the sweep, want 2 (the merged one and the failed seal's)", n)
			}
			if restart {
				s.writer.Load().Abandon()
				s = mustStore(t, newCatalog(t, mem, "w", quiet(Options{})), "exp")
			} else {
				t.Cleanup(func() { _ = c.Close(context.Background()) })
			}
			if _, err := s.Merge(ctx); err != nil { // nothing to merge
				t.Fatal(err)
			}
			s.writer.Load().WaitCollect()
			if files := genFiles(t, s, s.Shard()); len(files) != 0 {
				t.Fatalf("generation files leaked: %v", files)
			}
			if got := mustCounts(t, s); got != [3]int{6, 0, 6} {
				t.Fatalf("fragments/wal/all = %v", got)
			}
		})
	}
}

// TestRegression_ReadersSkipShardWithoutManifest: a claim registers its
// shard (the marker under _lc_wal/_shards/) before it commits the shard's
// first manifest. A process that died in between (or a claim whose commit
// failed, or one still in flight) left a registered shard without a
// manifest, and every read of the WAL tier (List wal/all, Get, Blob,
// Trajectory, Stats) failed with "wal: no such shard" until someone claimed
// it. Such a shard holds nothing; readers now skip it.
func TestRegression_ReadersSkipShardWithoutManifest(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	reader := mustStore(t, newCatalog(t, mem, "reader", quiet(Options{})), "exp")
	appendFlush(t, reader, recs("r", 2, "ro"))

	f := objstore.NewFaulty(mem, objstore.FaultConfig{Hook: objstore.FailKey(objstore.OpPutIfAbsent,
		func(k string) bool { return strings.Contains(k, "/manifest/") }, objstore.FaultError)})
	dying := mustStore(t, newCatalog(t, f, "dying", quiet(Options{})), "exp")
	if _, err := dying.Append(ctx, recs("d", 1, "ro")); err == nil {
		t.Fatal("the claim succeeded although its manifest commit failed")
	}
	if shards, err := wal.ListShards(ctx, reader.root); err != nil || len(shards) != 2 {
		t.Fatalf("shards %v %v: the failed claim should have registered its shard", shards, err)
	}
	if got := mustCounts(t, reader); got != [3]int{0, 2, 2} {
		t.Fatalf("fragments/wal/all = %v", got)
	}
	if _, err := reader.Get(ctx, "r-000"); err != nil {
		t.Fatalf("get: %v", err)
	}
	if st, err := reader.Stats(ctx); err != nil || st.PendingRows != 2 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

// TestRegression_StoppedWriterAnswers: a call on a shard writer whose loop
// had stopped (Close, Abandon; the store abandons a fenced writer while
// other appends may still hold it) could hang forever. Its select between
// "queue the op" and "the loop is done" picks at random when both are ready,
// and the queue is buffered, so half the time the op was queued for a loop
// that would never answer, and the caller waited on a context that, for an
// internal caller (or a Close), never ends. (wal.TestAppendSealGC hung about
// every other run.) Now such a call returns ErrClosed.
func TestRegression_StoppedWriterAnswers(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", quiet(Options{})), "exp")
	if _, err := s.Append(ctx, recs("a", 1, "r")); err != nil {
		t.Fatal(err)
	}
	w := s.writer.Load()
	w.Abandon()
	s.mu.Lock()
	s.writer.Store(nil) // the catalog's cleanup must not depend on the fix
	s.mu.Unlock()
	rs := recs("b", 1, "r")
	if err := row.Prepare(rs, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := buildBatch(rs)
	defer rec.Release()
	for i := 0; i < 200; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := w.Append(cctx, rec); !errors.Is(err, wal.ErrClosed) {
			t.Fatalf("append %d on a stopped writer: %v", i, err)
		}
		if err := w.Seal(cctx); !errors.Is(err, wal.ErrClosed) {
			t.Fatalf("seal %d on a stopped writer: %v", i, err)
		}
		cancel()
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.Close(cctx); err != nil { // returns, and a stopped writer closes cleanly
		t.Fatal(err)
	}
}

// TestRegression_MergeLeavesReadCacheAlone: the first pass of a merge (which
// generation holds the newest write of each id) loaded every merged
// generation, all list columns, into the shared read cache, although those
// generations are dropped right after. A merge pass held up to the cache's
// size (256 MiB by default) on top of its own buffers and evicted what
// readers were using: bench engine measured +469 MiB peak heap for one
// 193 MB pass, +148 MiB with ids read alone. Now a merge reads each
// generation once, outside the cache (wal.StreamNewest).
func TestRegression_MergeLeavesReadCacheAlone(t *testing.T) {
	ctx := context.Background()
	cache := NewGenCache(64 << 20)
	s := mustStore(t, newCatalog(t, objstore.NewMemory(), "w", quiet(Options{Cache: cache})), "exp")
	for g := 0; g < 3; g++ {
		appendFlush(t, s, recs(fmt.Sprintf("g%d", g), 10, "r"))
	}
	res, err := s.Merge(ctx)
	if err != nil || res.Rows != 30 {
		t.Fatalf("merge %+v %v", res, err)
	}
	cache.mu.Lock()
	n, size := cache.order.Len(), cache.size
	cache.mu.Unlock()
	if n != 0 || size != 0 {
		t.Fatalf("the merge put %d generations (%d bytes) in the read cache", n, size)
	}
	// A generation readers already cached is used as is.
	appendFlush(t, s, recs("g3", 10, "r"))
	if got := mustCounts(t, s); got != [3]int{30, 10, 40} {
		t.Fatalf("counts %v", got)
	}
	if res, err := s.Merge(ctx); err != nil || res.Rows != 10 {
		t.Fatalf("merge %+v %v", res, err)
	}
	if got := mustCounts(t, s); got != [3]int{40, 0, 40} {
		t.Fatalf("counts %v", got)
	}
}

// TestRegression_ColdGenerationReadIsOneRequest: reading a generation the
// cache did not hold took one ranged read per column page, about 34 requests
// for a file of a few KB. On versitygw that was ~50 ms per generation, and
// the first wal/all list over 1000 pending generations took 43 s (16 reads
// in parallel). A generation up to 1 MiB is now read with one request
// (~2 ms): that list took 1.2 s.
func TestRegression_ColdGenerationReadIsOneRequest(t *testing.T) {
	ctx := context.Background()
	f := objstore.NewFaulty(objstore.NewMemory(), objstore.FaultConfig{})
	s := mustStore(t, newCatalog(t, f, "w", quiet(Options{})), "exp")
	appendFlush(t, s, recs("g", 5, "r"))
	g := s.writer.Load().Manifest().Generations[0]
	requests := func() int {
		return f.Calls(objstore.OpGet) + f.Calls(objstore.OpGetRange) + f.Calls(objstore.OpHead)
	}
	before := requests()
	d, err := NewGenCache(1<<20).get(ctx, s.root, wal.GenRef{Shard: s.Shard(), Gen: g})
	if err != nil || d.NumRows() != 5 {
		t.Fatalf("load: %v %v", d, err)
	}
	if n := requests() - before; n != 1 {
		t.Fatalf("a cold read of a %d-byte generation took %d requests", g.Bytes, n)
	}
}

// TestOrphanMergesDuringAppendsOnLocalDisk: on local disk the WAL is
// segment files per writer epoch. A master that merges the shard while its
// worker keeps appending claims it (deleting the worker's segments under
// it), and the worker claims it back; every acknowledged id is read once.
func TestOrphanMergesDuringAppendsOnLocalDisk(t *testing.T) {
	ctx := context.Background()
	local, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	worker := mustStore(t, newCatalog(t, local, "w", quiet(Options{})), "exp")
	master := mustStore(t, newCatalog(t, local, "master", quiet(Options{})), "exp")

	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("g%d-%05d", g, i)
				if _, err := worker.Append(ctx, []Record{{ID: id, RolloutID: "r"}}); err == nil {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}
		}()
	}
	merged := 0
	for range 6 {
		time.Sleep(30 * time.Millisecond)
		res, err := master.MergeShard(ctx, ShardID("w"))
		if errors.Is(err, wal.ErrFenced) {
			continue // the worker claimed its shard back during the merge
		}
		if err != nil {
			t.Fatalf("orphan merge: %v", err)
		}
		merged += int(res.Rows)
	}
	close(stop)
	wg.Wait()
	w := worker.writer.Load()
	if len(acked) == 0 || w == nil || w.Epoch() < 3 {
		t.Fatalf("%d acknowledged, writer %v: the worker was never fenced and back", len(acked), w)
	}
	epoch := w.Epoch()
	settle(t, worker)
	verifyExactlyOnce(t, worker, acked)
	t.Logf("%d acknowledged ids, %d rows merged by the master, worker epoch %d", len(acked), merged, epoch)
}
