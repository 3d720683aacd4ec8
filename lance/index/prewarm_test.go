package index

import (
	"context"
	"os"
	"slices"
	"testing"

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

// TestPrewarmCachesEveryPageWithItsRowIDs: the first lookup of an index
// starts a background read of all its pages, values and row ids; once it
// is done, lookups of any key read nothing from the store and agree with a
// scan. An index larger than the cache's prewarm share is not prewarmed.
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
