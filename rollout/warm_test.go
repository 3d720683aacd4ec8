package rollout

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/objstore"
)

// keyLog records the keys of the objects read through it.
type keyLog struct {
	objstore.Store
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) add(key string) {
	k.mu.Lock()
	k.keys = append(k.keys, key)
	k.mu.Unlock()
}

func (k *keyLog) Get(ctx context.Context, key string) ([]byte, error) {
	k.add(key)
	return k.Store.Get(ctx, key)
}

func (k *keyLog) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	k.add(key)
	return k.Store.GetRange(ctx, key, off, n)
}

// take returns the keys read since the last take.
func (k *keyLog) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.keys
	k.keys = nil
	return out
}

// readOf returns the keys of ks that hold part, sorted and without repeats.
func readOf(ks []string, part string) []string {
	var out []string
	for _, k := range ks {
		if strings.Contains(k, part) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// warmID and warmRollout are row i's id and rollout id in warmStore: long
// enough that each index's pages are more than the tail an open of the
// index file reads and keeps (64 KiB), so that its lookups read pages.
func warmID(i int) string {
	return fmt.Sprintf("id-%04d-%x", i, sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
}
func warmRollout(i int) string {
	return fmt.Sprintf("ro-%03d-%x", i/6, sha256.Sum256([]byte{byte(i / 6), 'r'}))
}

// warmStore makes a store of 3,000 merged rows (indexed, in index pages of
// 16 rows) and 20 pending ones, and returns a new process's handle on it
// (a catalog with caches of its own) through a keyLog.
func warmStore(t *testing.T) (*Store, *keyLog) {
	t.Helper()
	prev := indexBatchSize
	indexBatchSize = 16 // many index pages
	t.Cleanup(func() { indexBatchSize = prev })
	ctx := context.Background()
	mem := objstore.NewMemory()
	w := mustStore(t, newCatalog(t, mem, "w", quiet(Options{})), "warm")
	var batch []Record
	for i := range 3000 {
		batch = append(batch, Record{ID: warmID(i), RolloutID: warmRollout(i), Content: ptr(fmt.Sprintf("v%d", i))})
	}
	appendFlush(t, w, batch)
	if _, err := w.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, w, recs("p", 20, "ro-pending"))
	log := &keyLog{Store: mem}
	r := mustStore(t, newCatalog(t, log, "reader", quiet(Options{IndexCache: index.NewCache(index.CacheOptions{Bytes: 64 << 20})})), "warm")
	return r, log
}

// TestWarmServesFirstReadsWarm: after Warm, a new process's first get,
// trajectory and get of a pending row read no index file and no
// generation file (Warm read the index pages and decoded the pending
// generations); without it they read both.
func TestWarmServesFirstReadsWarm(t *testing.T) {
	ctx := context.Background()
	for _, warm := range []bool{false, true} {
		s, log := warmStore(t)
		if warm {
			st, err := s.Warm(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Fragments != 1 || st.Generations != 1 || !slices.Equal(st.Indexes, []string{ColID, ColRolloutID}) {
				t.Fatalf("Warm: %+v, want 1 fragment, 1 generation, the id and rollout_id indexes", st)
			}
		}
		log.take()
		if r, err := s.Get(ctx, warmID(17)); err != nil || r.ID != warmID(17) {
			t.Fatalf("get: %+v %v", r, err)
		}
		if rs, err := s.Trajectory(ctx, warmRollout(30)); err != nil || len(rs) != 6 {
			t.Fatalf("trajectory: %d records, %v", len(rs), err)
		}
		if r, err := s.Get(ctx, "p-007"); err != nil || r.RolloutID != "ro-pending" {
			t.Fatalf("get of a pending row: %+v %v", r, err)
		}
		read := log.take()
		idx, gens := readOf(read, "_indices/"), readOf(read, "/gen/")
		// 3,000 rows in pages of 16: 188 pages in each of the two indexes.
		pages, _ := s.opts.IndexCache.Stats()
		if warm && (len(idx)+len(gens) > 0 || pages < 2*188) {
			t.Errorf("after Warm the first reads read index files %v and generation files %v; %d index pages cached, want every one", idx, gens, pages)
		}
		if !warm && (len(idx) == 0 || len(gens) == 0) {
			t.Errorf("without Warm the first reads read index files %v and generation files %v: the test shows nothing", idx, gens)
		}
	}
}

// TestWarmOpenReadsNoDataAhead: WarmOpen opens the store (its indexes'
// lookup tables, the pending generations) and reads no index page ahead;
// the first get after it then reads an index page but no generation file,
// and a Warm after it reads the index pages it left.
func TestWarmOpenReadsNoDataAhead(t *testing.T) {
	ctx := context.Background()
	s, log := warmStore(t)
	if s.Local() {
		t.Fatal("a store on a memory object store says it is local")
	}
	disk, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !mustStore(t, newCatalog(t, disk, "d", quiet(Options{})), "local").Local() {
		t.Fatal("a store on local disk says it is not local (its worker would be ready before its data warm)")
	}
	st, err := s.WarmOpen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fragments != 1 || st.Generations != 1 || len(st.Indexes) != 0 {
		t.Fatalf("WarmOpen: %+v, want 1 fragment, 1 generation, no index prewarmed", st)
	}
	if pages, _ := s.opts.IndexCache.Stats(); pages != 0 {
		t.Errorf("WarmOpen read %d index pages ahead, want none", pages)
	}
	log.take()
	if r, err := s.Get(ctx, warmID(17)); err != nil || r.ID != warmID(17) {
		t.Fatalf("get: %+v %v", r, err)
	}
	if gens := readOf(log.take(), "/gen/"); len(gens) > 0 {
		t.Errorf("the first get after WarmOpen read generation files %v", gens)
	}
	if _, err := s.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	if pages, _ := s.opts.IndexCache.Stats(); pages < 2*188 {
		t.Errorf("Warm after WarmOpen cached %d index pages, want every one (2x188)", pages)
	}
}

// TestMergeWarmsItsIndexSegment: in a process whose reads prewarmed the
// store's indexes, a merge that commits a new index segment prewarms it,
// so that the first get of a merged row reads no index file.
func TestMergeWarmsItsIndexSegment(t *testing.T) {
	ctx := context.Background()
	s, log := warmStore(t)
	if _, err := s.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	appendFlush(t, s, recs("m", 40, "ro-merged"))
	res, err := s.Merge(ctx)
	if err != nil || res.Rows == 0 {
		t.Fatalf("merge: %+v %v", res, err)
	}
	if err := mergeWarms.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.opts.IndexCache.WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	log.take()
	for _, id := range []string{"m-013", warmID(42)} {
		if r, err := s.Get(ctx, id); err != nil || r.ID != id {
			t.Fatalf("get %s: %+v %v", id, r, err)
		}
	}
	if rs, err := s.Trajectory(ctx, "ro-merged"); err != nil || len(rs) != 40 {
		t.Fatalf("trajectory: %d records, %v", len(rs), err)
	}
	if idx := readOf(log.take(), "_indices/"); len(idx) > 0 {
		t.Errorf("the first reads after the merge read index files %v", idx)
	}
}
