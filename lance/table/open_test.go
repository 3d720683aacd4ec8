package table

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow/array"

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

// fragmentedTable makes a table of n fragments of 10 rows and opens it
// through a new counting store with a 2 ms latency (nothing cached; counts
// reset).
func fragmentedTable(t *testing.T, n, rows int) (*objstore.Counting, *Dataset) {
	t.Helper()
	mem := objstore.NewMemory()
	newTable(t, mem)
	for i := range n {
		appendRows(t, mem, i*rows, i*rows+rows)
	}
	c := objstore.NewCounting(mem, 40*time.Millisecond) // above scheduling delays under -race on busy cores
	d, err := Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	c.Reset()
	return c, d
}

// TestWarmFilesOpensInOneWave: WarmFiles opens the newest fragments' data
// files in parallel (one round trip for all of them: the sizes come from
// the manifest), at most max of them, and a second call, or a scan after
// it, reads no footer again.
func TestWarmFilesOpensInOneWave(t *testing.T) {
	ctx := context.Background()
	c, d := fragmentedTable(t, 4, 10)
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

// TestTakeRowsReadsFragmentsInParallel: a take of rows spread over several
// fragments (a page of a listing in key order) reads the fragments at
// once, so on an object store it costs the round trips of one fragment,
// not one fragment's after another's.
func TestTakeRowsReadsFragmentsInParallel(t *testing.T) {
	ctx := context.Background()
	// Fragments of 20,000 rows: the rows taken lie before the 64 KiB tail
	// their file's Open read (a smaller file's take reads nothing).
	const rows = 20_000
	c, d := fragmentedTable(t, 6, rows)
	var addrs []RowAddr
	for _, f := range d.Fragments() {
		addrs = append(addrs, RowAddr{Fragment: f.GetId(), Offset: 7})
	}
	slices.Reverse(addrs)
	take := func() []int64 {
		t.Helper()
		rec, err := d.TakeRows(ctx, addrs, []string{"n", "group"})
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		var got []int64
		for i := range int(rec.NumRows()) {
			got = append(got, rec.Column(0).(*array.Int64).Value(i))
		}
		return got
	}
	take() // opens the files
	c.Reset()
	got := take()
	if want := []int64{5*rows + 7, 4*rows + 7, 3*rows + 7, 2*rows + 7, rows + 7, 7}; !slices.Equal(got, want) {
		t.Fatalf("take = %v, want %v", got, want)
	}
	// Per fragment: the string column's offsets, then its bytes (the int
	// column beside them): two dependent reads, whatever the fragments.
	if n := c.Counts(); n.Sequential > 2 || n.Requests() < len(addrs) {
		t.Fatalf("a take of one row in each of %d fragments: %v, want at most 2 sequential round trips", len(addrs), n)
	}
}

// TestScanOfNoFragmentsAsksNoIndex: a scan restricted to an empty set of
// fragments (a page whose fragments an index walk answered) returns
// nothing and does not look its key up.
func TestScanOfNoFragmentsAsksNoIndex(t *testing.T) {
	mem := objstore.NewMemory()
	newTable(t, mem)
	d := appendRows(t, mem, 0, 10)
	f := &countingFinder{}
	ids := scanIDs(t, d, ScanOptions{Where: []Eq{{Column: "group", Value: "g1"}}, Index: f, Fragments: roaring.New()})
	if len(ids) != 0 || f.calls != 0 {
		t.Fatalf("scan of no fragments: %d rows, %d index lookups; want none", len(ids), f.calls)
	}
	scanIDs(t, d, ScanOptions{Where: []Eq{{Column: "group", Value: "g1"}}, Index: f})
	if f.calls != 1 {
		t.Fatalf("scan of every fragment: %d index lookups, want 1", f.calls)
	}
}

// countingFinder is a RowFinder that covers nothing and counts its calls.
type countingFinder struct{ calls int }

func (f *countingFinder) Find(context.Context, *Dataset, string, []string) (*roaring.Bitmap, map[uint64][]uint32, error) {
	f.calls++
	return nil, nil, nil
}

// firstNames records the n of each ListFirst it forwards.
type firstNames struct {
	objstore.Store
	asked []int
}

func (f *firstNames) ListFirst(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	f.asked = append(f.asked, n)
	return objstore.ListFirst(ctx, f.Store, prefix, n)
}

// TestOpenListsOneVersionName: a read lists one name of _versions/ (on
// local disk every name listed is a stat), and more only when that name is
// not a manifest, such as a writer's temporary file that sorts first.
func TestOpenListsOneVersionName(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMemory()
	newTable(t, mem)
	appendRows(t, mem, 0, 10)
	f := &firstNames{Store: mem}
	d, err := Open(ctx, f)
	if err != nil || d.Version() != 2 {
		t.Fatalf("open: %v %v", d, err)
	}
	if !slices.Equal(f.asked, []int{1}) {
		t.Errorf("names asked %v, want [1]", f.asked)
	}
	if err := mem.Put(ctx, versionsDir+".lance-tmp-1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	f.asked = nil
	d, err = Open(ctx, f)
	if err != nil || d.Version() != 2 {
		t.Fatalf("open past a temporary name: %v %v", d, err)
	}
	if !slices.Equal(f.asked, []int{1, listFirstNames}) {
		t.Errorf("names asked %v, want [1 %d]", f.asked, listFirstNames)
	}
}
