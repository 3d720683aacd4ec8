package index

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// TestMain turns prewarming off for the package's tests, whose assertions
// name the pages a lookup caches; TestPrewarm turns it on.
func TestMain(m *testing.M) {
	prewarmOn = func() bool { return false }
	os.Exit(m.Run())
}

// withPrewarm turns prewarming on for the rest of t.
func withPrewarm(t *testing.T) {
	prev := prewarmOn
	prewarmOn = func() bool { return true }
	t.Cleanup(func() { prewarmOn = prev })
}

// TestPrewarmCachesEveryPageWithItsRowIDs: the first point lookup of an
// index starts a background read of all its pages, values and row ids;
// once it is done, lookups of any key read nothing from the store and
// agree with a scan, and its pages (nulls included) equal pages read on
// demand. A batch lookup starts none, nor does an index larger than the
// cache's prewarm share.
func TestPrewarmCachesEveryPageWithItsRowIDs(t *testing.T) {
	withPrewarm(t)
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 20000)
	if _, err := Update(ctx, st, "id", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	counting := objstore.NewCounting(st, 0)
	d, err := table.Open(ctx, counting)
	if err != nil {
		t.Fatal(err)
	}
	idxs, err := BTreeIndexes(d, "id")
	if err != nil || len(idxs) != 1 {
		t.Fatalf("indexes: %v %v", idxs, err)
	}
	var ns []int
	for i := 0; i < 20000; i += 97 {
		ns = append(ns, i)
	}
	ps := probes(ns...)
	want := lookup(t, d, "id", ps, nil)
	counting.Reset()

	f := NewFinder(64 << 20)
	if _, _, err := f.Find(ctx, d, "id", ps[:1]); err != nil {
		t.Fatal(err)
	}
	if err := WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	tr, err := f.tree(ctx, counting, uuidString(idxs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if tr.pages.Size() <= file.TailReadSize {
		t.Fatalf("page_data of %d bytes is read whole when opened: not the case under test", tr.pages.Size())
	}
	for p := range tr.maxs {
		pg, ok := f.cache.get(pageKey{uuid: tr.uuid, page: p})
		if !ok || pg.ids == nil {
			t.Fatalf("page %d of %d not cached with its row ids after the prewarm", p, len(tr.maxs))
		}
	}
	counting.Reset()
	for _, v := range ps {
		if _, err := tr.Equal(ctx, v, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := counting.Counts(); c.Requests() > 0 {
		t.Fatalf("index lookups after the prewarm read the store: %s", c)
	}
	if got := lookup(t, d, "id", ps, f); !slices.Equal(got, want) || len(want) != len(ns) {
		t.Fatalf("index gives %d rows, scan %d (want %d)", len(got), len(want), len(ns))
	}

	// A column with nulls (every 11th grp) and values filling whole
	// pages: its prewarmed pages answer as a scan does.
	if _, err := Update(ctx, st, "grp", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	d, err = table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	gs := []string{"g0", "g3", "g6"}
	wantG := lookup(t, d, "grp", gs, nil)
	if _, _, err := f.Find(ctx, d, "grp", gs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, d, "grp", gs, f); !slices.Equal(got, wantG) || len(got) == 0 {
		t.Fatalf("grp after its prewarm: index gives %d rows, scan %d", len(got), len(wantG))
	}
	gidx, err := BTreeIndexes(d, "grp")
	if err != nil || len(gidx) != 1 {
		t.Fatalf("grp indexes: %v %v", gidx, err)
	}
	warm, err := f.tree(ctx, st, uuidString(gidx[0]))
	if err != nil {
		t.Fatal(err)
	}
	cold, err := OpenBTree(ctx, st, uuidString(gidx[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	nulls := 0
	for p := range warm.maxs {
		w, ok := f.cache.get(pageKey{uuid: warm.uuid, page: p})
		if !ok {
			t.Fatalf("grp page %d not prewarmed", p)
		}
		c, err := cold.readPage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		cids, err := cold.rowIDs(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if w.len() != c.len() || w.start != c.start {
			t.Fatalf("grp page %d: %d rows from %d prewarmed, %d from %d read", p, w.len(), w.start, c.len(), c.start)
		}
		for j := 0; j < c.len(); j++ {
			if w.entry(j, w.ids) != c.entry(j, cids) {
				t.Fatalf("grp page %d row %d: prewarmed %+v, read %+v", p, j, w.entry(j, w.ids), c.entry(j, cids))
			}
			if c.values.IsNull(j) {
				nulls++
			}
		}
	}
	if nulls == 0 {
		t.Fatal("no null value in the grp index: not the case under test")
	}

	// A batch lookup (a merge's check) starts none.
	batch := NewFinder(64 << 20)
	if len(ps) < keyFilterMinValues {
		t.Fatalf("%d probes: not a batch", len(ps))
	}
	if _, _, err := batch.Find(ctx, d, "id", ps); err != nil {
		t.Fatal(err)
	}
	if bt, err := batch.tree(ctx, st, uuidString(idxs[0])); err != nil || bt.prewarmed.Load() {
		t.Fatalf("a batch lookup started a prewarm (%v)", err)
	}

	// A memory limit under eight times the index: nothing is read ahead.
	lim := debug.SetMemoryLimit(8*tr.pages.Size() - 1)
	limited := NewFinder(64 << 20)
	_, _, err = limited.Find(ctx, d, "id", ps[:1])
	debug.SetMemoryLimit(lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(limited.cache.m); n > 2 {
		t.Fatalf("%d pages cached by one lookup under a memory limit of 8x the index: it was prewarmed", n)
	}

	// A cache whose prewarm share the index exceeds: nothing is read ahead.
	small := NewFinder(tr.pages.Size())
	if _, _, err := small.Find(ctx, d, "id", ps[:1]); err != nil {
		t.Fatal(err)
	}
	if err := WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(small.cache.m); n > 2 {
		t.Fatalf("%d pages cached by one lookup with a cache under twice the index: it was prewarmed", n)
	}
}

// TestDefaultCacheFollowsMemoryLimit: without LC_INDEX_CACHE_BYTES the
// shared page cache is 1 GiB, or a quarter of a smaller Go memory limit.
func TestDefaultCacheFollowsMemoryLimit(t *testing.T) {
	for _, c := range []struct{ limit, want int64 }{
		{math.MaxInt64, DefaultCacheBytes},
		{24 << 30, DefaultCacheBytes},
		{3 << 30, 768 << 20},
		{1 << 30, 256 << 20},
	} {
		if got := defaultCacheBytes(c.limit); got != c.want {
			t.Errorf("limit %d: cache %d, want %d", c.limit, got, c.want)
		}
	}
}

// TestPrewarmRest: after a wave of reads the prewarm rests so that it
// uses at most half a CPU, counting as its own CPU the process's (or, where
// that is unknown, every read busy the whole time), and little after a wave
// that waited on storage.
func TestPrewarmRest(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		wall, cpu time.Duration
		known     bool
		reads     int
		want      time.Duration
	}{
		{100 * ms, 5 * ms, true, 4, 0},          // waited on storage
		{100 * ms, 80 * ms, true, 4, 60 * ms},   // 80 of 180 ms
		{100 * ms, 100 * ms, true, 1, 100 * ms}, // one core busy
		{100 * ms, 190 * ms, true, 4, 280 * ms}, // two cores busy: 190 of 380 ms
		{100 * ms, 190 * ms, true, 1, 100 * ms}, // one read cannot use more than the wall time
		{100 * ms, 0, false, 1, 100 * ms},
		{100 * ms, 0, false, 4, 700 * ms},
		{100 * ms, -ms, true, 1, 100 * ms},
	} {
		got := prewarmRest(c.wall, c.cpu, c.known, c.reads)
		if got != c.want {
			t.Errorf("prewarmRest(%v, %v, %v, %d) = %v, want %v", c.wall, c.cpu, c.known, c.reads, got, c.want)
		}
		own := min(time.Duration(c.reads)*c.wall, c.cpu)
		if !c.known || c.cpu < 0 {
			own = time.Duration(c.reads) * c.wall
		}
		if 2*own > c.wall+got {
			t.Errorf("prewarmRest(%v, %v, %v, %d) = %v: more than half a CPU", c.wall, c.cpu, c.known, c.reads, got)
		}
	}
	if processCPU() == 0 {
		t.Error("processCPU reads 0 in a process that has run")
	}
}
