package index

import (
	"context"
	"testing"

	"github.com/lance-context/lance-context/lance/table"
)

// TestCachesDoNotSharePages: Finders of two Caches keep the pages their
// lookups decode in their own Cache, not in the other one nor in the
// default; a Cache of Bytes < 0 keeps none, and the zero options size one
// by the memory limit.
func TestCachesDoNotSharePages(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 2000)
	if _, err := Update(ctx, st, "id", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewCache(CacheOptions{Bytes: 8 << 20}), NewCache(CacheOptions{Bytes: 8 << 20})
	none := NewCache(CacheOptions{Bytes: -1})
	if a.Bytes() != 8<<20 || none.Bytes() != 0 || NewCache(CacheOptions{}).Bytes() <= 0 {
		t.Fatalf("sizes %d, %d, %d", a.Bytes(), none.Bytes(), NewCache(CacheOptions{}).Bytes())
	}
	probe := rows(5, 6)
	v := probe.Column(0).(interface{ Value(int) string }).Value(0)
	probe.Release()
	defBefore := len(DefaultCache().pages.m)
	for _, c := range []*Cache{a, none} {
		cov, got, err := c.NewFinder().Addrs(ctx, d, "id", v)
		if err != nil || cov == nil || len(got) != 1 {
			t.Fatalf("Addrs = %v, %v, %v", cov, got, err)
		}
	}
	if len(a.pages.m) == 0 {
		t.Fatal("the lookup's Cache holds no page")
	}
	if n := len(b.pages.m); n != 0 {
		t.Errorf("another Cache holds %d pages, want none", n)
	}
	if n := len(none.pages.m); n != 0 {
		t.Errorf("a Cache of no bytes holds %d pages", n)
	}
	if n := len(DefaultCache().pages.m); n != defBefore {
		t.Errorf("the default Cache went from %d to %d pages", defBefore, n)
	}
}
