package file

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

// TestLanceDBReadsOurFiles wraps a file from this package's writer in a
// minimal one-fragment table (a hand-written manifest) and has LanceDB 0.31
// scan it; every column must come back equal. It needs node and
// test/interop/node_modules, and runs only with LANCE_FILE_LANCEDB=1.
func TestLanceDBReadsOurFiles(t *testing.T) {
	if os.Getenv("LANCE_FILE_LANCEDB") == "" {
		t.Skip("set LANCE_FILE_LANCEDB=1 (needs node and test/interop/node_modules)")
	}
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	var skipInFilter []string
	for _, tc := range roundTripTypes {
		if tc.dt.ID() == arrow.LARGE_LIST {
			continue // apache-arrow (JS) cannot read large_list
		}
		if strings.HasPrefix(tc.name, "list_struct") {
			// LanceDB's own take path panics on list<struct> with 2+ members.
			skipInFilter = append(skipInFilter, tc.name)
		}
		fields = append(fields, arrow.Field{Name: tc.name, Type: tc.dt, Nullable: true})
	}
	as := arrow.NewSchema(fields, nil)
	// The third file is written as a seal in place writes a generation:
	// after bytes already in the file (a WAL segment's frames), with the
	// values of some binary pages referenced there, not written.
	for v, pageBytes := range []int{4 << 10, 0, 0} {
		placed := v == 2
		g := &gen{rng: rand.New(rand.NewPCG(1, 2)), nullP: 0.2}
		var recs []arrow.RecordBatch
		for k, n := range []int{1000, 500, 2000} {
			rec := g.record(as, n)
			cols := append([]arrow.Array(nil), rec.Columns()...)
			ids := array.NewInt64Builder(mem)
			for i := range n {
				ids.Append(int64(k*100000 + i))
			}
			cols[0] = ids.NewArray()
			cols[3] = allNull(cols[3].DataType(), n) // one all-null column
			if k == 1 {                              // text and binary columns of all-null pages
				for c, f := range as.Fields() {
					switch f.Type.ID() {
					case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
						cols[c] = allNull(f.Type, n)
					}
				}
			}
			recs = append(recs, array.NewRecordBatch(as, cols, int64(n)))
		}
		// The default page size is written as a seal writes a generation
		// (values held, not copied), the small one as every other writer.
		var data []byte
		var info Info
		if placed {
			data, info = writePlacedFile(t, as, recs)
		} else {
			data, info = writeFile(t, as, WriterOptions{PageBytes: pageBytes, HoldValues: pageBytes == 0}, recs...)
		}

		dir := t.TempDir()
		tbl := filepath.Join(dir, "t.lance")
		for _, d := range []string{"data", "_versions"} {
			if err := os.MkdirAll(filepath.Join(tbl, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(tbl, "data", "f0.lance"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := schema.FromArrow(as, 0)
		if err != nil {
			t.Fatal(err)
		}
		var maxFragment uint32
		m := &pb.Manifest{
			Fields: s.Proto(),
			Fragments: []*pb.DataFragment{{PhysicalRows: uint64(info.Rows), Files: []*pb.DataFile{{
				Path: "f0.lance", Fields: info.FieldIDs, ColumnIndices: info.ColumnIndices,
				FileMajorVersion: 2, FileMinorVersion: 0, FileSizeBytes: uint64(info.Size),
			}}}},
			Version:       1,
			MaxFragmentId: &maxFragment,
			WriterVersion: &pb.Manifest_WriterVersion{Library: "lance", Version: "8.0.0"},
			DataFormat:    &pb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.0"},
		}
		mb, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var mf []byte
		mf = binary.LittleEndian.AppendUint32(mf, uint32(len(mb)))
		mf = append(mf, mb...)
		mf = binary.LittleEndian.AppendUint64(mf, 0) // the manifest is at offset 0
		mf = binary.LittleEndian.AppendUint16(mf, 0)
		mf = binary.LittleEndian.AppendUint16(mf, 2)
		mf = append(mf, "LANC"...)
		if err := os.WriteFile(filepath.Join(tbl, "_versions", "18446744073709551614.manifest"), mf, 0o644); err != nil {
			t.Fatal(err)
		}

		out := filepath.Join(dir, "out.arrow")
		args := append([]string{filepath.Join("testdata", "lancedb", "read.mjs"), dir, "t", out}, skipInFilter...)
		o, err := exec.Command("node", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("LanceDB: %v\n%s", err, o)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		ir, err := ipc.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var got []arrow.RecordBatch
		for ir.Next() {
			r := ir.RecordBatch()
			r.Retain()
			got = append(got, r)
		}
		if err := ir.Err(); err != nil {
			t.Fatal(err)
		}
		ir.Release()
		f.Close()
		for i, fld := range as.Fields() {
			want := structNoNulls(t, concatColumn(t, recs, i))
			assertEqualArrays(t, fld.Name, want, concatColumn(t, got, i))
		}
		t.Logf("pages %d, placed %v: LanceDB read %d columns x %d rows back: %s", pageBytes, placed, len(fields), info.Rows, strings.TrimSpace(string(o)))
	}
}

// writePlacedFile writes recs after a prefix that holds the value bytes of
// the binary columns of every other batch (between junk), which the file's
// pages reference (WriterOptions.Placed), and returns the whole file.
func writePlacedFile(t *testing.T, as *arrow.Schema, recs []arrow.RecordBatch) ([]byte, Info) {
	t.Helper()
	prefix := []byte("frames the pages never read")
	at := map[arrow.Array]int64{}
	for k, r := range recs {
		if k%2 == 1 {
			continue
		}
		for _, c := range r.Columns() {
			if v, ok := c.(interface{ ValueBytes() []byte }); ok && c.DataType().ID() != arrow.FIXED_SIZE_BINARY {
				at[c] = int64(len(prefix))
				prefix = append(prefix, v.ValueBytes()...)
				prefix = append(prefix, "junk"...)
			}
		}
	}
	if len(at) == 0 {
		t.Fatal("no binary column to place")
	}
	return writeFileAfter(t, as, prefix, at, recs...)
}

// TestCompareLanceDBScan times a full scan of the rollout benchmark data by
// LanceDB 0.31 (its own 2.0 file, through node) and by this package (our
// file, from disk through os.File.ReadAt). Informational; it runs only
// with LANCE_FILE_LANCEDB=1.
func TestCompareLanceDBScan(t *testing.T) {
	if os.Getenv("LANCE_FILE_LANCEDB") == "" {
		t.Skip("set LANCE_FILE_LANCEDB=1 (needs node and test/interop/node_modules)")
	}
	recs, raw := rolloutBatches()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.arrow")
	fw, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	iw, err := ipc.NewFileWriter(fw, ipc.WithSchema(rolloutSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := iw.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := iw.Close(); err != nil {
		t.Fatal(err)
	}
	fw.Close()
	o, err := exec.Command("node", filepath.Join("testdata", "lancedb", "scan.mjs"), filepath.Join(dir, "db"), in, strconv.Itoa(benchRows)).Output()
	if err != nil {
		t.Fatalf("LanceDB: %v\n%s", err, o)
	}
	var ldb struct{ ToArrowMs, StreamMs float64 }
	if err := json.Unmarshal(o, &ldb); err != nil {
		t.Fatalf("%v: %s", err, o)
	}

	data, _ := writeFile(t, rolloutSchema, WriterOptions{}, recs...)
	p := filepath.Join(dir, "ours.lance")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	scan := func() {
		r, err := Open(context.Background(), osFileSource{f}, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, fld := range r.Schema().Fields {
			ids = append(ids, fld.ID)
		}
		rec, err := r.Read(context.Background(), ids, 0, r.NumRows())
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	scan()
	const n = 8
	start := time.Now()
	for range n {
		scan()
	}
	ours := float64(time.Since(start).Microseconds()) / 1000 / n
	mb := float64(raw) / 1e6
	t.Logf("full scan of %d rollout rows (%.0f MB raw): LanceDB %.1f ms (toArrow) / %.1f ms (batch stream) = %.0f / %.0f MB/s; lance/file %.1f ms = %.0f MB/s",
		benchRows, mb, ldb.ToArrowMs, ldb.StreamMs, mb/ldb.ToArrowMs*1000, mb/ldb.StreamMs*1000, ours, mb/ours*1000)
}

// osFileSource reads ranges of a local file.
type osFileSource struct{ f *os.File }

func (s osFileSource) ReadRange(_ context.Context, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil {
		return nil, err
	}
	return b, nil
}

func (s osFileSource) ReadRangeInto(_ context.Context, off int64, dst []byte) error {
	_, err := s.f.ReadAt(dst, off)
	return err
}
