package table

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/objstore"
)

// TestScanLateMatchesScan checks a late scan returns exactly the rows and
// columns a full scan filtered afterwards returns: scattered and
// contiguous kept rows, several batches per fragment, deleted rows.
func TestScanLateMatchesScan(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 100)
	appendRows(t, store, 100, 200)
	d := appendRows(t, store, 200, 300)
	f1 := d.Fragments()[1].GetId()
	d, err := DeleteRows(ctx, store, []RowAddr{{f1, 0}, {f1, 7}, {f1, 50}, {f1, 51}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	kept := func(n int64) bool { return n%7 == 0 || (n >= 140 && n < 190) || n == 299 }
	rowsOf := func(rec arrow.RecordBatch) []string {
		var out []string
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%s/%s/%d", rec.Column(0).(*array.String).Value(i),
				rec.Column(1).(*array.String).Value(i), rec.Column(2).(*array.Int64).Value(i)))
		}
		return out
	}
	var want []string
	if err := d.Scan(ctx, ScanOptions{Columns: []string{"id", "group", "n"}}, func(rec arrow.RecordBatch) error {
		for i, r := range rowsOf(rec) {
			if kept(rec.Column(2).(*array.Int64).Value(i)) {
				want = append(want, r)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	seen := 0
	err = d.ScanLate(ctx, LateScan{
		Filter: []string{"n"}, Columns: []string{"id", "group", "n"}, BatchRows: 16,
		Keep: func(rec arrow.RecordBatch) ([]int, error) {
			seen += int(rec.NumRows())
			var idx []int
			c := rec.Column(0).(*array.Int64)
			for i := 0; i < c.Len(); i++ {
				if kept(c.Value(i)) {
					idx = append(idx, i)
				}
			}
			return idx, nil
		},
	}, func(rec arrow.RecordBatch) error {
		got = append(got, rowsOf(rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 296 {
		t.Fatalf("Keep saw %d rows, want the 296 live ones", seen)
	}
	if !slices.Equal(got, want) || len(want) < 60 {
		t.Fatalf("late scan rows:\n got %v\nwant %v", got, want)
	}
	// Keep's error ends the scan; out-of-order indices are refused.
	boom := fmt.Errorf("boom")
	if err := d.ScanLate(ctx, LateScan{Filter: []string{"n"}, Columns: []string{"id"},
		Keep: func(arrow.RecordBatch) ([]int, error) { return nil, boom }}, func(arrow.RecordBatch) error { return nil }); err != boom {
		t.Fatalf("Keep error: got %v", err)
	}
	if err := d.ScanLate(ctx, LateScan{Filter: []string{"n"}, Columns: []string{"id"},
		Keep: func(arrow.RecordBatch) ([]int, error) { return []int{3, 1}, nil }}, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal("unordered Keep result: no error")
	}
}

// TestScanLateFragmentsAndRowAddrs: a late scan limited to some fragments
// reads only those, and with WithRowAddr both the batches Keep sees and
// the rows returned carry the addresses a full scan gives them.
func TestScanLateFragmentsAndRowAddrs(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 100)
	d := appendRows(t, store, 100, 200)
	f1 := d.Fragments()[1].GetId()
	d, err := DeleteRows(ctx, store, []RowAddr{{f1, 3}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]uint64{} // n -> address, fragment f1 only
	if err := d.Scan(ctx, ScanOptions{Columns: []string{"n"}, WithRowAddr: true}, func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			if a := rec.Column(1).(*array.Uint64).Value(i); a>>32 == f1 {
				want[rec.Column(0).(*array.Int64).Value(i)] = a
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	only := roaring.New()
	only.Add(uint32(f1))
	seen := 0
	got := map[int64]uint64{}
	err = d.ScanLate(ctx, LateScan{
		Filter: []string{"n"}, Columns: []string{"id", "n"}, BatchRows: 16, Fragments: only, WithRowAddr: true,
		Keep: func(rec arrow.RecordBatch) ([]int, error) {
			var idx []int
			for i := 0; i < int(rec.NumRows()); i++ {
				n, a := rec.Column(0).(*array.Int64).Value(i), rec.Column(1).(*array.Uint64).Value(i)
				if want[n] != a {
					return nil, fmt.Errorf("Keep sees row n=%d at address %x, want %x", n, a, want[n])
				}
				seen++
				if n%2 == 0 {
					idx = append(idx, i)
				}
			}
			return idx, nil
		},
	}, func(rec arrow.RecordBatch) error {
		if rec.Schema().Field(2).Name != RowAddrColumn {
			return fmt.Errorf("returned columns %v", rec.Schema())
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			got[rec.Column(1).(*array.Int64).Value(i)] = rec.Column(2).(*array.Uint64).Value(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(want) || len(want) != 99 {
		t.Fatalf("Keep saw %d rows, want the %d live rows of fragment %d", seen, len(want), f1)
	}
	for n, a := range want {
		if g, ok := got[n]; ok != (n%2 == 0) || (ok && g != a) {
			t.Fatalf("row n=%d: returned %v at %x, want address %x kept only when even", n, ok, g, a)
		}
	}
}
