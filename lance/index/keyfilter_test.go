package index

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

func TestKeyFilterHasNoFalseNegatives(t *testing.T) {
	const n = 100_000
	f := newKeyFilter(n)
	for i := range n {
		f.add(fmt.Sprintf("id-%d", i))
	}
	for i := range n {
		if !f.mayHold(fmt.Sprintf("id-%d", i)) {
			t.Fatalf("id-%d added, filter says absent", i)
		}
	}
	fp := 0
	for i := range n {
		if f.mayHold(fmt.Sprintf("absent-%d", i)) {
			fp++
		}
	}
	if fp > n*3/100 {
		t.Fatalf("%d false positives in %d, want about 1%%", fp, n)
	}
}

// keyProbes returns count ids of rows(0, upTo) (present) or count ids in
// their range that no row has (absent), spread over the range, starting at
// the from-th of either.
func keyProbes(upTo, from, count int, present bool) []string {
	has := map[int]bool{}
	for i := range upTo {
		has[(i*7919)%1000003] = true
	}
	var out []string
	for j, seen := 0, 0; len(out) < count; j++ {
		n := (j * 104729) % 1000003 // spread over the key range (and pages)
		if has[n] == present {
			if seen >= from {
				out = append(out, fmt.Sprintf("k%07d", n))
			}
			seen++
		}
	}
	return out
}

// smallKeyFilterSegments gives the small segments of a test's tables
// their key filters.
func smallKeyFilterSegments(t *testing.T) {
	n := keyFilterMinRows
	keyFilterMinRows = 1000
	t.Cleanup(func() { keyFilterMinRows = n })
}

func pagesOf(c *pageCache, uuid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := range c.m {
		if k.uuid == uuid && !k.filter {
			n++
		}
	}
	return n
}

// TestBatchLookupSkipsKeysTheFilterRulesOut: a batch lookup of absent keys
// (a merge's check of new ids) reads index pages until the segment's key
// filter is built, in the background after the first batch, and then none
// but its few false positives'; present keys are all still found.
func TestBatchLookupSkipsKeysTheFilterRulesOut(t *testing.T) {
	smallKeyFilterSegments(t)
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 20_000)
	res, err := Update(ctx, st, "id", BuildOptions{BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFinder(64 << 20)
	if _, rows, err := f.Find(ctx, d, "id", keyProbes(20_000, 0, 64, false)); err != nil || len(rows) != 0 {
		t.Fatalf("absent keys: %v %v", rows, err)
	}
	before := pagesOf(f.cache, res.Index)
	if before < 20 {
		t.Fatalf("first batch read %d pages; want one per key's page (no filter yet)", before)
	}
	filterBuilds.wg.Wait()
	if f.cache.getFilter(res.Index) == nil {
		t.Fatal("no key filter built after the first batch")
	}
	if _, rows, err := f.Find(ctx, d, "id", keyProbes(20_000, 64, 64, false)); err != nil || len(rows) != 0 {
		t.Fatalf("absent keys: %v %v", rows, err)
	}
	if read := pagesOf(f.cache, res.Index) - before; read > 4 {
		t.Errorf("a batch of 64 absent keys read %d pages with the filter built; want its false positives' (~1%%)", read)
	}
	present := keyProbes(20_000, 0, 300, true)
	if got := lookup(t, d, "id", present, f); len(got) != len(present) {
		t.Fatalf("present keys: %d rows found, want %d", len(got), len(present))
	}
}

// TestBuildMakesTheKeyFilterOfKeyColumns: a segment of a key column gets
// its filter as it is written, in the build's Cache (one of its own
// here, not the default), holding every key; other columns get none.
func TestBuildMakesTheKeyFilterOfKeyColumns(t *testing.T) {
	smallKeyFilterSegments(t)
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 5000)
	c := NewCache(CacheOptions{Bytes: 64 << 20})
	rs, err := UpdateColumns(ctx, st, []string{"id", "grp"}, BuildOptions{KeyColumns: []string{"id"}, Cache: c})
	if err != nil || len(rs) != 2 {
		t.Fatalf("update: %v %v", rs, err)
	}
	if DefaultCache().pages.getFilter(rs[0].Index) != nil {
		t.Error("the key filter went to the default cache, not the build's")
	}
	kf := c.pages.getFilter(rs[0].Index)
	if kf == nil {
		t.Fatal("no key filter for the id segment")
	}
	for _, k := range keyProbes(5000, 0, 5000, true) {
		if !kf.mayHold(k) {
			t.Fatalf("key %s is in the segment; its filter says absent", k)
		}
	}
	if c.pages.getFilter(rs[1].Index) != nil {
		t.Error("a key filter for grp, which is not a key column")
	}
}

