package table

import (
	"context"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// TestOpenIsOneListingWhenCached: the latest version is found by one
// listing, and a version this process decoded is not read again.
func TestOpenIsOneListingWhenCached(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	c := objstore.NewCounting(mem, 0)
	newTable(t, c)
	appendRows(t, c, 0, 10)
	if _, err := Open(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	d, err := Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Counts(); got.Requests() != 1 || got.Calls[objstore.OpList] != 1 {
		t.Errorf("warm Open: %v, want one listing", got)
	}
	if d.Version() != 2 {
		t.Errorf("version %d, want 2", d.Version())
	}
	// A commit by another handle (another process) is seen at once.
	appendRows(t, objstore.NewCounting(mem, 0), 10, 20)
	c.Reset()
	d, err = Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 3 || d.CountRows() != 20 {
		t.Errorf("after another writer's commit: version %d, %d rows; want 3, 20", d.Version(), d.CountRows())
	}
	if got := c.Counts(); got.Requests() != 2 {
		t.Errorf("Open of a new version: %v, want a listing and a read", got)
	}
}

// TestOpenAfterRecreateIsNotStale: a table deleted and created again reuses
// the manifest names; the cached manifest of the old table must not be
// served for the new one.
func TestOpenAfterRecreateIsNotStale(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	c := objstore.NewCounting(mem, 0)
	newTable(t, c)
	appendRows(t, c, 0, 10) // version 2: 10 rows
	if d, err := Open(ctx, c); err != nil || d.CountRows() != 10 {
		t.Fatalf("open: %v", err)
	}
	infos, err := mem.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range infos {
		if err := mem.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	newTable(t, c)
	appendRows(t, c, 0, 3) // version 2 again: 3 rows
	d, err := Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 2 || d.CountRows() != 3 {
		t.Fatalf("after re-creation: version %d with %d rows, want version 2 with 3 (a stale cached manifest)", d.Version(), d.CountRows())
	}
}

// TestWarmFilesOpensInOneWave: WarmFiles opens the newest fragments' data
// files in parallel (one round trip for all of them: the sizes come from
// the manifest), at most max of them, and a second call, or a scan after
// it, reads no footer again.
func TestWarmFilesOpensInOneWave(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	newTable(t, mem)
	for i := range 4 {
		appendRows(t, mem, i*10, i*10+10)
	}
	c := objstore.NewCounting(mem, 2*time.Millisecond) // a new store: nothing cached
	d, err := Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	c.Reset()
	d.WarmFiles(ctx, 3)
	if got := c.Counts(); got.Requests() != 3 || got.Sequential != 1 {
		t.Errorf("WarmFiles(3) of 4 fragments: %v, want 3 requests in 1 round trip", got)
	}
	c.Reset()
	d.WarmFiles(ctx, 4)
	if got := c.Counts(); got.Requests() != 1 {
		t.Errorf("WarmFiles(4) after WarmFiles(3): %v, want the oldest file's one request", got)
	}
	c.Reset()
	if ids := scanIDs(t, d, ScanOptions{}); len(ids) != 40 {
		t.Fatalf("scan: %d ids, want 40", len(ids))
	}
	// Per fragment its id column's offsets, then its bytes; no footer.
	if got := c.Counts(); got.Requests() > 2*4 {
		t.Errorf("scan after WarmFiles: %v, want no footer reads (at most 2 requests per fragment)", got)
	}
}
