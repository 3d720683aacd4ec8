package index

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// TestOpenIndexFileIsOneRoundTrip: opening an index file bigger than the
// rollout store's small-file threshold (1 MiB, read whole) takes its size
// and its metadata from one read of its tail (objstore.GetTail): one
// request, where a Head and then the read that depends on it took two
// round trips (and, through SmallFiles, a third request: the speculative
// read of its first MiB). Run with -v to print the counts.
func TestOpenIndexFileIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, res := bigIndex(t)
	key := indexDir(res.Index) + PagesFile
	info, err := st.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size <= 1<<20 {
		t.Fatalf("%s is %d bytes; the test wants more than 1 MiB", key, info.Size)
	}
	for _, w := range []struct {
		name string
		wrap func(objstore.Store) objstore.Store
	}{{"store", plain}, {"smallfiles", asRollout}} {
		cs := objstore.NewCounting(st, 40*time.Millisecond) // above scheduling delays under -race on busy cores
		if _, err := openFile(ctx, w.wrap(cs), key); err != nil {
			t.Fatal(err)
		}
		got := cs.Counts()
		t.Logf("%s: open a %d-byte index file: %s", w.name, info.Size, got)
		if got.Sequential != 1 || got.Requests() != 1 {
			t.Errorf("%s: opening a %d-byte index file: %s; want 1 request, 1 sequential", w.name, info.Size, got)
		}
	}
}

// TestOpenBTreeRoundTrips: a cold OpenBTree opens its two files in
// parallel (one round trip; it was a Head and a read each, one after the
// other: four) and then reads the page lookup's string columns from the
// 64 KiB tail its open read (lance/file keeps it; they were two more
// round trips, offsets then bytes); through SmallFiles the page lookup,
// under 1 MiB, arrives whole with its tail and its read costs nothing.
func TestOpenBTreeRoundTrips(t *testing.T) {
	ctx := context.Background()
	st, res := bigIndex(t)
	for _, w := range []struct {
		name       string
		wrap       func(objstore.Store) objstore.Store
		sequential int
	}{
		{"store", plain, 1},
		{"smallfiles", asRollout, 1},
	} {
		cs := objstore.NewCounting(st, 40*time.Millisecond) // above scheduling delays under -race on busy cores
		if _, err := OpenBTree(ctx, w.wrap(cs), res.Index, nil); err != nil {
			t.Fatal(err)
		}
		got := cs.Counts()
		t.Logf("%s: OpenBTree: %s", w.name, got)
		if got.Sequential != w.sequential {
			t.Errorf("%s: OpenBTree: %s; want %d sequential", w.name, got, w.sequential)
		}
	}
}

// bigIndex builds an id index over 120,000 rows: its pages file is over
// the rollout store's 1 MiB small-file threshold.
func bigIndex(t *testing.T) (objstore.Store, *Result) {
	t.Helper()
	st := newStore(t)
	appendRows(t, st, 0, 120_000)
	res, err := Update(context.Background(), st, "id", BuildOptions{})
	if err != nil || !res.Built {
		t.Fatalf("update: %+v %v", res, err)
	}
	return st, res
}

func plain(s objstore.Store) objstore.Store { return s }

// asRollout wraps s as a rollout store reads index files.
func asRollout(s objstore.Store) objstore.Store {
	return objstore.NewSmallFiles(s, func(k string) bool { return strings.HasPrefix(k, IndicesDir) }, 1<<20)
}

// TestRegression_ColdIndexLookupOnAnObjectStore: a first lookup of one value through a Finder
// on a cold process (the index's files opened through SmallFiles, as a
// rollout store reads them) costs one round trip to open the index and
// then the page's reads: its offsets, then its values with its row ids
// beside them, by range. It was four: the page file's tail was read twice
// (the preload's and the open's), and the file, taken for a local one
// until a read failed to open it, read its columns one after another and
// its offsets buffer whole (960 KB here).
func TestRegression_ColdIndexLookupOnAnObjectStore(t *testing.T) {
	ctx := context.Background()
	local, res := bigIndex(t)
	st := copyStore(t, local)
	cs := objstore.NewCounting(st, 40*time.Millisecond)
	f := NewFinder(64 << 20)
	tr, err := f.tree(ctx, asRollout(cs), res.Index)
	if err != nil {
		t.Fatal(err)
	}
	open := cs.Counts()
	t.Logf("open: %s", open)
	addrs, err := tr.Equal(ctx, fmt.Sprintf("k%07d", (77_777*7919)%1000003), nil)
	if err != nil || len(addrs) != 1 {
		t.Fatalf("equal: %v %v", addrs, err)
	}
	got := cs.Counts()
	t.Logf("open and lookup: %s", got)
	if open.Sequential != 1 || got.Sequential > 3 {
		t.Errorf("open %d sequential, open and lookup %d; want 1 and at most 3", open.Sequential, got.Sequential)
	}
	if read := got.BytesRead - open.BytesRead; read > 64<<10 {
		t.Errorf("the lookup read %d bytes; want the page's ranges (under 64 KiB), not whole buffers", read)
	}
}

