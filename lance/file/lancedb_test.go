package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// TestLanceDBFiles decodes data files that LanceDB 0.31 wrote (format 2.0;
// testdata/lancedb/gen.mjs) and compares every column, whole and in row
// ranges, with what LanceDB itself reads back from them.
func TestLanceDBFiles(t *testing.T) {
	for _, name := range []string{"types", "pages"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "lancedb", name+".lance"))
			if err != nil {
				t.Fatal(err)
			}
			r, _ := openBytes(t, b)
			if major, minor := r.Version(); major != 0 || minor != 3 {
				t.Fatalf("version %d.%d", major, minor)
			}
			f, err := os.Open(filepath.Join("testdata", "lancedb", name+".arrow"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ir, err := ipc.NewFileReader(f)
			if err != nil {
				t.Fatal(err)
			}
			var recs []arrow.RecordBatch
			for i := range ir.NumRecords() {
				rec, err := ir.Record(i)
				if err != nil {
					t.Fatal(err)
				}
				rec.Retain()
				recs = append(recs, rec)
			}
			if len(r.Schema().Fields) != ir.Schema().NumFields() {
				t.Fatalf("%d fields, LanceDB returned %d", len(r.Schema().Fields), ir.Schema().NumFields())
			}
			n := r.NumRows()
			for i, fld := range r.Schema().Fields {
				want := structNoNulls(t, concatColumn(t, recs, i))
				t.Run(fld.Name, func(t *testing.T) {
					t.Logf("%d pages", len(r.top[fld.ID].col.pages))
					checkRanges(t, r, fld.ID, want, [][2]int64{{0, n}, {0, 1}, {n - 1, n}, {n / 3, 2 * n / 3}, {101, 102}})
				})
			}
		})
	}
}
