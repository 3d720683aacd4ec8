package interop

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

var ixSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func ixID(i int) string      { return fmt.Sprintf("id-%06d", (i*7919)%100003) }
func ixRollout(i int) string { return fmt.Sprintf("r-%04d", i/8) }

func ixBatch(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, ixSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.StringBuilder).Append(ixID(i))
		b.Field(1).(*array.StringBuilder).Append(ixRollout(i))
		b.Field(2).(*array.Int64Builder).Append(int64(i))
		b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("%0200d", i))
	}
	return b.NewRecordBatch()
}

func ixAppend(t *testing.T, st objstore.Store, from, to int) {
	t.Helper()
	d := openTable(t, st)
	rec := ixBatch(from, to)
	defer rec.Release()
	appendFrags(t, st, writeFrag(t, st, d.Schema(), 0, rec))
}

// lanceDBLookup asks LanceDB for column = v and checks the answer (the ns
// of the matching rows, as ids) and that the plan uses a scalar index.
func lanceDBLookup(t *testing.T, dir, name, column, v string, want []string) {
	t.Helper()
	doc := runNode(t, "check_index.mjs", dir, name, "--column", column, "--id", v)
	got, _ := normalize(doc["found_ids"]).([]any)
	if len(got) != len(want) || num(t, doc, "count") != int64(len(want)) {
		t.Errorf("LanceDB %s = %q: count %v, found %d rows; want %d", column, v, doc["count"], len(got), len(want))
	}
	if normalize(doc["uses_index"]) != true {
		t.Errorf("LanceDB %s = %q does not use a scalar index", column, v)
	}
}

