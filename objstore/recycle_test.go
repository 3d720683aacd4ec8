package objstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func (l *Local) spareCount(dir string) int {
	l.spares.mu.Lock()
	defer l.spares.mu.Unlock()
	return len(l.spares.byDir[filepath.Join(l.root, dir)])
}

// TestLocalRecycle: a recycled object is gone at once, its file is never
// listed, and the next put-if-absent in its directory overwrites it with
// exactly the new bytes, whether shorter or longer.
func TestLocalRecycle(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := Sub(l, "ds")
	long := bytes.Repeat([]byte("L"), 10000)
	for _, k := range []string{"w/1", "w/2"} {
		if err := sub.PutIfAbsent(ctx, k, long); err != nil {
			t.Fatal(err)
		}
	}
	if err := Recycle(ctx, sub, "w/1"); err != nil {
		t.Fatal(err)
	}
	if err := Recycle(ctx, sub, "w/absent"); err != nil {
		t.Fatalf("recycling a missing key: %v", err)
	}
	if _, err := sub.Get(ctx, "w/1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("recycled key still readable: %v", err)
	}
	if objs, _ := sub.List(ctx, "w/"); len(objs) != 1 || objs[0].Key != "w/2" {
		t.Fatalf("list %v", objs)
	}
	if n := l.spareCount("ds/w"); n != 1 {
		t.Fatalf("%d spares, want 1", n)
	}
	short := []byte("short")
	if err := sub.PutIfAbsent(ctx, "w/3", short); err != nil {
		t.Fatal(err)
	}
	if n := l.spareCount("ds/w"); n != 0 {
		t.Fatalf("the put did not reuse the spare (%d left)", n)
	}
	if got, _ := sub.Get(ctx, "w/3"); !bytes.Equal(got, short) {
		t.Fatalf("reused file holds %d bytes, want %q", len(got), short)
	}
	if err := Recycle(ctx, sub, "w/3"); err != nil {
		t.Fatal(err)
	}
	if err := sub.PutIfAbsent(ctx, "w/4", long); err != nil {
		t.Fatal(err)
	}
	if got, _ := sub.Get(ctx, "w/4"); !bytes.Equal(got, long) {
		t.Fatalf("reused file holds %d bytes, want %d", len(got), len(long))
	}
	if got, _ := sub.Get(ctx, "w/2"); !bytes.Equal(got, long) {
		t.Fatal("an unrelated object changed")
	}
	// Put-if-absent still refuses an existing name when a spare exists.
	if err := Recycle(ctx, sub, "w/4"); err != nil {
		t.Fatal(err)
	}
	if err := sub.PutIfAbsent(ctx, "w/2", short); !errors.Is(err, ErrExists) {
		t.Fatalf("put over an existing name: %v", err)
	}
	if got, _ := sub.Get(ctx, "w/2"); !bytes.Equal(got, long) {
		t.Fatal("a refused put changed the object")
	}
	// No temporary file is left but the spare kept for reuse.
	ents, _ := os.ReadDir(filepath.Join(l.Root(), "ds", "w"))
	tmps := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			tmps++
		}
	}
	if tmps != l.spareCount("ds/w") {
		t.Fatalf("%d temporary files, %d spares", tmps, l.spareCount("ds/w"))
	}
}

// TestLocalRecycleBounded: past the per-directory bound, recycling deletes.
func TestLocalRecycleBounded(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { maxSparesPerDir = n }(maxSparesPerDir)
	maxSparesPerDir = 8
	var keys []string
	for i := range maxSparesPerDir + 5 {
		k := "w/" + strconv.Itoa(i)
		if err := l.PutIfAbsent(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		if err := l.Recycle(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.spareCount("w"); n != maxSparesPerDir {
		t.Fatalf("%d spares, want the bound %d", n, maxSparesPerDir)
	}
	ents, _ := os.ReadDir(filepath.Join(l.Root(), "w"))
	if len(ents) != maxSparesPerDir {
		t.Fatalf("%d files in the directory, want only the %d spares", len(ents), maxSparesPerDir)
	}
	for _, e := range ents {
		if fi, err := e.Info(); err != nil || fi.Size() != 0 {
			t.Fatalf("spare %s: %v, %d bytes (spares must hold no data)", e.Name(), err, fi.Size())
		}
	}
}

// TestLocalSweepSpares: spare files a dead process left are deleted, the
// store's own are kept and still reused.
func TestLocalSweepSpares(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dead, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"w/1", "w/2"} {
		if err := dead.PutIfAbsent(ctx, k, []byte("old")); err != nil {
			t.Fatal(err)
		}
		if err := dead.Recycle(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// The dead process's spares were last modified before the next opens.
	old := time.Now().Add(-time.Hour)
	ents, _ := os.ReadDir(filepath.Join(dir, "w"))
	for _, e := range ents {
		if err := os.Chtimes(filepath.Join(dir, "w", e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutIfAbsent(ctx, "w/3", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := l.Recycle(ctx, "w/3"); err != nil {
		t.Fatal(err)
	}
	if err := l.SweepSpares(ctx, "w/x"); err != nil {
		t.Fatal(err)
	}
	ents, _ = os.ReadDir(filepath.Join(dir, "w"))
	if len(ents) != 1 || l.spareCount("w") != 1 {
		t.Fatalf("%d files left (want only this store's spare), %d spares held", len(ents), l.spareCount("w"))
	}
	if err := l.PutIfAbsent(ctx, "w/4", []byte("reused")); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Get(ctx, "w/4"); string(got) != "reused" || l.spareCount("w") != 0 {
		t.Fatalf("got %q, %d spares", got, l.spareCount("w"))
	}
}

// TestLocalDiscard: Discard deletes an object (not synced) and never a
// directory, like Delete.
func TestLocalDiscard(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := Sub(l, "ds")
	for _, k := range []string{"a/1", "a/2/x"} {
		if err := sub.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a/1", "a/2", "a/missing"} {
		if err := Discard(ctx, sub, k); err != nil {
			t.Fatalf("discard %s: %v", k, err)
		}
	}
	if _, err := sub.Get(ctx, "a/1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("discarded object still readable: %v", err)
	}
	if got, err := sub.Get(ctx, "a/2/x"); err != nil || string(got) != "v" {
		t.Fatalf("discarding a directory's name touched it: %q %v", got, err)
	}
	if err := Discard(ctx, NewMemory(), "k"); err != nil {
		t.Fatalf("a store without Discard deletes: %v", err)
	}
}
