package table

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/objstore"
)

// TestProjectionsMemoized: a dataset version builds the schema of a column
// list once, and each list, option and read keeps its own: the columns in
// the order asked, all of them for nil, a row address when asked, none for
// a late scan's nil Columns; past maxProjections lists, reads still answer.
func TestProjectionsMemoized(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	d := appendRows(t, store, 0, 50)
	scanSchema := func(opts ScanOptions) *arrow.Schema {
		t.Helper()
		var s *arrow.Schema
		if err := d.Scan(ctx, opts, func(rec arrow.RecordBatch) error {
			if int(rec.NumCols()) != rec.Schema().NumFields() {
				t.Fatalf("batch of %d columns with schema %s", rec.NumCols(), rec.Schema())
			}
			s = rec.Schema()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			t.Fatalf("scan %+v returned no batch", opts)
		}
		return s
	}
	names := func(s *arrow.Schema) string {
		var out []string
		for i := range s.NumFields() {
			out = append(out, s.Field(i).Name)
		}
		return strings.Join(out, ",")
	}

	a := scanSchema(ScanOptions{Columns: []string{"n", "id"}})
	if got := names(a); got != "n,id" {
		t.Fatalf("columns n,id: schema %s", got)
	}
	if again := scanSchema(ScanOptions{Columns: []string{"n", "id"}}); again != a {
		t.Fatal("the same columns built a second schema")
	}
	if got := names(scanSchema(ScanOptions{Columns: []string{"id", "n"}})); got != "id,n" {
		t.Fatalf("columns id,n: schema %s", got)
	}
	if got := names(scanSchema(ScanOptions{Columns: []string{"n", "id"}, WithRowAddr: true})); got != "n,id,"+RowAddrColumn {
		t.Fatalf("with row addresses: schema %s", got)
	}
	if got, want := names(scanSchema(ScanOptions{})), names(d.Schema().Arrow()); got != want {
		t.Fatalf("all columns: schema %s, want %s", got, want)
	}
	var lateCols []int
	if err := d.ScanLate(ctx, LateScan{Filter: []string{"n"}, Keep: func(rec arrow.RecordBatch) ([]int, error) {
		return []int{0}, nil
	}}, func(rec arrow.RecordBatch) error {
		lateCols = append(lateCols, int(rec.NumCols()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lateCols) == 0 || slices.ContainsFunc(lateCols, func(n int) bool { return n != 0 }) {
		t.Fatalf("late scan without Columns returned batches of %v columns, want none", lateCols)
	}

	// Column names are not separators: "n\x00id" is no column, however
	// the list n, id was keyed.
	if err := d.Scan(ctx, ScanOptions{Columns: []string{"n\x00id"}}, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal(`a scan of column "n\x00id" succeeded`)
	}

	// More lists than the memo holds: each still gets its own schema.
	for k := 1; k <= maxProjections+8; k++ {
		cols := slices.Repeat([]string{"id"}, k)
		if got := scanSchema(ScanOptions{Columns: cols}).NumFields(); got != k {
			t.Fatalf("%d columns: schema of %d", k, got)
		}
	}
	if n := len(d.projs.m); n != maxProjections {
		t.Fatalf("memo holds %d projections, want its bound %d", n, maxProjections)
	}
}
