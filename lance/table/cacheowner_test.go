package table

import (
	"context"
	"testing"

	"github.com/lance-context/lance-context/internal/lru"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/objstore"
)

// TestCachesShareNone: two Caches, each with its own LRU and file.IO, that
// open the same table keep their own manifests, readers and offsets; a
// version committed from one's Dataset stays in it, and the package's
// default Cache touches neither.
func TestCachesShareNone(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	newTable(t, mem)
	appendRows(t, mem, 0, 100)
	store := objstore.NewCounting(mem, 0) // one store identity for both Caches
	type owned struct {
		meta, offs *lru.Cache
		c          *Cache
	}
	mk := func() owned {
		o := owned{meta: lru.New(64 << 20), offs: lru.New(64 << 20)}
		o.c = NewCache(CacheOptions{LRU: o.meta, IO: file.NewIO(file.IOOptions{Cache: o.offs})})
		return o
	}
	entries := func(c *lru.Cache) int { n, _ := c.Stats(); return n }
	a, b := mk(), mk()
	d, err := a.c.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if got := scanIDs(t, d, ScanOptions{}); len(got) != 100 {
		t.Fatalf("scan of %d ids, want 100", len(got))
	}
	nd, err := CommitFrom(ctx, store, d, func(context.Context, *Dataset) (*Change, error) {
		return &Change{Kind: KindUpdateConfig, ConfigUpsert: map[string]string{"k": "v"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if nd.files != d.files {
		t.Error("a version committed from a Dataset of a Cache left it")
	}
	scanIDs(t, nd, ScanOptions{})
	if _, err := Open(ctx, store); err != nil { // the default Cache
		t.Fatal(err)
	}
	if n := entries(a.meta); n < 2 {
		t.Errorf("the Cache that opened the table holds %d entries, want its manifest and reader", n)
	}
	if n := entries(a.offs); n < 1 {
		t.Errorf("its IO holds %d offsets buffers, want the id column's", n)
	}
	if n, m := entries(b.meta), entries(b.offs); n+m != 0 {
		t.Errorf("the other Cache holds %d entries and %d offsets buffers, want none", n, m)
	}
	// b opens its own: it reads the manifest (a's decoded one is not shared).
	store.Reset()
	if _, err := b.c.Open(ctx, store); err != nil {
		t.Fatal(err)
	}
	if got := store.Counts(); got.Calls[objstore.OpGet] != 1 {
		t.Errorf("the other Cache's first Open: %v, want the manifest read", got)
	}
}
