package rollout

import (
	"context"
	"fmt"
	"testing"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/objstore"
)

// TestCatalogsWithTheirOwnIndexCachesShareNone: two catalogs on one data
// directory, each with an index cache of its own (Options.IndexCache),
// keep the index pages and key filters their builds and lookups make in
// their own cache: nothing of one shows in the other's.
func TestCatalogsWithTheirOwnIndexCachesShareNone(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	ca, cb := index.NewCache(index.CacheOptions{Bytes: 8 << 20}), index.NewCache(index.CacheOptions{Bytes: 16 << 20})
	a := mustStore(t, newCatalog(t, root, "w", Options{MergeMaxGenerations: 1, IndexCache: ca}), "ic")
	var batch []Record
	for i := range 500 {
		batch = append(batch, Record{ID: fmt.Sprintf("id-%05d", i), RolloutID: fmt.Sprintf("ro-%03d", i/10),
			ProblemID: fmt.Sprintf("p-%02d", i%37), Content: ptr(fmt.Sprintf("v%d", i))})
	}
	appendFlush(t, a, batch)
	for {
		res, err := a.Merge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Remaining == 0 {
			break
		}
	}
	if _, err := a.Get(ctx, "id-00042"); err != nil {
		t.Fatal(err)
	}
	// The lookup started a prewarm of the writer's index in the
	// background: let it end, or its pages land after na is read (CI).
	if err := ca.WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	na, _ := ca.Stats()
	if na == 0 {
		t.Fatal("the writer's index cache holds nothing after a merge and a lookup")
	}
	if nb, _ := cb.Stats(); nb != 0 {
		t.Fatalf("the other catalog's cache holds %d entries before it looked anything up", nb)
	}
	b := mustStore(t, newCatalog(t, root, "reader", Options{IndexCache: cb}), "ic")
	for _, id := range []string{"id-00042", "id-00317"} {
		r, err := b.Get(ctx, id)
		if err != nil || r.ID != id {
			t.Fatalf("get %s through the reader: %+v %v", id, r, err)
		}
	}
	if nb, _ := cb.Stats(); nb == 0 {
		t.Error("the reader's lookups left nothing in its own cache")
	}
	if err := cb.WaitPrewarm(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := ca.Stats(); n != na {
		t.Errorf("the reader's lookups changed the writer's cache: %d entries, were %d", n, na)
	}
}
