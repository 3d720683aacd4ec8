package index

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
	// On an object store: a memory store holds no file open, so reads go
	// by range as on S3.
	st := objstore.NewMemory()
	keys, err := local.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range keys {
		b, err := local.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, o.Key, b); err != nil {
			t.Fatal(err)
		}
	}
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