// TestRegression_ColdFindLooksUpEverySegmentAtOnce: a reader's Find on a
// cold process opens an index's segments and looks a value up in each at
// once. It went one segment after another: a cold get at 10M rows, whose
// id index had 11 segments after its merges, waited for 4 lookups in a
// row (the others found no page to read).
func TestRegression_ColdFindLooksUpEverySegmentAtOnce(t *testing.T) {
	ctx := context.Background()
	st := threeSegments(t)
	cs := objstore.NewCounting(st, 40*time.Millisecond)
	d, err := table.Open(ctx, asRollout(cs))
	if err != nil {
		t.Fatal(err)
	}
	if segs, _ := BTreeIndexes(d, "id"); len(segs) != 3 {
		t.Fatalf("%d segments, want 3", len(segs))
	}
	cs.Reset()
	// Values of every segment's range: each segment reads a page.
	vals := []string{fmt.Sprintf("k%07d", (77*7919)%1000003)}
	_, rows, err := NewFinder(64<<20).Find(ctx, d, "id", vals)
	if err != nil || len(rows) == 0 {
		t.Fatalf("find: %v %v", rows, err)
	}
	got := cs.Counts()
	t.Logf("open 3 segments and find: %s", got)
	if got.Sequential > 3 {
		t.Errorf("open 3 segments and find one value: %s; want at most 3 sequential (open, then a page's offsets and its values)", got)
	}
}

// TestRegression_ColdFindReadsEachSegmentsMetadataNotAMiB: a cold Find
// over segments whose page_data files are large reads each one's footer
// and metadata, not the small-file wrapper's speculative MiB of it: a
// 10M-row store's cold get downloaded 13.7 MB, 1 MiB for each of the id
// index's 11 segments, to return one row.
func TestRegression_ColdFindReadsEachSegmentsMetadataNotAMiB(t *testing.T) {
	ctx := context.Background()
	st := threeSegments(t)
	cs := objstore.NewCounting(st, 0)
	d, err := table.Open(ctx, asRollout(cs))
	if err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	vals := []string{fmt.Sprintf("k%07d", (77*7919)%1000003)}
	if _, rows, err := NewFinder(64<<20).Find(ctx, d, "id", vals); err != nil || len(rows) == 0 {
		t.Fatalf("find: %v %v", rows, err)
	}
	got := cs.Counts()
	t.Logf("open 3 segments and find: %s", got)
	if got.BytesRead > 3*128<<10 {
		t.Errorf("a cold find over 3 segments of 120,000 rows read %d bytes; want their lookup files, page_data tails (64 KiB) and one page each (under 128 KiB a segment)", got.BytesRead)
	}
}

// TestRegression_ColdLookupWhereKeyLengthsDrift: a cold lookup of a key in
// an index whose sorted keys change length along it (long ones, then
// short ones) reads the page's offsets and its values in one round trip:
// the values' place comes from the lookup's page bounds as well as from
// the file's mean length. A cold get at 10M rows (ids of 10 characters
// sorting after those of 11) paid a second round trip for the bytes the
// mean misplaced.
func TestRegression_ColdLookupWhereKeyLengthsDrift(t *testing.T) {
	ctx := context.Background()
	local := newStore(t)
	d, err := table.Open(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	for i := range 120_000 {
		id := fmt.Sprintf("a%030d", i) // sorts first, 31 bytes
		if i >= 60_000 {
			id = fmt.Sprintf("b%06d", i) // 7 bytes
		}
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).AppendNull()
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	frag, err := table.WriteFragment(ctx, local, d.Schema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Append(ctx, local, []*pb.DataFragment{frag}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := Update(ctx, local, "id", BuildOptions{})
	if err != nil || !res.Built {
		t.Fatalf("update: %+v %v", res, err)
	}
	cs := objstore.NewCounting(copyStore(t, local), 40*time.Millisecond)
	// Opened as a Finder opens a segment of 120,000 rows: its page_data
	// file's metadata read, not its last MiB (which would hold the page).
	tr, err := NewFinder(64<<20).treeSized(ctx, asRollout(cs), res.Index, 120_000)
	if err != nil {
		t.Fatal(err)
	}
	open := cs.Counts()
	addrs, err := tr.Equal(ctx, "b090000", nil)
	if err != nil || len(addrs) != 1 {
		t.Fatalf("equal: %v %v", addrs, err)
	}
	t.Logf("open: %s; then the lookup: %s", open, cs.Counts())
	if got := cs.Counts().Sequential - open.Sequential; got != 1 {
		t.Errorf("the lookup took %d sequential round trips after the open; want 1 (offsets and values in one wave)", got)
	}
}

// threeSegments is an object store holding a table of 360,000 rows whose
// id index is three delta segments of 120,000 rows.
func threeSegments(t *testing.T) objstore.Store {
	t.Helper()
	local := newStore(t)
	for k := range 3 {
		appendRows(t, local, 120_000*k, 120_000*(k+1))
		if _, err := Update(context.Background(), local, "id", BuildOptions{Delta: true, BatchSize: 256}); err != nil {
			t.Fatal(err)
		}
	}
	return copyStore(t, local)
}

// copyStore copies every object of src into a memory store (an object
// store: no file is held open, reads go by range as on S3).
func copyStore(t *testing.T, src objstore.Store) objstore.Store {
	t.Helper()
	ctx := context.Background()
	st := objstore.NewMemory()
	infos, err := src.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range infos {
		b, err := src.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, o.Key, b); err != nil {
			t.Fatal(err)
		}
	}
	return st
}
