package table

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

var dictArrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "role", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
}, nil)

var dictRoles = []string{"assistant", "tool", "grade", "artifact"}

// dictBatch makes rows [from, to): id "r{i}", role dictRoles[i%4] (null
// when i%5 == 4), at = i. Each batch builds its own dictionary, so
// batches differ in dictionary order.
func dictBatch(t testing.TB, from, to int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, dictArrowSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%d", i))
		if i%5 == 4 {
			b.Field(1).AppendNull()
		} else if err := b.Field(1).(*array.BinaryDictionaryBuilder).AppendString(dictRoles[i%4]); err != nil {
			t.Fatal(err)
		}
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
	}
	return b.NewRecordBatch()
}

func dictRole(i int) string {
	if i%5 == 4 {
		return "<null>"
	}
	return dictRoles[i%4]
}

// scanRoles returns "id=role@at" for every row a scan returns.
func scanRoles(t testing.TB, d *Dataset, opts ScanOptions) []string {
	t.Helper()
	var out []string
	err := d.Scan(context.Background(), opts, func(rec arrow.RecordBatch) error {
		out = append(out, rolesOf(t, rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func rolesOf(t testing.TB, rec arrow.RecordBatch) []string {
	t.Helper()
	ids := rec.Column(0).(*array.String)
	roles, ok := rec.Column(1).(*array.Dictionary)
	if !ok {
		t.Fatalf("role column is %s", rec.Column(1).DataType())
	}
	ats := rec.Column(2).(*array.Timestamp)
	var out []string
	for i := range ids.Len() {
		r := "<null>"
		if !roles.IsNull(i) {
			r = roles.Dictionary().(*array.String).Value(roles.GetValueIndex(i))
		}
		out = append(out, fmt.Sprintf("%s=%s@%d", ids.Value(i), r, ats.Value(i)))
	}
	return out
}

func wantRoles(keep func(i int) bool, idx ...[2]int) []string {
	var out []string
	for _, rg := range idx {
		for i := rg[0]; i < rg[1]; i++ {
			if keep == nil || keep(i) {
				out = append(out, fmt.Sprintf("r%d=%s@%d", i, dictRole(i), i))
			}
		}
	}
	return out
}

// TestDictionaryColumnTable: a table with a dictionary-typed column and a
// timestamp without a time zone (the reference system's column types)
// scans, filters on the dictionary column (equality, sets, negated sets),
// pages, takes rows across fragments with different dictionaries, and
// compacts, keeping its column types.
func TestDictionaryColumnTable(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	s, err := schema.FromArrow(dictArrowSchema, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, store, s, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var frags []*pb.DataFragment
	for _, rg := range [][2]int{{0, 10}, {10, 25}} {
		rec := dictBatch(t, rg[0], rg[1])
		f, err := WriteFragment(ctx, store, s, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		frags = append(frags, f)
	}
	d, err := Append(ctx, store, frags, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := scanRoles(t, d, ScanOptions{}), wantRoles(nil, [2]int{0, 25}); !slices.Equal(got, want) {
		t.Fatalf("scan\n got  %v\n want %v", got, want)
	}
	isTool := func(i int) bool { return dictRole(i) == "tool" }
	if got, want := scanRoles(t, d, ScanOptions{Where: []Eq{{"role", "tool"}}}), wantRoles(isTool, [2]int{0, 25}); !slices.Equal(got, want) {
		t.Fatalf("role = tool\n got  %v\n want %v", got, want)
	}
	gradeOrArtifact := func(i int) bool { return dictRole(i) == "grade" || dictRole(i) == "artifact" }
	set := map[string]struct{}{"grade": {}, "artifact": {}}
	if got, want := scanRoles(t, d, ScanOptions{In: []In{{Column: "role", Values: set}}}), wantRoles(gradeOrArtifact, [2]int{0, 25}); !slices.Equal(got, want) {
		t.Fatalf("role in (grade, artifact)\n got  %v\n want %v", got, want)
	}
	notGA := func(i int) bool { return !gradeOrArtifact(i) }
	if got, want := scanRoles(t, d, ScanOptions{In: []In{{Column: "role", Values: set, Negate: true}}}), wantRoles(notGA, [2]int{0, 25}); !slices.Equal(got, want) {
		t.Fatalf("role not in (grade, artifact)\n got  %v\n want %v", got, want)
	}
	if got, want := scanRoles(t, d, ScanOptions{Where: []Eq{{"role", "tool"}}, Offset: 1, Limit: 2}), wantRoles(isTool, [2]int{0, 25})[1:3]; !slices.Equal(got, want) {
		t.Fatalf("role = tool offset 1 limit 2\n got  %v\n want %v", got, want)
	}
	if got, want := scanRoles(t, d, ScanOptions{Offset: 8, Limit: 4, BatchRows: 3}), wantRoles(nil, [2]int{8, 12}); !slices.Equal(got, want) {
		t.Fatalf("offset 8 limit 4\n got  %v\n want %v", got, want)
	}

	// Take rows of both fragments (different dictionaries) in one batch.
	f0, f1 := d.Fragments()[0].GetId(), d.Fragments()[1].GetId()
	rec, err := d.Take(ctx, []RowAddr{{f1, 14}, {f0, 1}, {f1, 0}, {f0, 4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := rolesOf(t, rec)
	rec.Release()
	if want := slices.Concat(wantRoles(nil, [2]int{24, 25}), wantRoles(nil, [2]int{1, 2}), wantRoles(nil, [2]int{10, 11}), wantRoles(nil, [2]int{4, 5})); !slices.Equal(got, want) {
		t.Fatalf("take\n got  %v\n want %v", got, want)
	}

	// Delete, compact, and the table keeps its types and rows.
	if _, err := DeleteRows(ctx, store, []RowAddr{{f0, 2}, {f1, 3}}, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := Compact(ctx, store, CompactOptions{TargetRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	d = res.Dataset
	if len(d.Fragments()) != 1 {
		t.Fatalf("%d fragments after compaction", len(d.Fragments()))
	}
	if !arrow.TypeEqual(d.Schema().Field("role").Type, dictArrowSchema.Field(1).Type) || !arrow.TypeEqual(d.Schema().Field("at").Type, dictArrowSchema.Field(2).Type) {
		t.Fatalf("schema after compaction: %s", d.Schema().Arrow())
	}
	want := wantRoles(func(i int) bool { return i != 2 && i != 13 }, [2]int{0, 25})
	if got := scanRoles(t, d, ScanOptions{}); !slices.Equal(got, want) {
		t.Fatalf("after compaction\n got  %v\n want %v", got, want)
	}
}

// TestDictionaryColumnManyValues: plain utf8 values written to an int8
// dictionary column (as a merge of free-form roles into a reference table
// does) may hold more distinct values than int8 keys address: the writer
// splits pages, plain scans and takes read every row, and compaction
// rewrites the table without hitting the bound.
func TestDictionaryColumnManyValues(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	s, err := schema.FromArrow(dictArrowSchema, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, store, s, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
	var want []string
	for f := range 2 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, plain)
		for i := f * 200; i < (f+1)*200; i++ {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("r%03d", i))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("role-%d", i%300))
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
			want = append(want, fmt.Sprintf("r%03d=role-%d@%d", i, i%300, i))
		}
		rec := b.NewRecordBatch()
		b.Release()
		frag, err := WriteFragment(ctx, store, s, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Append(ctx, store, []*pb.DataFragment{frag}, nil); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	plainRows := func(rec arrow.RecordBatch) []string {
		var out []string
		ids, roles, ats := rec.Column(0).(*array.String), rec.Column(1).(*array.String), rec.Column(2).(*array.Timestamp)
		for i := range ids.Len() {
			out = append(out, fmt.Sprintf("%s=%s@%d", ids.Value(i), roles.Value(i), ats.Value(i)))
		}
		return out
	}
	scanPlain := func(d *Dataset) []string {
		var got []string
		err := d.Scan(ctx, ScanOptions{PlainDictionaries: true}, func(rec arrow.RecordBatch) error {
			if rec.Schema().Field(1).Type.ID() != arrow.STRING {
				return fmt.Errorf("plain scan schema %s", rec.Schema())
			}
			got = append(got, plainRows(rec)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scanPlain(d); !slices.Equal(got, want) {
		t.Fatalf("plain scan: %d rows, want %d", len(got), len(want))
	}
	if err := d.Scan(ctx, ScanOptions{}, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal("a dictionary scan of 300 distinct values with int8 keys succeeded")
	}
	var addrs []RowAddr
	for i := range 200 {
		addrs = append(addrs, RowAddr{Fragment: d.Fragments()[i%2].GetId(), Offset: uint32(i)})
	}
	rec, err := d.TakePlain(ctx, addrs, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := plainRows(rec)
	rec.Release()
	for i, g := range got {
		if w := want[(i%2)*200+i]; g != w {
			t.Fatalf("take row %d: %s, want %s", i, g, w)
		}
	}
	res, err := Compact(ctx, store, CompactOptions{TargetRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got := scanPlain(res.Dataset); !slices.Equal(got, want) || len(res.Dataset.Fragments()) != 1 {
		t.Fatalf("after compaction: %d rows in %d fragments", len(got), len(res.Dataset.Fragments()))
	}
}
