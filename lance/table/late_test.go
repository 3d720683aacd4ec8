package table

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
