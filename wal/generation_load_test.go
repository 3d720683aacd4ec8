package wal

import (
	"context"
	"testing"

	"github.com/lance-context/lance-context/internal/lru"
	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/vfs"
)

// TestLoadGenerationKeepsNoOffsets: LoadGeneration reads a generation's
// rows once (a merge, the generation cache), so the offsets it reads are
// not put in the process's shared cache, where they pushed out those of
// the point reads (each merge pass put a few MB there).
func TestLoadGenerationKeepsNoOffsets(t *testing.T) {
	ctx := context.Background()
	o, _ := inPlaceOpts(t, vfs.Default)
	o.Log.Objects = false
	w := claim(t, o)
	defer w.Abandon()
	appendText(t, w, 0, 3000, 100)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	g := w.Manifest().Generations[0]
	for _, whole := range []bool{false, true} {
		if err := file.WaitPrefetches(ctx); err != nil {
			t.Fatal(err)
		}
		k0, b0 := lru.Shared().Stats()
		lg, err := LoadGeneration(ctx, o.Store, GenRef{Shard: o.Shard, Gen: g}, ReadOptions{KeyColumn: "id", Whole: whole})
		if err != nil {
			t.Fatal(err)
		}
		if lg.NumRows() != 3000 {
			t.Fatalf("%d rows, want 3000", lg.NumRows())
		}
		lg.Rec.Release()
		if err := file.WaitPrefetches(ctx); err != nil {
			t.Fatal(err)
		}
		if k, b := lru.Shared().Stats(); k != k0 || b != b0 {
			t.Errorf("whole=%v: the shared cache went from %d entries (%d bytes) to %d (%d)", whole, k0, b0, k, b)
		}
	}
	// A point read through the shared IO caches offsets (so the checks
	// prove something); through OpenGeneration, which reads a generation
	// for a read's rows and drops it, it does not.
	pointRead := func(r *file.Reader) (before, after int) {
		t.Helper()
		k0, _ := lru.Shared().Stats()
		rec, err := r.Read(ctx, []int32{0, 1}, 1500, 1501)
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if err := file.WaitPrefetches(ctx); err != nil {
			t.Fatal(err)
		}
		k, _ := lru.Shared().Stats()
		return k0, k
	}
	shared, err := openGeneration(ctx, file.DefaultIO(), o.Store, o.Shard, g, false)
	if err != nil {
		t.Fatal(err)
	}
	if k0, k := pointRead(shared); k <= k0 {
		t.Errorf("a point read through the shared IO cached nothing (%d entries before, %d after): the checks prove nothing", k0, k)
	}
	r, err := OpenGeneration(ctx, o.Store, o.Shard, g)
	if err != nil {
		t.Fatal(err)
	}
	if k0, k := pointRead(r); k != k0 {
		t.Errorf("a point read through OpenGeneration went from %d shared cache entries to %d", k0, k)
	}
}