// TestFailedKeyFilterBuildBacksOff: a background filter build that fails
// (here every read of the segment's pages) is not started again by the
// next batch lookup, each of which would read the whole segment, until
// its retry delay has passed; then it is, and the filter is built.
func TestFailedKeyFilterBuildBacksOff(t *testing.T) {
	smallKeyFilterSegments(t)
	rmin := filterRetryMin
	filterRetryMin = 5 * time.Minute // longer than the test
	t.Cleanup(func() { filterRetryMin = rmin })
	ctx := context.Background()
	inner := newStore(t)
	appendRows(t, inner, 0, 20_000)
	res, err := Update(ctx, inner, "id", BuildOptions{BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	st := objstore.NewFaulty(inner, objstore.FaultConfig{})
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFinder(64 << 20)
	// One key (no filter wanted) opens the segment while its files read.
	if _, _, err := f.Find(ctx, d, "id", keyProbes(20_000, 0, 1, true)); err != nil {
		t.Fatal(err)
	}
	var pageReads atomic.Int64
	st.SetHook(func(op objstore.Op, key string, _ int) objstore.Fault {
		if strings.HasSuffix(key, PagesFile) && op == objstore.OpGetRange {
			pageReads.Add(1)
			return objstore.FaultError
		}
		return objstore.FaultNone
	})
	_, _, _ = f.Find(ctx, d, "id", keyProbes(20_000, 0, 64, false)) // fails: no page reads
	filterBuilds.wg.Wait()
	if f.cache.getFilter(res.Index) != nil {
		t.Fatal("a filter was built from pages that cannot be read")
	}
	if pageReads.Load() == 0 {
		t.Fatal("the hook saw no page read: the test does not exercise the failure")
	}
	filterBuilds.Lock()
	_, failed := filterBuilds.failed[res.Index]
	filterBuilds.Unlock()
	if !failed {
		t.Fatal("the failed filter build was not recorded")
	}
	// Within the delay: no new build, whether or not the pages now read.
	st.SetHook(nil)
	for range 3 {
		if _, rows, err := f.Find(ctx, d, "id", keyProbes(20_000, 64, 64, false)); err != nil || len(rows) != 0 {
			t.Fatalf("absent keys: %v %v", rows, err)
		}
		filterBuilds.wg.Wait()
	}
	if f.cache.getFilter(res.Index) != nil {
		t.Fatal("the filter was built again within the retry delay")
	}
	// Once the delay has passed, the next batch lookup builds it.
	filterBuilds.Lock()
	ff := filterBuilds.failed[res.Index]
	ff.next = time.Now()
	filterBuilds.failed[res.Index] = ff
	filterBuilds.Unlock()
	if ff.delay != filterRetryMin {
		t.Errorf("retry delay %v after one failure, want the minimum (%v)", ff.delay, filterRetryMin)
	}
	if _, _, err := f.Find(ctx, d, "id", keyProbes(20_000, 128, 64, false)); err != nil {
		t.Fatal(err)
	}
	filterBuilds.wg.Wait()
	if f.cache.getFilter(res.Index) == nil {
		t.Fatal("no filter built after the retry delay")
	}
	filterBuilds.Lock()
	_, still := filterBuilds.failed[res.Index]
	filterBuilds.Unlock()
	if still {
		t.Error("a built filter left its failure behind")
	}
}
