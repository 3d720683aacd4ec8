package table

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// cleanupHistory builds a table with eight versions that touch every kind
// of file cleanup owns, and returns each version's expected ids and commit
// time (index 0 unused):
//
//	v1 create · v2 append r0-9 · v3 append r10-19 · v4 delete r0 (deletion
//	file) · v5 index A · v6 compaction (materializes the deletion) · v7
//	index B replaces A · v8 append r20-29
//
// and an orphan data file (a failed commit's) written after v3.
func cleanupHistory(t *testing.T, store objstore.Store) (ids [][]string, at []time.Time) {
	t.Helper()
	ctx := context.Background()
	ids, at = make([][]string, 9), make([]time.Time, 9)
	note := func(d *Dataset) {
		ts := d.Manifest().GetTimestamp()
		at[d.Version()] = time.Unix(ts.GetSeconds(), int64(ts.GetNanos()))
		ids[d.Version()] = scanIDs(t, d, ScanOptions{})
		time.Sleep(2 * time.Millisecond) // distinct commit times
	}
	note(newTable(t, store))
	note(appendRows(t, store, 0, 10))
	d := appendRows(t, store, 10, 20)
	note(d)
	if err := store.Put(ctx, "data/orphan.lance", []byte("a failed commit's file")); err != nil {
		t.Fatal(err)
	}
	d, err := DeleteRows(ctx, store, []RowAddr{{d.Fragments()[0].GetId(), 0}}, "r0")
	if err != nil {
		t.Fatal(err)
	}
	note(d)
	a, b := testIndex(t, 0xa), testIndex(t, 0xb)
	for _, k := range []string{"_indices/" + indexDirName(a) + "/page_lookup.lance", "_indices/" + indexDirName(b) + "/page_lookup.lance"} {
		if err := store.Put(ctx, k, []byte("index")); err != nil {
			t.Fatal(err)
		}
	}
	if d, err = commitIndex(ctx, store, a); err != nil {
		t.Fatal(err)
	}
	note(d)
	res, err := Compact(ctx, store, CompactOptions{TargetRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	note(res.Dataset)
	if d, err = commitIndex(ctx, store, testIndex(t, 0xb, uint32(res.Dataset.Fragments()[0].GetId())), a.GetUuid().GetUuid()); err != nil {
		t.Fatal(err)
	}
	note(d)
	note(appendRows(t, store, 20, 30))
	if want := append(idRange(1, 20), idRange(20, 30)...); !slices.Equal(ids[8], want) {
		t.Fatalf("history: v8 holds %v", ids[8])
	}
	return ids, at
}

// TestCleanupKeepsExactlyWhatItMust: for each policy, the versions kept
// read value for value as before, the removed ones are gone, and what is
// left on storage is exactly the kept versions' files (plus what is not
// cleanup's: tags, the hint, young unreferenced files).
func TestCleanupKeepsExactlyWhatItMust(t *testing.T) {
	type env struct{ at []time.Time }
	cases := []struct {
		name       string
		opts       func(e env) CleanupOptions
		tags       map[string]uint64
		wantKept   []uint64
		wantOrphan bool // the failed commit's file is still there
	}{
		{name: "window keeps every version", opts: func(e env) CleanupOptions { return CleanupOptions{Before: e.at[1]} },
			wantKept: []uint64{1, 2, 3, 4, 5, 6, 7, 8}, wantOrphan: true},
		{name: "zero window keeps the latest", opts: func(env) CleanupOptions { return CleanupOptions{} },
			wantKept: []uint64{8}, wantOrphan: true},
		{name: "window keeps versions committed after it", opts: func(e env) CleanupOptions { return CleanupOptions{Before: e.at[5]} },
			wantKept: []uint64{5, 6, 7, 8}, wantOrphan: true},
		{name: "tags pin versions", opts: func(env) CleanupOptions { return CleanupOptions{} },
			tags: map[string]uint64{"before-delete": 3, "indexed": 5}, wantKept: []uint64{3, 5, 8}, wantOrphan: true},
		{name: "leases and pins hold versions", opts: func(env) CleanupOptions {
			return CleanupOptions{Keep: func(v uint64) bool { return v == 2 || v == 6 }}
		}, wantKept: []uint64{2, 6, 8}, wantOrphan: true},
		{name: "read grace keeps recently superseded versions", opts: func(e env) CleanupOptions {
			now := e.at[8].Add(10 * time.Millisecond)
			return CleanupOptions{Now: func() time.Time { return now }, ReadGrace: now.Sub(e.at[6]) + time.Millisecond}
		}, wantKept: []uint64{5, 6, 7, 8}, wantOrphan: true},
		{name: "delete unverified removes the failed commit's file", opts: func(env) CleanupOptions {
			return CleanupOptions{DeleteUnverified: true}
		}, wantKept: []uint64{8}},
		{name: "a failed commit's file goes after the unverified age", opts: func(env) CleanupOptions {
			later := time.Now().Add(UnverifiedAge + time.Hour)
			return CleanupOptions{Now: func() time.Time { return later }}
		}, wantKept: []uint64{8}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := objstore.NewMemory()
			ids, at := cleanupHistory(t, store)
			for name, v := range tc.tags {
				if _, err := CreateTag(ctx, store, name, v); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Cleanup(ctx, store, tc.opts(env{at}))
			if err != nil {
				t.Fatal(err)
			}
			if res.VersionsRemoved != 8-len(tc.wantKept) || res.VersionsKept != len(tc.wantKept) || res.Latest != 8 {
				t.Fatalf("result %+v, want %d kept", res, len(tc.wantKept))
			}
			checkVersions(t, store, ids, tc.wantKept)
			want := keptFiles(t, store, tc.wantKept)
			if tc.wantOrphan {
				want = append(want, "data/orphan.lance")
			}
			sort.Strings(want)
			if got := cleanupOwned(t, store); !slices.Equal(got, want) {
				t.Fatalf("files left:\n got %v\nwant %v", got, want)
			}
			// A second cleanup with the same policy finds nothing to do.
			again, err := Cleanup(ctx, store, tc.opts(env{at}))
			if err != nil || again.FilesRemoved != 0 {
				t.Fatalf("second cleanup: %+v, %v", again, err)
			}
		})
	}
}

// checkVersions opens every version: kept ones read exactly their rows,
// the others are gone.
func checkVersions(t *testing.T, store objstore.Store, ids [][]string, kept []uint64) {
	t.Helper()
	for v := uint64(1); v <= 8; v++ {
		d, err := Checkout(context.Background(), store, v)
		if !slices.Contains(kept, v) {
			if !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("version %d: want removed, got %v", v, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("kept version %d: %v", v, err)
		}
		if got := scanIDs(t, d, ScanOptions{}); !slices.Equal(got, ids[v]) {
			t.Fatalf("kept version %d reads %v, want %v", v, got, ids[v])
		}
	}
}

// keptFiles lists what the kept versions reference, manifests included.
func keptFiles(t *testing.T, store objstore.Store, kept []uint64) []string {
	t.Helper()
	ref := newReferenced()
	var out []string
	for _, v := range kept {
		d, err := Checkout(context.Background(), store, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.add(d.Manifest(), d.indexSection); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.naming.key(v))
	}
	for k := range ref.files {
		out = append(out, k)
	}
	for u := range ref.indexes {
		out = append(out, "_indices/"+u+"/page_lookup.lance")
	}
	return out
}

// cleanupOwned lists the files in the directories cleanup owns.
func cleanupOwned(t *testing.T, store objstore.Store) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{versionsDir, dataDir, deletionsDir, transactionsDir, indicesDir} {
		infos, err := store.List(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range infos {
			if o.Key != hintKey {
				out = append(out, o.Key)
			}
		}
	}
	sort.Strings(out)
	return out
}

// crashingDeletes fails every Delete after the first n: a process killed
// in the middle of a cleanup. Deletes run concurrently.
type crashingDeletes struct {
	objstore.Store
	n atomic.Int64
}

var errCrash = errors.New("crash")

func (c *crashingDeletes) Delete(ctx context.Context, key string) error {
	if c.n.Add(-1) < 0 {
		return errCrash
	}
	return c.Store.Delete(ctx, key)
}

// TestCleanupCrashAtEveryStep: a cleanup killed after any number of
// deletions leaves the kept versions whole, and the next cleanup removes
// exactly what an uninterrupted one would have.
func TestCleanupCrashAtEveryStep(t *testing.T) {
	ctx := context.Background()
	ref := objstore.NewMemory()
	ids, _ := cleanupHistory(t, ref)
	full, err := Cleanup(ctx, ref, CleanupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < full.FilesRemoved; n++ {
		store := objstore.NewMemory()
		ids, _ = cleanupHistory(t, store)
		crashing := &crashingDeletes{Store: store}
		crashing.n.Store(int64(n))
		_, err := Cleanup(ctx, crashing, CleanupOptions{})
		if !errors.Is(err, errCrash) {
			t.Fatalf("crash after %d deletions: %v", n, err)
		}
		if d, err := Open(ctx, store); err != nil || !slices.Equal(scanIDs(t, d, ScanOptions{}), ids[8]) {
			t.Fatalf("crash after %d deletions: latest unreadable: %v", n, err)
		}
		if _, err := Cleanup(ctx, store, CleanupOptions{}); err != nil {
			t.Fatal(err)
		}
		want := keptFiles(t, store, []uint64{8})
		want = append(want, "data/orphan.lance")
		sort.Strings(want)
		if got := cleanupOwned(t, store); !slices.Equal(got, want) {
			t.Fatalf("crash after %d deletions, then cleanup: left %v, want %v", n, got, want)
		}
	}
}

// TestCleanupKeepsVersionsCommittedDuringIt: a commit that lands while a
// cleanup runs (after it opened the latest) keeps its version and files.
func TestCleanupKeepsVersionsCommittedDuringIt(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	cleanupHistory(t, store)
	committed := false
	_, err := Cleanup(ctx, store, CleanupOptions{Hook: func(step string, keys []string) error {
		if step == "files" && !committed {
			committed = true
			appendRows(t, store, 30, 40)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version() != 9 || len(scanIDs(t, d, ScanOptions{})) != 39 {
		t.Fatalf("version %d after a commit during cleanup", d.Version())
	}
}

// TestTagsInLanceFormat: tags are Lance's JSON files under _refs/tags/,
// validated as Lance validates them, and pin nothing once deleted.
func TestTagsInLanceFormat(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	cleanupHistory(t, store)
	tag, err := CreateTag(ctx, store, "v3-ok", 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Get(ctx, "_refs/tags/v3-ok.json")
	if err != nil || !strings.Contains(string(b), `"version":3`) || !strings.Contains(string(b), `"manifestSize":`) || tag.ManifestSize == 0 {
		t.Fatalf("tag file %s, %v", b, err)
	}
	if _, err := CreateTag(ctx, store, "v3-ok", 4); !errors.Is(err, ErrTagExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := CreateTag(ctx, store, "nine", 99); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("tag of a missing version: %v", err)
	}
	for _, bad := range []string{"", ".x", "x.", "a..b", "a/b", "x.lock", "sp ace"} {
		if _, err := CreateTag(ctx, store, bad, 3); !errors.Is(err, ErrInvalidTag) {
			t.Fatalf("tag %q: %v", bad, err)
		}
	}
	d, err := CheckoutTag(ctx, store, "v3-ok")
	if err != nil || d.Version() != 3 {
		t.Fatalf("checkout by tag: %v", err)
	}
	tags, err := ListTags(ctx, store)
	if err != nil || len(tags) != 1 || tags[0] != *tag {
		t.Fatalf("list: %v %v", tags, err)
	}
	if err := DeleteTag(ctx, store, "v3-ok"); err != nil {
		t.Fatal(err)
	}
	if err := DeleteTag(ctx, store, "v3-ok"); !errors.Is(err, ErrTagNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := Cleanup(ctx, store, CleanupOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Checkout(ctx, store, 3); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("untagged version 3 after cleanup: %v", err)
	}
}

// TestReadGraceProtectsAnOpenedVersion: a reader that opened the latest
// version just before a compaction superseded it reads it whole after a
// cleanup within the read grace; without the grace its files are gone
// (which is what the grace is for).
func TestReadGraceProtectsAnOpenedVersion(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 10)
	opened := appendRows(t, store, 10, 20)
	if _, err := Compact(ctx, store, CompactOptions{TargetRows: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := Cleanup(ctx, store, CleanupOptions{ReadGrace: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got := scanIDs(t, opened, ScanOptions{}); !slices.Equal(got, idRange(0, 20)) {
		t.Fatalf("the opened version reads %v", got)
	}
	if _, err := Cleanup(ctx, store, CleanupOptions{}); err != nil {
		t.Fatal(err)
	}
	// Asked of the store: a Reader this process opened keeps the end of
	// its file (Open's tail), which for these small files is all of it.
	for _, f := range opened.Fragments() {
		for _, df := range f.GetFiles() {
			if _, err := store.Head(ctx, dataDir+df.GetPath()); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("without a grace the superseded version's file %s should be gone: %v", df.GetPath(), err)
			}
		}
	}
}
