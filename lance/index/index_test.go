package index

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

var testArrow = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "grp", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// rows makes ids "k{i}" (zero-padded so pages interleave), grp "g{i%7}"
// with every 11th null.
func rows(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrow)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("k%07d", (i*7919)%1000003))
		if i%11 == 0 {
			b.Field(1).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("g%d", i%7))
		}
		b.Field(2).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

func newStore(t testing.TB) objstore.Store {
	st, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := schema.FromArrow(testArrow, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Create(ctx, st, s, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return st
}

func appendRows(t *testing.T, st objstore.Store, from, to int) {
	t.Helper()
	ctx := context.Background()
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	rec := rows(from, to)
	defer rec.Release()
	frag, err := table.WriteFragment(ctx, st, d.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Append(ctx, st, []*pb.DataFragment{frag}, nil); err != nil {
		t.Fatal(err)
	}
}

// lookup returns the n values of rows matching column = v, via opts.
func lookup(t *testing.T, d *table.Dataset, column string, vals []string, f table.RowFinder) []int64 {
	t.Helper()
	set := map[string]struct{}{}
	for _, v := range vals {
		set[v] = struct{}{}
	}
	var out []int64
	err := d.Scan(context.Background(), table.ScanOptions{Columns: []string{"n"}, In: []table.In{{Column: column, Values: set}}, Index: f}, func(b arrow.RecordBatch) error {
		n := b.Column(0).(*array.Int64)
		for i := 0; i < n.Len(); i++ {
			out = append(out, n.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// countingFinder records whether the index answered.
type countingFinder struct {
	*Finder
	covered int
}

func (c *countingFinder) Find(ctx context.Context, d *table.Dataset, column string, values []string) (*roaring.Bitmap, map[uint64][]uint32, error) {
	cov, rows, err := c.Finder.Find(ctx, d, column, values)
	if cov != nil {
		c.covered += int(cov.GetCardinality())
	}
	return cov, rows, err
}

func checkAgree(t *testing.T, st objstore.Store, what string, probes []string, column string) *countingFinder {
	t.Helper()
	d, err := table.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	f := &countingFinder{Finder: NewFinder(1 << 20)}
	for _, p := range probes {
		got := lookup(t, d, column, []string{p}, f)
		want := lookup(t, d, column, []string{p}, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %s = %q: index gives %v, scan gives %v", what, column, p, got, want)
		}
	}
	got := lookup(t, d, column, probes, f)
	want := lookup(t, d, column, probes, nil)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %s IN %v: index gives %d rows, scan gives %d", what, column, probes, len(got), len(want))
	}
	return f
}

func probes(ns ...int) []string {
	var out []string
	for _, i := range ns {
		out = append(out, fmt.Sprintf("k%07d", (i*7919)%1000003))
	}
	return append(out, "k-missing", "", "zzz")
}

func TestBuildFindAgreesWithScan(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 9000)
	appendRows(t, st, 9000, 15000)
	// Tiny runs force several spills and a k-way merge.
	res, err := Update(ctx, st, "id", BuildOptions{RunBytes: 64 << 10, BatchSize: 512})
	if err != nil || !res.Built {
		t.Fatalf("update: %+v %v", res, err)
	}
	f := checkAgree(t, st, "built", probes(0, 1, 511, 512, 8999, 9000, 14999), "id")
	if f.covered == 0 {
		t.Fatal("the index was not used")
	}
	if _, err := Update(ctx, st, "grp", BuildOptions{BatchSize: 100}); err != nil {
		t.Fatal(err)
	}
	checkAgree(t, st, "grp", []string{"g0", "g3", "g6", "g7"}, "grp")

	// A new fragment is scanned until the index covers it; then merged in.
	appendRows(t, st, 15000, 16000)
	checkAgree(t, st, "appended", probes(15000, 15999, 3), "id")
	res, err = Update(ctx, st, "id", BuildOptions{BatchSize: 512})
	if err != nil || !res.Built || res.NewRows != 1000 || res.Replaced != 1 {
		t.Fatalf("delta update: %+v %v", res, err)
	}
	checkAgree(t, st, "updated", probes(15000, 15999, 3), "id")
	if res, err = Update(ctx, st, "id", BuildOptions{}); err != nil || res.Built {
		t.Fatalf("no-op update built: %+v %v", res, err)
	}

	// Deletions are honoured at read time.
	d, _ := table.Open(ctx, st)
	if _, err := table.DeleteRows(ctx, st, []table.RowAddr{{Fragment: d.Fragments()[0].GetId(), Offset: 1}}, "n = 1"); err != nil {
		t.Fatal(err)
	}
	checkAgree(t, st, "deleted", probes(1, 2), "id")

	// Compaction rewrites fragments: the index stops claiming them, reads
	// scan them, and an update covers them again.
	if _, err := table.Compact(ctx, st, table.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	checkAgree(t, st, "compacted", probes(1, 2, 15000), "id")
	if res, err = Update(ctx, st, "id", BuildOptions{BatchSize: 512}); err != nil || !res.Built {
		t.Fatalf("update after compaction: %+v %v", res, err)
	}
	f = checkAgree(t, st, "recovered", probes(1, 2, 15000), "id")
	if f.covered == 0 {
		t.Fatal("the index was not used after compaction")
	}
}

// TestDeltaSegmentsFoldIntoOne: delta updates add segments up to
// MaxSegments; then the small ones are folded into the new segment while
// the largest stays untouched; a full update consolidates into one.
func TestDeltaSegmentsFoldIntoOne(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 8000)
	first, err := Update(ctx, st, "id", BuildOptions{Delta: true, BatchSize: 256})
	if err != nil || !first.Built || first.NewRows != 8000 {
		t.Fatalf("first build: %+v %v", first, err)
	}
	for k := 0; k < 6; k++ {
		appendRows(t, st, 8000+k*100, 8100+k*100)
		res, err := Update(ctx, st, "id", BuildOptions{Delta: true, MaxSegments: 3, BatchSize: 256})
		if err != nil || !res.Built {
			t.Fatalf("delta %d: %+v %v", k, res, err)
		}
		d, _ := table.Open(ctx, st)
		segs, _ := BTreeIndexes(d, "id")
		if len(segs) > 3 {
			t.Fatalf("delta %d: %d segments, cap 3", k, len(segs))
		}
		found := false
		for _, m := range segs {
			found = found || UUID(m) == first.Index
		}
		if !found {
			t.Fatalf("delta %d rewrote the largest segment", k)
		}
		if res.NewRows != 100 {
			t.Fatalf("delta %d read %d rows of the table, want only the 100 new ones", k, res.NewRows)
		}
		checkAgree(t, st, fmt.Sprintf("delta %d", k), probes(0, 7999, 8000+k*100, 8099+k*100), "id")
	}
	res, err := Update(ctx, st, "id", BuildOptions{})
	if err != nil || !res.Built || res.NewRows != 0 || res.Replaced != 3 {
		t.Fatalf("consolidation: %+v %v", res, err)
	}
	f := checkAgree(t, st, "consolidated", probes(0, 7999, 8000, 8599), "id")
	if f.covered == 0 {
		t.Fatal("the consolidated index was not used")
	}
}

// TestAscendEachWalksTheLargestSegmentFirst: a walk over segments one
// after another starts with the largest, so that a caller keeping the k
// smallest values (a filtered page) walks the small delta segments only
// below the bound the large one set, not k matches deep in each.
func TestAscendEachWalksTheLargestSegmentFirst(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	appendRows(t, st, 0, 500) // the oldest segment is the small one
	if _, err := Update(ctx, st, "id", BuildOptions{Delta: true}); err != nil {
		t.Fatal(err)
	}
	appendRows(t, st, 500, 8500)
	if _, err := Update(ctx, st, "id", BuildOptions{Delta: true}); err != nil {
		t.Fatal(err)
	}
	d, err := table.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if segs, _ := BTreeIndexes(d, "id"); len(segs) != 2 {
		t.Fatalf("%d segments, want 2", len(segs))
	}
	small := uint64(d.Fragments()[0].GetId())
	// Every row is kept; the walk of each segment stops at its first entry.
	var all []uint64
	for _, f := range d.Fragments() {
		for o := range f.GetPhysicalRows() {
			all = append(all, f.GetId()<<32|o)
		}
	}
	var firsts []uint64
	f := NewFinder(0)
	if _, err := f.AscendEach(ctx, d, "id", "", NewAddrSet(all), func(v string, addr uint64) bool {
		firsts = append(firsts, addr>>32)
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if len(firsts) != 2 || firsts[0] == small || firsts[1] != small {
		t.Fatalf("segments walked from fragments %v; want the large one's first, then the small one's (fragment %d)", firsts, small)
	}
}
