package table

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

var testArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "group", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func testSchema(t testing.TB) *schema.Schema {
	s, err := schema.FromArrow(testArrowSchema, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batch makes rows [from, to) with id "r{i}", group "g{i%3}", flag i%2==0, n=i.
func batch(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testArrowSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("g%d", i%3))
		b.Field(2).(*array.BooleanBuilder).Append(i%2 == 0)
		b.Field(3).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

func newTable(t testing.TB, store objstore.Store) *Dataset {
	t.Helper()
	d, err := Create(context.Background(), store, testSchema(t), CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func appendRows(t testing.TB, store objstore.Store, from, to int) *Dataset {
	t.Helper()
	ctx := context.Background()
	d, err := Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch(from, to)
	defer rec.Release()
	frag, err := WriteFragment(ctx, store, d.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Append(ctx, store, []*pb.DataFragment{frag}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nd
}

func scanIDs(t testing.TB, d *Dataset, opts ScanOptions) []string {
	t.Helper()
	var ids []string
	opts.Columns = []string{"id"}
	err := d.Scan(context.Background(), opts, func(rec arrow.RecordBatch) error {
		c := rec.Column(0).(*array.String)
		for i := 0; i < c.Len(); i++ {
			ids = append(ids, c.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func idRange(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("r%d", i))
	}
	return out
}

func TestCreateAppendScan(t *testing.T) {
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 100)
	d := appendRows(t, store, 100, 250)
	if d.Version() != 3 || len(d.Fragments()) != 2 || d.CountRows() != 250 {
		t.Fatalf("version %d fragments %d rows %d", d.Version(), len(d.Fragments()), d.CountRows())
	}
	if got := scanIDs(t, d, ScanOptions{}); !slices.Equal(got, idRange(0, 250)) {
		t.Fatalf("scan returned %d ids", len(got))
	}
	// Offset and limit cross the fragment boundary; small batches cross chunks.
	if got := scanIDs(t, d, ScanOptions{Offset: 95, Limit: 10, BatchRows: 7}); !slices.Equal(got, idRange(95, 105)) {
		t.Fatalf("offset/limit: %v", got)
	}
	// Filters apply before offset and limit.
	got := scanIDs(t, d, ScanOptions{Where: []Eq{{"group", "g1"}, {"flag", true}}, Offset: 2, Limit: 3})
	if want := []string{"r16", "r22", "r28"}; !slices.Equal(got, want) {
		t.Fatalf("filtered page = %v, want %v", got, want)
	}
	if err := d.Scan(context.Background(), ScanOptions{Where: []Eq{{"n", "1"}}}, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal("filter on an int column should be refused")
	}
	if err := d.Scan(context.Background(), ScanOptions{Where: []Eq{{"flag", "yes"}}}, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal("string value for a bool column should be refused")
	}
	// Reopen from storage sees the same.
	d2, err := Open(context.Background(), store)
	if err != nil || d2.Version() != 3 || d2.CountRows() != 250 {
		t.Fatalf("reopen: %v %v", d2, err)
	}
}

func TestCreateTwiceFails(t *testing.T) {
	store := objstore.NewMemory()
	newTable(t, store)
	if _, err := Create(context.Background(), store, testSchema(t), CreateOptions{}); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
}

func TestTakeAndRowAddr(t *testing.T) {
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 10)
	d := appendRows(t, store, 10, 20)
	var addrs []RowAddr
	err := d.Scan(context.Background(), ScanOptions{Columns: []string{"id"}, WithRowAddr: true, Where: []Eq{{"group", "g2"}}}, func(rec arrow.RecordBatch) error {
		a := rec.Column(1).(*array.Uint64)
		for i := 0; i < a.Len(); i++ {
			addrs = append(addrs, RowAddr{Fragment: a.Value(i) >> 32, Offset: uint32(a.Value(i))})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(addrs)
	rec, err := d.Take(context.Background(), addrs, []string{"id", "n"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var got []int64
	for i := 0; i < int(rec.NumRows()); i++ {
		got = append(got, rec.Column(1).(*array.Int64).Value(i))
	}
	if want := []int64{17, 14, 11, 8, 5, 2}; !slices.Equal(got, want) {
		t.Fatalf("take = %v, want %v", got, want)
	}
}

func TestDeleteRowsAndCompact(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 10)
	appendRows(t, store, 10, 20)
	d := appendRows(t, store, 20, 30)
	f0, f1, f2 := d.Fragments()[0].GetId(), d.Fragments()[1].GetId(), d.Fragments()[2].GetId()
	d, err := DeleteRows(ctx, store, []RowAddr{{f0, 0}, {f0, 9}, {f1, 5}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	// A second delete on the same fragment unions with the first.
	d, err = DeleteRows(ctx, store, []RowAddr{{f0, 1}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	// Deleting every row of a fragment removes it.
	var all []RowAddr
	for i := uint32(0); i < 10; i++ {
		all = append(all, RowAddr{f2, i})
	}
	if d, err = DeleteRows(ctx, store, all, "all of f2"); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(idRange(2, 9), idRange(10, 15), idRange(16, 20))
	if got := scanIDs(t, d, ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after deletes: %v", got)
	}
	if d.CountRows() != int64(len(want)) || len(d.Fragments()) != 2 {
		t.Fatalf("count %d fragments %d", d.CountRows(), len(d.Fragments()))
	}
	if d.Manifest().GetWriterFeatureFlags()&FlagDeletionFiles == 0 {
		t.Fatal("deletion flag not set")
	}
	// Offsets count live rows only.
	if got := scanIDs(t, d, ScanOptions{Offset: 6, Limit: 2}); !slices.Equal(got, []string{"r8", "r10"}) {
		t.Fatalf("offset over deletions: %v", got)
	}
	res, err := Compact(ctx, store, CompactOptions{TargetRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 2 || res.Added != 1 {
		t.Fatalf("compact removed %d added %d", res.Removed, res.Added)
	}
	d = res.Dataset
	if got := scanIDs(t, d, ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after compaction: %v", got)
	}
	if len(d.Fragments()) != 1 || d.Fragments()[0].GetDeletionFile() != nil || d.Manifest().GetWriterFeatureFlags()&FlagDeletionFiles != 0 {
		t.Fatalf("compaction did not materialize deletions: %v", d.Fragments())
	}
	if d.Fragments()[0].GetId() <= f2 {
		t.Fatalf("compacted fragment reused id %d", d.Fragments()[0].GetId())
	}
}

func TestCompactConflictsWithConcurrentDelete(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 10)
	d := appendRows(t, store, 10, 20)
	f0 := d.Fragments()[0].GetId()
	// A delete lands between compaction's read and its commit.
	hooked := &commitHookStore{Store: store, before: func() {
		if _, err := DeleteRows(ctx, store, []RowAddr{{f0, 3}}, "race"); err != nil {
			t.Error(err)
		}
	}}
	if _, err := Compact(ctx, hooked, CompactOptions{TargetRows: 1000}); !errors.Is(err, ErrConflict) {
		t.Fatalf("compact over a concurrent delete: %v, want ErrConflict", err)
	}
	d, _ = Open(ctx, store)
	if got := scanIDs(t, d, ScanOptions{}); len(got) != 19 || slices.Contains(got, "r3") {
		t.Fatalf("rows after conflict: %v", got)
	}
}

// commitHookStore runs before() once, just before the first manifest commit.
type commitHookStore struct {
	objstore.Store
	once   sync.Once
	before func()
}

func (h *commitHookStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	h.once.Do(h.before)
	return h.Store.PutIfAbsent(ctx, key, data)
}

func TestConcurrentAppendsRebase(t *testing.T) {
	store := objstore.NewMemory()
	newTable(t, store)
	const writers, each = 8, 5
	var wg sync.WaitGroup
	versions := make(chan uint64, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				n := (w*each + i) * 10
				versions <- appendRows(t, store, n, n+10).Version()
			}
		}()
	}
	wg.Wait()
	close(versions)
	seen := map[uint64]bool{}
	for v := range versions {
		if seen[v] {
			t.Fatalf("version %d committed twice", v)
		}
		seen[v] = true
	}
	d, err := Open(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	got := scanIDs(t, d, ScanOptions{})
	sort.Strings(got)
	want := idRange(0, writers*each*10)
	sort.Strings(want)
	if !slices.Equal(got, want) || d.Version() != 1+writers*each {
		t.Fatalf("version %d, %d rows, want %d", d.Version(), len(got), len(want))
	}
	ids := map[uint64]bool{}
	for _, f := range d.Fragments() {
		if ids[f.GetId()] {
			t.Fatalf("fragment id %d used twice", f.GetId())
		}
		ids[f.GetId()] = true
	}
}

func TestConfigAndSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 5)
	if _, err := UpdateConfig(ctx, store, map[string]string{"lc.watermark.a": "3", "tmp": "x"}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := UpdateConfig(ctx, store, nil, []string{"tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Config()["lc.watermark.a"] != "3" || d.Config()["tmp"] != "" || d.Manifest().GetWriterFeatureFlags()&FlagTableConfig == 0 {
		t.Fatalf("config %v flags %d", d.Config(), d.Manifest().GetWriterFeatureFlags())
	}
	// Append with config keys: both land in one version.
	rec := batch(5, 6)
	frag, err := WriteFragment(ctx, store, d.Schema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	d, err = Append(ctx, store, []*pb.DataFragment{frag}, map[string]string{"lc.watermark.a": "4"})
	if err != nil || d.Config()["lc.watermark.a"] != "4" || d.CountRows() != 6 {
		t.Fatalf("append with config: %v %v", d, err)
	}

	wider := arrow.NewSchema(append(testArrowSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.BinaryTypes.LargeString, Nullable: true}), nil)
	ws, err := schema.FromArrow(wider, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d, err = AddColumns(ctx, store, ws); err != nil {
		t.Fatal(err)
	}
	if f := d.Schema().Field("extra"); f == nil || f.ID != 4 {
		t.Fatalf("extra column: %+v", f)
	}
	// Old fragments read the new column as null.
	var nulls int
	err = d.Scan(ctx, ScanOptions{Columns: []string{"extra"}}, func(rec arrow.RecordBatch) error {
		nulls += rec.Column(0).NullN()
		return nil
	})
	if err != nil || nulls != 6 {
		t.Fatalf("nulls %d err %v", nulls, err)
	}
	// A non-nullable new column is refused.
	strict := arrow.NewSchema(append(wider.Fields(), arrow.Field{Name: "must", Type: arrow.BinaryTypes.String}), nil)
	ss, _ := schema.FromArrow(strict, 0)
	if _, err := AddColumns(ctx, store, ss); err == nil {
		t.Fatal("non-nullable new column accepted")
	}
	// Appending data that lacks a non-nullable column is refused.
	part := arrow.NewSchema([]arrow.Field{{Name: "group", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	pb2 := array.NewRecordBuilder(memory.DefaultAllocator, part)
	pb2.Field(0).(*array.StringBuilder).Append("x")
	prec := pb2.NewRecordBatch()
	frag, err = WriteFragment(ctx, store, d.Schema(), []arrow.RecordBatch{prec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Append(ctx, store, []*pb.DataFragment{frag}, nil); err == nil {
		t.Fatal("append without the non-nullable id column accepted")
	}
}

// rewriteManifest rewrites the latest manifest file in place with mutate
// applied and the given raw index section, to simulate other writers.
func rewriteManifest(t *testing.T, store objstore.Store, mutate func(*pb.Manifest), index []byte, unknown []byte) {
	t.Helper()
	ctx := context.Background()
	v, n, err := latestVersion(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Get(ctx, n.key(v))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := decodeManifestFile(b)
	if err != nil {
		t.Fatal(err)
	}
	mutate(mf.manifest)
	if unknown != nil {
		mf.manifest.ProtoReflect().SetUnknown(unknown)
	}
	out, err := encodeManifestFile(mf.manifest, index, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, n.key(v), out); err != nil {
		t.Fatal(err)
	}
}

func TestPreservesIndexSectionAndUnknownFields(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, 5)
	idx, _ := proto.Marshal(&pb.IndexSection{Indices: []*pb.IndexMetadata{{Name: "id_idx", Fields: []int32{0}, DatasetVersion: 2}}})
	unknown := protowire.AppendTag(nil, 999, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("future"))
	rewriteManifest(t, store, func(*pb.Manifest) {}, idx, unknown)

	d := appendRows(t, store, 5, 10)
	if !bytes.Equal(d.indexSection, idx) {
		t.Fatal("index section lost by append")
	}
	d, err := Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.indexSection, idx) || !bytes.Contains(d.Manifest().ProtoReflect().GetUnknown(), []byte("future")) {
		t.Fatal("index section or unknown manifest field lost on disk")
	}
}

func TestRefusesUnknownWriterFlag(t *testing.T) {
	store := objstore.NewMemory()
	newTable(t, store)
	rewriteManifest(t, store, func(m *pb.Manifest) { m.WriterFeatureFlags |= 32 }, nil, nil)
	rec := batch(0, 1)
	defer rec.Release()
	d, err := Open(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	frag, err := WriteFragment(context.Background(), store, d.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Append(context.Background(), store, []*pb.DataFragment{frag}, nil); !errors.Is(err, ErrUnsupportedFeature) {
		t.Fatalf("append past flag 32: %v", err)
	}
}

func TestVersionDiscovery(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	for i := 0; i < 4; i++ {
		appendRows(t, store, i*2, i*2+2)
	}
	// A stale hint is corrected by probing upward.
	if err := writeHint(ctx, store, 2); err != nil {
		t.Fatal(err)
	}
	if d, err := Open(ctx, store); err != nil || d.Version() != 5 {
		t.Fatalf("stale hint: %v %v", d, err)
	}
	// No hint: a listing finds the newest.
	if err := store.Delete(ctx, hintKey); err != nil {
		t.Fatal(err)
	}
	if d, err := Open(ctx, store); err != nil || d.Version() != 5 {
		t.Fatalf("no hint: %v %v", d, err)
	}
	// Time travel.
	if d, err := Checkout(ctx, store, 3); err != nil || d.CountRows() != 4 {
		t.Fatalf("checkout 3: %v %v", d, err)
	}
	// V1 names: rename every manifest; reads and commits keep the V1 scheme.
	infos, _ := store.List(ctx, versionsDir)
	for _, o := range infos {
		v, n, ok := parseManifestName(o.Key[len(versionsDir):])
		if !ok || n != namingV2 {
			continue
		}
		b, _ := store.Get(ctx, o.Key)
		_ = store.Put(ctx, namingV1.key(v), b)
		_ = store.Delete(ctx, o.Key)
	}
	_ = store.Delete(ctx, hintKey)
	d := appendRows(t, store, 100, 101)
	if d.Version() != 6 || d.naming != namingV1 {
		t.Fatalf("v1 append: version %d naming %d", d.Version(), d.naming)
	}
	if _, err := store.Head(ctx, "_versions/6.manifest"); err != nil {
		t.Fatalf("v1 manifest not written: %v", err)
	}
	if _, err := store.Head(ctx, namingV2.key(6)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal("mixed naming schemes")
	}
	if _, err := Open(ctx, objstore.NewMemory()); !errors.Is(err, ErrNoTable) {
		t.Fatalf("empty store: %v", err)
	}
}

func TestManifestNames(t *testing.T) {
	if got := namingV2.key(1); got != "_versions/18446744073709551614.manifest" {
		t.Fatalf("v2 name %s", got)
	}
	for _, tc := range []struct {
		name string
		v    uint64
		n    naming
		ok   bool
	}{
		{"18446744073709551614.manifest", 1, namingV2, true},
		{"7.manifest", 7, namingV1, true},
		{".tmp_7.manifest", 0, 0, false},
		{"latest_version_hint.json", 0, 0, false},
		{"d1.manifest", 0, 0, false},
	} {
		v, n, ok := parseManifestName(tc.name)
		if ok != tc.ok || (ok && (v != tc.v || n != tc.n)) {
			t.Errorf("%s: %d %d %v", tc.name, v, n, ok)
		}
	}
	if math.MaxUint64-uint64(1) != 18446744073709551614 {
		t.Fatal("arith")
	}
}

func TestReadsArrowDeletionFile(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	newTable(t, store)
	d := appendRows(t, store, 0, 10)
	frag := d.Fragments()[0]
	// Write an Arrow IPC deletion file, as Lance does for small deletions.
	s := arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	b.Field(0).(*array.Int32Builder).AppendValues([]int32{1, 4}, nil)
	rec := b.NewRecordBatch()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(s))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	df := &pb.DeletionFile{FileType: pb.DeletionFile_ARROW_ARRAY, ReadVersion: 2, Id: 77, NumDeletedRows: 2}
	if err := store.Put(ctx, deletionKey(frag.GetId(), df), buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	rewriteManifest(t, store, func(m *pb.Manifest) { m.Fragments[0].DeletionFile = df }, nil, nil)
	d, _ = Open(ctx, store)
	got := scanIDs(t, d, ScanOptions{})
	if want := []string{"r0", "r2", "r3", "r5", "r6", "r7", "r8", "r9"}; !slices.Equal(got, want) {
		t.Fatalf("arrow deletions: %v", got)
	}
	// Deleting more rows merges the arrow file's rows into a bitmap.
	d, err = DeleteRows(ctx, store, []RowAddr{{frag.GetId(), 0}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := scanIDs(t, d, ScanOptions{}); len(got) != 7 || got[0] != "r2" {
		t.Fatalf("merged deletions: %v", got)
	}
}

func TestDecodeManifestFileRejectsCorruption(t *testing.T) {
	m := &pb.Manifest{Version: 1}
	good, err := encodeManifestFile(m, []byte{1, 2, 3}, &pb.Transaction{Uuid: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeManifestFile(good); err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(good)
	binary.LittleEndian.PutUint64(bad[len(bad)-16:], uint64(len(bad)))
	for name, b := range map[string][]byte{"short": good[:10], "position": bad, "magic": append(slices.Clone(good[:len(good)-1]), 'X')} {
		if _, err := decodeManifestFile(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeManifestFile(f *testing.F) {
	m := &pb.Manifest{Version: 3, Fields: testSchema(f).Proto(), Fragments: []*pb.DataFragment{{Id: 1, PhysicalRows: 10, Files: []*pb.DataFile{{Path: "a.lance", Fields: []int32{0}}}}}}
	good, _ := encodeManifestFile(m, []byte{10, 0}, &pb.Transaction{Uuid: "u"})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("LANC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		mf, err := decodeManifestFile(b)
		if err != nil {
			return
		}
		_, _ = schema.FromProto(mf.manifest.GetFields(), mf.manifest.GetSchemaMetadata())
	})
}

// TestTakeCoalescesNearbyRows: rows of a fragment within takeGap of each
// other are read as one range, and every row still comes back in the order
// asked, duplicates and rows of other fragments included.
func TestTakeCoalescesNearbyRows(t *testing.T) {
	// Fragments of 20,000 rows: the rows taken lie before the 64 KiB tail
	// their file's Open read (a smaller file's take reads nothing).
	const rows = 20_000
	store := objstore.NewMemory()
	newTable(t, store)
	appendRows(t, store, 0, rows)
	d := appendRows(t, store, rows, 2*rows)
	frags := d.Fragments()
	addrs := []RowAddr{
		{frags[1].GetId(), 3}, {frags[0].GetId(), 99}, {frags[0].GetId(), 0}, {frags[0].GetId(), 5},
		{frags[1].GetId(), 3}, {frags[0].GetId(), 40}, {frags[1].GetId(), 99}, {frags[0].GetId(), 6},
	}
	want := []int64{rows + 3, 99, 0, 5, rows + 3, 40, rows + 99, 6}
	counting := objstore.NewCounting(store, 0)
	d2, err := Open(context.Background(), counting)
	if err != nil {
		t.Fatal(err)
	}
	// The cost of one row range: a warm Take of one row.
	one, err := d2.Take(context.Background(), addrs[:1], []string{"n"})
	if err != nil {
		t.Fatal(err)
	}
	one.Release()
	counting.Reset()
	one, _ = d2.Take(context.Background(), addrs[:1], []string{"n"})
	one.Release()
	perRange := counting.Counts().Requests()
	warm, err := d2.Take(context.Background(), addrs, []string{"n"}) // opens both files
	if err != nil {
		t.Fatal(err)
	}
	warm.Release()
	counting.Reset()
	rec, err := d2.Take(context.Background(), addrs, []string{"n"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var got []int64
	for i := 0; i < int(rec.NumRows()); i++ {
		got = append(got, rec.Column(0).(*array.Int64).Value(i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("take = %v, want %v", got, want)
	}
	// Five ranges: fragment 0 {0,5,6}, {40}, {99}; fragment 1 {3}, {99}.
	if n := counting.Counts().Requests(); perRange == 0 || n > 5*perRange {
		t.Fatalf("%d requests for 5 row ranges of %d requests each", n, perRange)
	}
}

// groupFinder is a RowFinder that names, in every fragment, the rows
// given, whatever the value asked for.
type groupFinder struct{ rows []uint32 }

func (f groupFinder) Find(_ context.Context, d *Dataset, _ string, _ []string) (*roaring.Bitmap, map[uint64][]uint32, error) {
	covered := roaring.New()
	rows := map[uint64][]uint32{}
	for _, fr := range d.Fragments() {
		covered.Add(uint32(fr.GetId()))
		rows[fr.GetId()] = f.rows
	}
	return covered, rows, nil
}

// TestRegression_IndexedScanReadsNoDeletedRow: an index names the rows of
// every version of a key, and all but the newest are deleted. The scan
// read each of them (a range read per row apart), then dropped them, so
// a store whose ids are rewritten paid more per trajectory the older it
// was. Deleted rows are now dropped before any read.
func TestRegression_IndexedScanReadsNoDeletedRow(t *testing.T) {
	ctx := context.Background()
	const rows = 20_000
	store := objstore.NewMemory()
	newTable(t, store)
	d := appendRows(t, store, 0, rows)
	f := d.Fragments()[0].GetId()
	if _, err := DeleteRows(ctx, store, []RowAddr{{f, 100}, {f, 5000}, {f, 9000}}, "test"); err != nil {
		t.Fatal(err)
	}
	counting := objstore.NewCounting(store, 0)
	d2, err := Open(ctx, counting)
	if err != nil {
		t.Fatal(err)
	}
	scan := func(found []uint32) ([]int64, int) {
		t.Helper()
		counting.Reset()
		var got []int64
		err := d2.Scan(ctx, ScanOptions{Columns: []string{"n"}, Where: []Eq{{Column: "id", Value: "any"}}, Index: groupFinder{found}}, func(b arrow.RecordBatch) error {
			for i := 0; i < int(b.NumRows()); i++ {
				got = append(got, b.Column(0).(*array.Int64).Value(i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, counting.Counts().Requests()
	}
	scan([]uint32{15000}) // opens the file and reads its deletions
	_, one := scan([]uint32{15000})
	if one == 0 {
		t.Fatal("a warm read of one row made no request: the test cannot tell rows read")
	}
	// The predicate id == "any" matches no row: what is read is what the
	// index named and the scan did not drop first.
	got, n := scan([]uint32{100, 5000, 9000})
	if len(got) != 0 || n != 0 {
		t.Fatalf("rows %v and %d requests for three deleted rows, want none and none", got, n)
	}
}