// goLookup returns the n of rows with column = v, through the index when
// f is set, and the fragments the index covered.
func goLookup(t *testing.T, d *table.Dataset, column, v string, f table.RowFinder) []int64 {
	t.Helper()
	var out []int64
	err := d.Scan(context.Background(), table.ScanOptions{Columns: []string{"n"}, Where: []table.Eq{{Column: column, Value: v}}, Index: f}, func(b arrow.RecordBatch) error {
		n := b.Column(0).(*array.Int64)
		for i := 0; i < n.Len(); i++ {
			out = append(out, n.Value(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func wantRows(lo, hi int, pred func(i int) bool) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		if pred(i) {
			out = append(out, int64(i))
		}
	}
	return out
}

// TestLanceDBUsesGoBuiltIndex: LanceDB 0.31 opens a table whose BTree
// indexes on id and rollout_id we built and committed; its plans for
// id = '…' and rollout_id = '…' use them, and the answers match, also after
// a Go deletion and with a fragment the index does not cover yet.
func TestLanceDBUsesGoBuiltIndex(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "gix")
	createTable(t, st, ixSchema)
	ixAppend(t, st, 0, 6000)
	ixAppend(t, st, 6000, 10000)
	for _, col := range []string{"id", "rollout_id"} {
		res, err := index.Update(ctx, st, col, index.BuildOptions{RunBytes: 128 << 10})
		if err != nil || !res.Built {
			t.Fatalf("index %s: %+v %v", col, res, err)
		}
	}
	doc := runNode(t, "check_index.mjs", dir, "gix", "--id", ixID(17))
	stats, _ := normalize(doc["index_stats"]).(map[string]any)
	for _, name := range []string{"id_idx", "rollout_id_idx"} {
		s, _ := stats[name].(map[string]any)
		if s["numIndexedRows"] != int64(10000) || s["numUnindexedRows"] != int64(0) || s["indexType"] != "BTREE" {
			t.Errorf("LanceDB stats of %s: %s; want a BTree with 10000 indexed, 0 unindexed rows", name, brief(s))
		}
	}
	for _, i := range []int{0, 17, 4095, 4096, 5999, 6000, 9999} {
		lanceDBLookup(t, dir, "gix", "id", ixID(i), []string{ixID(i)})
		lanceDBLookup(t, dir, "gix", "rollout_id", ixRollout(i), make([]string, 8))
	}
	lanceDBLookup(t, dir, "gix", "id", "id-missing", nil)

	// A Go deletion and an appended fragment outside the index's bitmap.
	d := openTable(t, st)
	if _, err := table.DeleteRows(ctx, st, addrsOf(t, d, ixID(17)), "id = '"+ixID(17)+"'"); err != nil {
		t.Fatal(err)
	}
	ixAppend(t, st, 10000, 10100)
	lanceDBLookup(t, dir, "gix", "id", ixID(17), nil)
	lanceDBLookup(t, dir, "gix", "id", ixID(10050), []string{ixID(10050)})
	lanceDBLookup(t, dir, "gix", "rollout_id", ixRollout(10000), make([]string, 8))
	// Brought up to date, the index covers the new fragment too.
	if res, err := index.Update(ctx, st, "id", index.BuildOptions{}); err != nil || !res.Built || res.NewRows != 100 {
		t.Fatalf("update: %+v %v", res, err)
	}
	lanceDBLookup(t, dir, "gix", "id", ixID(10050), []string{ixID(10050)})
	lanceDBLookup(t, dir, "gix", "id", ixID(17), nil)
	doc = runNode(t, "check_index.mjs", dir, "gix", "--id", ixID(1))
	stats, _ = normalize(doc["index_stats"]).(map[string]any)
	if s, _ := stats["id_idx"].(map[string]any); s["numUnindexedRows"] != int64(0) {
		t.Errorf("after update, id_idx stats %s; want 0 unindexed rows", brief(s))
	}
}

// countingStore counts ranged reads and their bytes.
type countingStore struct {
	objstore.Store
	reads, bytes atomic.Int64
}

func (c *countingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := c.Store.GetRange(ctx, key, off, n)
	c.reads.Add(1)
	c.bytes.Add(int64(len(b)))
	return b, err
}

// TestGoUsesLanceDBBuiltIndex: we read and use the BTree indexes LanceDB
// builds on our table (a lookup through them reads a small fraction of the
// bytes a scan reads, so the test fails if the index is ignored), then
// append, bring the index up to date, compact and rebuild; LanceDB still
// reads and uses the index afterwards.
func TestGoUsesLanceDBBuiltIndex(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "lix")
	createTable(t, st, ixSchema)
	ixAppend(t, st, 0, 8000)
	ixAppend(t, st, 8000, 12000)
	runNode(t, "maintain.mjs", dir, "lix", "--index")
	runNode(t, "maintain.mjs", dir, "lix", "--index", "--index-column", "rollout_id")

	cs := &countingStore{Store: st}
	d, err := table.Open(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"id", "rollout_id"} {
		idxs, err := index.BTreeIndexes(d, col)
		if err != nil || len(idxs) != 1 || idxs[0].GetName() != col+"_idx" {
			t.Fatalf("LanceDB's index on %s: %v %v", col, idxs, err)
		}
	}
	f := index.NewFinder(0)
	for _, i := range []int{3, 7999, 8000, 11999} {
		goLookup(t, d, "id", ixID(i), f) // warm the footers and lookups
		// and the offsets reads it started in the background (lance/file),
		// which are not the next lookup's.
		if err := file.WaitPrefetches(ctx); err != nil {
			t.Fatal(err)
		}
		// The least of three lookups: an offsets read that a lookup starts
		// in the background (lance/file's prefetch) may land inside the
		// next one's count on a loaded machine (1 run in 4 here).
		var got []int64
		viaIndex := int64(math.MaxInt64)
		for range 3 {
			if err := file.WaitPrefetches(ctx); err != nil {
				t.Fatal(err)
			}
			cs.bytes.Store(0)
			got = goLookup(t, d, "id", ixID(i), f)
			viaIndex = min(viaIndex, cs.bytes.Load())
		}
		if err := file.WaitPrefetches(ctx); err != nil {
			t.Fatal(err)
		}
		cs.bytes.Store(0)
		want := goLookup(t, d, "id", ixID(i), nil)
		viaScan := cs.bytes.Load()
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, []int64{int64(i)}) {
			t.Fatalf("id %s: index gives %v, scan gives %v", ixID(i), got, want)
		}
		if viaIndex*10 > viaScan {
			t.Errorf("id %s: the lookup read %d bytes, the scan %d: LanceDB's index is not used", ixID(i), viaIndex, viaScan)
		}
		r := goLookup(t, d, "rollout_id", ixRollout(i), f)
		if want := wantRows(0, 12000, func(j int) bool { return ixRollout(j) == ixRollout(i) }); !reflect.DeepEqual(r, want) {
			t.Fatalf("rollout %s: index gives %v, want %v", ixRollout(i), r, want)
		}
	}

	// Append, update the index (merging LanceDB's pages with the new
	// fragment), delete, compact, rebuild.
	ixAppend(t, st, 12000, 12500)
	for _, col := range []string{"id", "rollout_id"} {
		if res, err := index.Update(ctx, st, col, index.BuildOptions{}); err != nil || !res.Built || res.NewRows != 500 {
			t.Fatalf("update %s: %+v %v", col, res, err)
		}
	}
	lanceDBLookup(t, dir, "lix", "id", ixID(12345), []string{ixID(12345)})
	lanceDBLookup(t, dir, "lix", "id", ixID(5), []string{ixID(5)})
	runNode(t, "maintain.mjs", dir, "lix", "--delete", "n = 5")
	if _, err := table.Compact(ctx, st, table.CompactOptions{TargetRows: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"id", "rollout_id"} {
		if res, err := index.Update(ctx, st, col, index.BuildOptions{}); err != nil || !res.Built {
			t.Fatalf("update %s after compaction: %+v %v", col, res, err)
		}
	}
	lanceDBLookup(t, dir, "lix", "id", ixID(5), nil)
	lanceDBLookup(t, dir, "lix", "id", ixID(6), []string{ixID(6)})
	lanceDBLookup(t, dir, "lix", "id", ixID(12499), []string{ixID(12499)})
	lanceDBLookup(t, dir, "lix", "rollout_id", ixRollout(12499), make([]string, 4))
	d = openTable(t, st)
	f = index.NewFinder(0)
	for _, i := range []int{5, 6, 12499} {
		got, want := goLookup(t, d, "id", ixID(i), f), goLookup(t, d, "id", ixID(i), nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after compaction, id %s: index %v, scan %v", ixID(i), got, want)
		}
	}
	// LanceDB compacts and remaps our index; we still read it.
	runNode(t, "maintain.mjs", dir, "lix", "--compact")
	d = openTable(t, st)
	cov, err := index.Covered(d, "id")
	if err != nil || cov.IsEmpty() {
		t.Fatalf("after LanceDB's compaction the id index covers %v (%v)", cov, err)
	}
	for _, i := range []int{6, 12499} {
		if got := goLookup(t, d, "id", ixID(i), f); !reflect.DeepEqual(got, []int64{int64(i)}) {
			t.Fatalf("after LanceDB compaction, id %s: %v", ixID(i), got)
		}
	}
}
