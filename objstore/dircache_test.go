package objstore

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestLocalListingReusedOnlyWhileUnchanged: a directory's listing is read
// from disk once it has been quiet for the racy margin, then reused; every
// change of its names (a put, a delete) is seen by the next listing, and a
// directory changed within the margin is read every time.
func TestLocalListingReusedOnlyWhileUnchanged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("listings are reused on Linux only")
	}
	margin := dirRacyMargin
	dirRacyMargin = 50 * time.Millisecond
	t.Cleanup(func() { dirRacyMargin = margin })
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put := func(k string) {
		t.Helper()
		if err := l.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	list := func(want ...string) int64 {
		t.Helper()
		before := dirReads.Load()
		got, err := l.ListKeys(ctx, "d/")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
		first, err := ListFirst(ctx, l, "d/", 1)
		if err != nil || len(first) != 1 || first[0].Key != want[0] {
			t.Fatalf("first %v %v, want %s", first, err, want[0])
		}
		return dirReads.Load() - before
	}
	put("d/b")
	if n := list("d/b"); n != 2 {
		t.Errorf("a directory changed within the margin: %d reads for 2 listings, want 2", n)
	}
	time.Sleep(2 * dirRacyMargin)
	list("d/b") // read once more, now settled: kept
	if n := list("d/b"); n != 0 {
		t.Errorf("an unchanged directory was read %d times, want 0", n)
	}
	put("d/a")
	if n := list("d/a", "d/b"); n == 0 {
		t.Error("a put was not seen")
	}
	time.Sleep(2 * dirRacyMargin)
	list("d/a", "d/b")
	if err := l.Delete(ctx, "d/a"); err != nil {
		t.Fatal(err)
	}
	list("d/b")
	time.Sleep(2 * dirRacyMargin)
	list("d/b")
	put("d/c") // within the same clock tick as nothing else: seen at once
	list("d/b", "d/c")
}

// TestLocalMissingDirectoryListedWithoutOpening: listing a prefix whose
// directory does not exist (a store's WAL directories before its first
// append, read by every get) answers empty from the stat alone, and the
// directory is listed once it exists.
func TestLocalMissingDirectoryListedWithoutOpening(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("directories are stamped on Linux only")
	}
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := dirReads.Load()
	for range 3 {
		keys, _, err := ListKeys(ctx, l, "wal/_shards/")
		if err != nil || len(keys) != 0 {
			t.Fatalf("missing directory: %v %v, want nothing", keys, err)
		}
	}
	if n := dirReads.Load() - before; n != 0 {
		t.Fatalf("a missing directory was read %d times, want 0", n)
	}
	if err := l.Put(ctx, "wal/_shards/a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	keys, _, err := ListKeys(ctx, l, "wal/_shards/")
	if err != nil || !slices.Equal(keys, []string{"wal/_shards/a"}) {
		t.Fatalf("after a put: %v %v", keys, err)
	}
}
