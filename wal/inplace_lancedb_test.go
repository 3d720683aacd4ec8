package wal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// TestLanceDBReadsAGenerationSealedInPlace: the file of a generation
// sealed in place (WAL frames, then the Lance data whose text pages are
// ranges of those frames), made the one fragment of a table, is read by
// LanceDB 0.31 row for row. It needs node and test/interop/node_modules,
// and runs only with LANCE_FILE_LANCEDB=1.
func TestLanceDBReadsAGenerationSealedInPlace(t *testing.T) {
	if os.Getenv("LANCE_FILE_LANCEDB") == "" {
		t.Skip("set LANCE_FILE_LANCEDB=1 (needs node and test/interop/node_modules)")
	}
	ctx := context.Background()
	lfs := &linkFS{FS: vfs.Default}
	o, root := inPlaceOpts(t, lfs)
	w := claim(t, o)
	defer w.Abandon()
	const n = 600
	appendText(t, w, 0, n, 20)
	if err := w.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if lfs.links.Load() != 1 {
		t.Fatalf("%d seals in place, want 1", lfs.links.Load())
	}
	g := w.Manifest().Generations[0]

	// A table whose one fragment is that file.
	dir := t.TempDir()
	local, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ts := objstore.Sub(local, "t.lance")
	ls, err := schema.FromArrow(textSchema, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Create(ctx, ts, ls, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "t.lance", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, filepath.FromSlash(GenerationKey("s1", g))), filepath.Join(dir, "t.lance", "data", "g.lance")); err != nil {
		t.Fatal(err)
	}
	ids := []int32{0, 1, 2} // textSchema is flat: field i is column i
	if _, err := table.Append(ctx, ts, []*pb.DataFragment{{PhysicalRows: uint64(g.Rows), Files: []*pb.DataFile{{
		Path: "g.lance", Fields: ids, ColumnIndices: ids, FileMajorVersion: 2, FileMinorVersion: 0, FileSizeBytes: uint64(g.Bytes),
	}}}}, nil); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "out.arrow")
	script := filepath.Join("..", "lance", "file", "testdata", "lancedb", "read.mjs")
	if b, err := exec.Command("node", script, dir, "t", out).CombinedOutput(); err != nil {
		t.Fatalf("LanceDB: %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	rows := 0
	for r.Next() {
		rec := r.RecordBatch()
		idc := rec.Column(0).(*array.String)
		text := rec.Column(1).(*array.String)
		for i := range idc.Len() {
			var k int
			fmt.Sscanf(idc.Value(i), "id-%d", &k)
			want, ok := textRow(k)
			if text.IsValid(i) != ok || text.Value(i) != want {
				t.Fatalf("LanceDB row %d (%s): %d bytes of text, want %d", rows, idc.Value(i), len(text.Value(i)), len(want))
			}
			rows++
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != n {
		t.Fatalf("LanceDB read %d rows, want %d", rows, n)
	}
}
