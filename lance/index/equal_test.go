package index

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
)

// TestEqualOnlyPagesFromRowIDs: a value that fills whole pages is answered
// from those pages' row ids alone (read in one range, cached apart from
// full pages); the addresses agree with a scan whether the pages come
// cold, from the ids-only cache, from full cached pages, or mixed.
func TestEqualOnlyPagesFromRowIDs(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 3000)
	appendRows(t, st, 3000, 5000)
	if _, err := Update(ctx, st, "grp", BuildOptions{BatchSize: 16}); err != nil {
		t.Fatal(err)
	}
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]uint64{}
	err = d.Scan(ctx, table.ScanOptions{Columns: []string{"grp"}, WithRowAddr: true}, func(b arrow.RecordBatch) error {
		g, a := b.Column(0).(*array.String), b.Column(1).(*array.Uint64)
		for i := 0; i < g.Len(); i++ {
			if !g.IsNull(i) {
				want[g.Value(i)] = append(want[g.Value(i)], a.Value(i))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range want {
		slices.Sort(v)
	}
	for _, cacheBytes := range []int64{1 << 20, 2048} { // all cached; most evicted
		f := NewFinder(cacheBytes)
		for round := range 3 {
			if round == 2 {
				// Full pages cached in between: the run mixes both kinds.
				idxs, _ := BTreeIndexes(d, "grp")
				tr, err := f.tree(ctx, st, uuidString(idxs[0]))
				if err != nil {
					t.Fatal(err)
				}
				for p := 0; p < len(tr.maxs); p += 3 {
					if _, err := tr.readPage(ctx, p); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, v := range []string{"g0", "g3", "g6", "g7"} {
				cov, got, err := f.Addrs(ctx, d, "grp", v)
				if err != nil || cov == nil {
					t.Fatalf("addrs %s: %v %v", v, cov, err)
				}
				if !slices.Equal(got, want[v]) {
					t.Fatalf("cache %d round %d: %s: index gives %d rows, scan %d", cacheBytes, round, v, len(got), len(want[v]))
				}
			}
		}
		idsOnly := 0
		for k := range f.cache.m {
			if k.idsOnly {
				idsOnly++
			}
		}
		if cacheBytes == 1<<20 && idsOnly == 0 {
			t.Fatal("no page was answered from its row ids alone")
		}
	}
}

// TestPrefetchInChunks: a lookup of many keys prefetches their pages in
// chunks of one ReadRanges each (more pages than one chunk here) and finds
// what a scan finds, with a cache that holds them all or few of them.
func TestPrefetchInChunks(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 5000)
	if _, err := Update(ctx, st, "id", BuildOptions{BatchSize: 8}); err != nil {
		t.Fatal(err)
	}
	var ns []int
	for i := 0; i < 5000; i += 7 {
		ns = append(ns, i)
	}
	ps := probes(ns...)
	for _, cacheBytes := range []int64{8 << 20, 4096} {
		d, err := table.Open(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		f := NewFinder(cacheBytes)
		got := lookup(t, d, "id", ps, f)
		want := lookup(t, d, "id", ps, nil)
		if len(want) != len(ns) || !slices.Equal(got, want) {
			t.Fatalf("cache %d: index gives %d rows, scan %d (want %d)", cacheBytes, len(got), len(want), len(ns))
		}
		if cacheBytes == 8<<20 && len(f.cache.m) < 2*prefetchChunk {
			t.Fatalf("%d pages cached, want more than two chunks", len(f.cache.m))
		}
	}
}
