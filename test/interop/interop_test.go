package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/lance-context/lance-context/lance/table"
)

// allTypes is every column type the Go writer supports.
var allTypes = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "lf", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
	{Name: "li", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
}, nil)

var sValues = []any{"héllo 世界 🚀", "", "x", nil, "tab\tnewline\n\"quote\" \\ back 'apos'", "ñandú", "x "}

const (
	bigBinRow  = 1500    // the row holding the 8 MiB large_binary value
	bigBinSize = 8 << 20 // its size
	bigStrRow  = 700     // a 100 KiB large_utf8 value
)

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(j*31 + seed*7 + 13)
	}
	return b
}

// allTypesRow is row i of the all-types table, as native values (nil = null).
func allTypesRow(i int) map[string]any {
	r := map[string]any{"id": fmt.Sprintf("r%05d", i)}
	if i%7 != 0 {
		r["b"] = i%3 == 0
	}
	switch {
	case i == 0:
		r["i32"] = int32(math.MinInt32)
	case i == 1:
		r["i32"] = int32(math.MaxInt32)
	case i%11 == 4:
	default:
		r["i32"] = int32((i*7919)%20001 - 10000)
	}
	switch {
	case i == 2:
		r["i64"] = int64(math.MaxInt64)
	case i == 3:
		r["i64"] = int64(math.MinInt64)
	case i == 4:
		r["i64"] = int64(1<<53 + 1)
	case i%13 == 5:
	default:
		r["i64"] = int64(i)*1000000007 - 150000000000
	}
	switch {
	case i == 5:
		r["f32"] = float32(math.NaN())
	case i == 6:
		r["f32"] = float32(math.Inf(1))
	case i == 7:
		r["f32"] = float32(math.Inf(-1))
	case i == 9:
		r["f32"] = float32(1.0 / 3)
	case i%17 == 3:
	default:
		r["f32"] = float32(i)*0.25 - 37.5
	}
	switch {
	case i == 10:
		r["f64"] = math.Pi
	case i == 11:
		r["f64"] = -1e300
	case i == 12:
		r["f64"] = 5e-324
	case i == 13:
		r["f64"] = math.Copysign(0, -1)
	case i == 14:
		r["f64"] = math.NaN()
	case i%19 == 0:
	default:
		r["f64"] = float64(i)*1.5 + 0.001
	}
	if s := sValues[i%len(sValues)]; s != nil {
		r["s"] = s
	}
	switch {
	case i == bigStrRow:
		r["ls"] = strings.Repeat("L€", 100<<10/4)
	case i%23 == 7:
	case i%23 == 8:
		r["ls"] = ""
	default:
		r["ls"] = fmt.Sprintf("large-%d-%s", i, strings.Repeat("ü", i%17))
	}
	if i%10 != 1 {
		r["bin"] = pattern(i%9, i) // i%9 == 0: empty
	}
	switch {
	case i == bigBinRow:
		r["lbin"] = pattern(bigBinSize, i)
	case i%7 == 2:
	case i%7 == 3:
		r["lbin"] = []byte{}
	default:
		r["lbin"] = pattern((i*13)%200+1, i+1)
	}
	switch {
	case i == 8:
		r["ts"] = arrow.Timestamp(-1234567) // before the epoch, not ms-aligned
	case i%11 == 5:
	default:
		r["ts"] = arrow.Timestamp(1700000000000000 + int64(i)*1234567)
	}
	switch i % 13 {
	case 4:
	case 5:
		r["lf"] = []float32{}
	default:
		lf := make([]float32, i%6+1)
		for k := range lf {
			lf[k] = float32(i) + float32(k)/8
		}
		if i == 20 {
			lf[0] = float32(math.NaN())
		}
		r["lf"] = lf
	}
	if i%17 != 9 {
		li := make([]int32, i%4) // i%4 == 0: empty
		for k := range li {
			li[k] = int32(i*10 + k)
		}
		r["li"] = li
	}
	if i%19 != 6 {
		r["vec"] = []float32{float32(i) * 0.5, float32(i)*0.5 + 1, -float32(i), float32(k4(i))}
	}
	return r
}

func k4(i int) float32 { return float32(i%4) / 3 }

// allNullRow has only the id set: every nullable column is null.
func allNullRow(i int) map[string]any {
	return map[string]any{"id": fmt.Sprintf("r%05d", i)}
}

func nativeRows(from, to int, gen func(int) map[string]any) []map[string]any {
	out := make([]map[string]any, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, gen(i))
	}
	return out
}

// TestGoWritesLanceDBReads: a Go-written table with every supported type,
// read back by LanceDB value for value.
func TestGoWritesLanceDBReads(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	dir := t.TempDir()
	st := localStore(t, dir, "types")
	ls := createTable(t, st, allTypes)

	// Fragment 1: rows 0..999 in one batch, default (8 MiB) pages.
	// Fragment 2: rows 1000..2999 in 250-row batches with 4 KiB pages
	// (several pages per column; the 8 MiB value gets a page of its own).
	// Fragment 3: 40 rows with every nullable column null.
	var native []map[string]any
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	batch := func(from, to int, gen func(int) map[string]any) arrow.RecordBatch {
		rows := nativeRows(from, to, gen)
		native = append(native, rows...)
		rec := buildBatch(allTypes, rows)
		recs = append(recs, rec)
		return rec
	}
	f1, err := table.WriteFragment(ctx, st, ls, []arrow.RecordBatch{batch(0, 1000, allTypesRow)})
	if err != nil {
		t.Fatal(err)
	}
	appendFrags(t, st, f1)
	var b2 []arrow.RecordBatch
	for s := 1000; s < 3000; s += 250 {
		b2 = append(b2, batch(s, s+250, allTypesRow))
	}
	f2 := writeFrag(t, st, ls, 4<<10, b2...)
	f3 := writeFrag(t, st, ls, 4<<10, batch(3000, 3040, allNullRow))
	d := appendFrags(t, st, f2, f3)
	if d.Version() != 3 || d.CountRows() != 3040 || len(d.Fragments()) != 3 {
		t.Fatalf("Go: version %d, %d rows, %d fragments; want 3, 3040, 3", d.Version(), d.CountRows(), len(d.Fragments()))
	}
	checkMultiPage(t, st, d.Fragments()[0], 0)
	checkMultiPage(t, st, d.Fragments()[1], 12)

	// Expected values come from the Arrow arrays Go handed to the writer.
	var want []row
	for _, r := range recs {
		want = append(want, recordRows(r)...)
	}
	sortByID(want)
	checkExpectedSanity(t, want)

	// LanceDB reads every value.
	doc := runNode(t, "dump.mjs", dir, "types", "--order-by-col", "id")
	if c := num(t, doc, "count"); c != 3040 {
		t.Errorf("LanceDB count %d, want 3040", c)
	}
	if v := num(t, doc, "version"); v != 3 {
		t.Errorf("LanceDB version %d, want 3", v)
	}
	if f := num(t, doc, "fragments"); f != 3 {
		t.Errorf("LanceDB fragments %d, want 3", f)
	}
	checkSchemaJSON(t, "LanceDB schema of the Go table", doc["schema"], allTypes)
	compareRows(t, "LanceDB rows of the Go table", nodeRows(t, doc), want)

	// Go reads back what it wrote, too.
	got, _ := scanRows(t, openTable(t, st), table.ScanOptions{})
	compareRows(t, "Go rows of the Go table", got, want)

	// Filters: LanceDB's counts equal the ones computed from the inputs.
	filters := []struct {
		where string
		pred  func(map[string]any) bool
	}{
		{"s = 'x'", func(r map[string]any) bool { return r["s"] == "x" }},
		{"s IS NULL", func(r map[string]any) bool { return r["s"] == nil }},
		{"b = true", func(r map[string]any) bool { return r["b"] == true }},
		{"b = false", func(r map[string]any) bool { return r["b"] == false }},
		{"i32 > 100", func(r map[string]any) bool { v, ok := r["i32"].(int32); return ok && v > 100 }},
		{"i64 IS NULL", func(r map[string]any) bool { return r["i64"] == nil }},
		{"ts < arrow_cast(0, 'Timestamp(Microsecond, Some(\"UTC\"))') OR lf IS NULL", func(r map[string]any) bool {
			ts, ok := r["ts"].(arrow.Timestamp)
			return (ok && ts < 0) || r["lf"] == nil
		}},
	}
	for _, f := range filters {
		want := 0
		for _, r := range native {
			if f.pred(r) {
				want++
			}
		}
		if want == 0 || want == len(native) {
			t.Fatalf("filter %q selects %d of %d rows: not a useful test", f.where, want, len(native))
		}
		doc := runNode(t, "dump.mjs", dir, "types", "--where", f.where, "--no-rows")
		if c := num(t, doc, "count"); c != int64(want) {
			t.Errorf("LanceDB count where %s = %d, want %d", f.where, c, want)
		}
	}

	// Go's own filters agree with the same inputs.
	d = openTable(t, st)
	for _, eq := range []table.Eq{{Column: "s", Value: "x"}, {Column: "b", Value: true}, {Column: "ls", Value: ""}} {
		var wantIDs []string
		for _, r := range native {
			if v, ok := r[eq.Column]; ok && v == eq.Value {
				wantIDs = append(wantIDs, r["id"].(string))
			}
		}
		got, _ := scanRows(t, d, table.ScanOptions{Columns: []string{"id"}, Where: []table.Eq{eq}})
		checkIDs(t, fmt.Sprintf("Go scan where %s = %v", eq.Column, eq.Value), ids(got), wantIDs)
	}
}

// checkExpectedSanity guards the test itself: the expected rows must hold
// the edge cases the test claims to cover.
func checkExpectedSanity(t *testing.T, want []row) {
	t.Helper()
	if len(want) != 3040 {
		t.Fatalf("expected rows: %d", len(want))
	}
	if got := want[bigBinRow]["lbin"].(map[string]any)["len"]; got != int64(bigBinSize) {
		t.Fatalf("row %d lbin len %v", bigBinRow, got)
	}
	if want[2]["i64"] != "9223372036854775807" || want[4]["i64"] != "9007199254740993" || want[5]["f32"] != "NaN" {
		t.Fatalf("expected encoding of edge values is off: %v %v %v", want[2]["i64"], want[4]["i64"], want[5]["f32"])
	}
	for c := range want[3039] {
		if c != "id" && want[3039][c] != nil {
			t.Fatalf("row 3039 column %s is %v, want null", c, want[3039][c])
		}
	}
}

// bigSchema is the 120,000-row table's schema.
var bigSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "grp", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "v", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true}, // no nulls
}, nil)

func bigRow(i int) map[string]any {
	r := map[string]any{"id": fmt.Sprintf("k%06d", i), "x": float64(i) / 7, "flag": i%3 == 1,
		"v": []float32{float32(i), float32(i) / 4, -1, float32(i % 10)}}
	if i%7 != 0 {
		r["grp"] = fmt.Sprintf("g%d", i%5)
	}
	if i%101 != 0 {
		r["n"] = int64(i)*3 - 5000
	}
	return r
}

// TestGoWritesLanceDBReadsLarge: 120,000 rows in multi-page files.
func TestGoWritesLanceDBReadsLarge(t *testing.T) {
	requireNode(t)
	dir := t.TempDir()
	st := localStore(t, dir, "big")
	ls := createTable(t, st, bigSchema)
	const total, split = 120000, 70000
	native := nativeRows(0, total, bigRow)

	var b1 []arrow.RecordBatch
	for s := 0; s < split; s += 10000 {
		b1 = append(b1, buildBatch(bigSchema, native[s:s+10000]))
	}
	f1 := writeFrag(t, st, ls, 64<<10, b1...)
	b2 := buildBatch(bigSchema, native[split:])
	f2 := writeFrag(t, st, ls, 32<<10, b2)
	for _, r := range append(b1, b2) {
		r.Release()
	}
	d := appendFrags(t, st, f1, f2)
	if d.CountRows() != total {
		t.Fatalf("Go count %d, want %d", d.CountRows(), total)
	}
	checkMultiPage(t, st, d.Fragments()[0], 4)
	checkMultiPage(t, st, d.Fragments()[1], 4)

	doc := runNode(t, "dump.mjs", dir, "big", "--no-rows")
	if c := num(t, doc, "count"); c != total {
		t.Errorf("LanceDB count %d, want %d", c, total)
	}
	checkSchemaJSON(t, "LanceDB schema of the big table", doc["schema"], bigSchema)

	for _, f := range []struct {
		where string
		pred  func(map[string]any) bool
	}{
		{"grp = 'g3'", func(r map[string]any) bool { return r["grp"] == "g3" }},
		{"n > 100000 AND flag = true", func(r map[string]any) bool {
			n, ok := r["n"].(int64)
			return ok && n > 100000 && r["flag"] == true
		}},
	} {
		want := 0
		for _, r := range native {
			if f.pred(r) {
				want++
			}
		}
		doc := runNode(t, "dump.mjs", dir, "big", "--where", f.where, "--no-rows")
		if c := num(t, doc, "count"); c != int64(want) {
			t.Errorf("LanceDB count where %s = %d, want %d", f.where, c, want)
		}
	}

	wantRows := func(from, to int) []row {
		rec := buildBatch(bigSchema, native[from:to])
		defer rec.Release()
		return recordRows(rec)
	}
	d = openTable(t, st)
	for _, s := range []struct{ offset, limit int }{{split - 10, 20}, {12345, 7}, {total - 3, 10}} {
		want := wantRows(s.offset, min(s.offset+s.limit, total))
		doc := runNode(t, "dump.mjs", dir, "big", "--offset", fmt.Sprint(s.offset), "--limit", fmt.Sprint(s.limit))
		compareRows(t, fmt.Sprintf("LanceDB offset %d limit %d", s.offset, s.limit), nodeRows(t, doc), want)
		got, _ := scanRows(t, d, table.ScanOptions{Offset: int64(s.offset), Limit: int64(s.limit)})
		compareRows(t, fmt.Sprintf("Go offset %d limit %d", s.offset, s.limit), got, want)
	}

	// Go reads all 120,000 rows back.
	got, _ := scanRows(t, d, table.ScanOptions{})
	compareRows(t, "Go full scan of the big table", got, wantRows(0, total))
}

// TestGoReadsLanceDBTable: LanceDB writes a 2.0 table (two fragments, a
// dictionary-encoded column); Go reads every value.
func TestGoReadsLanceDBTable(t *testing.T) {
	requireNode(t)
	dir := t.TempDir()
	mk := runNode(t, "make_table.mjs", dir, "ldb")
	if num(t, mk, "rows") != 300 || num(t, mk, "fragments") != 2 {
		t.Fatalf("make_table: %s", brief(mk))
	}
	if fv := normalize(mk["footer_version"]); !reflect.DeepEqual(fv, []any{int64(0), int64(3)}) {
		t.Fatalf("make_table footer version %v, want [0 3] (2.0)", fv)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "ldb.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expDoc map[string]any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&expDoc); err != nil {
		t.Fatal(err)
	}
	want := nodeRows(t, expDoc)
	if len(want) != 300 {
		t.Fatalf("expected.json has %d rows", len(want))
	}

	st := localStore(t, dir, "ldb")
	d := openTable(t, st)
	if d.CountRows() != 300 || len(d.Fragments()) != 2 {
		t.Errorf("Go: %d rows in %d fragments, want 300 in 2", d.CountRows(), len(d.Fragments()))
	}
	// LanceDB chose the dictionary encoding for cat: the Go reader's
	// dictionary path is what this test covers.
	for _, f := range d.Fragments() {
		for _, e := range pageEncodings(t, st, f.GetFiles()[0], d.Schema().Field("cat").ID) {
			if e.GetDictionary() == nil {
				t.Errorf("fragment %d: cat page encoding is %s, want dictionary", f.GetId(), prototext.Format(e))
			}
		}
	}
	// Go's schema names the same types LanceDB wrote.
	if g, w := schemaJSON(d.Schema().Arrow()), normalize(expDoc["schema"]); !reflect.DeepEqual(g, w) {
		t.Errorf("Go schema of the LanceDB table:\n  got  %s\n  want %s", brief(g), brief(w))
	}

	got, _ := scanRows(t, d, table.ScanOptions{})
	// LanceDB wrote rows in id order, so scan order is id order too.
	compareRows(t, "Go scan (natural order) of the LanceDB table", got, want)
	sortByID(got)
	compareRows(t, "Go scan (by id) of the LanceDB table", got, want)

	// Projection.
	got, _ = scanRows(t, d, table.ScanOptions{Columns: []string{"cat", "id"}})
	var wantProj []row
	for _, r := range want {
		wantProj = append(wantProj, row{"id": r["id"], "cat": r["cat"]})
	}
	compareRows(t, "Go projection of cat, id", got, wantProj)

	// Filters, offset and limit against the expected rows.
	filter := func(pred func(row) bool) []row {
		var out []row
		for _, r := range want {
			if pred(r) {
				out = append(out, r)
			}
		}
		return out
	}
	slice := func(rows []row, off, lim int) []row {
		if off > len(rows) {
			return nil
		}
		return rows[off:min(off+lim, len(rows))]
	}
	cases := []struct {
		name string
		opts table.ScanOptions
		want []row
	}{
		{"cat = beta", table.ScanOptions{Where: []table.Eq{{Column: "cat", Value: "beta"}}},
			filter(func(r row) bool { return r["cat"] == "beta" })},
		{"flag = true", table.ScanOptions{Where: []table.Eq{{Column: "flag", Value: true}}},
			filter(func(r row) bool { return r["flag"] == true })},
		{"flag = false AND cat = gamma", table.ScanOptions{Where: []table.Eq{{Column: "flag", Value: false}, {Column: "cat", Value: "gamma"}}},
			filter(func(r row) bool { return r["flag"] == false && r["cat"] == "gamma" })},
		{"s = empty", table.ScanOptions{Where: []table.Eq{{Column: "s", Value: ""}}},
			filter(func(r row) bool { return r["s"] == "" })},
		{"offset 140 limit 20", table.ScanOptions{Offset: 140, Limit: 20}, slice(want, 140, 20)},
		{"offset 299 limit 5", table.ScanOptions{Offset: 299, Limit: 5}, slice(want, 299, 5)},
		{"cat = alpha offset 25 limit 10", table.ScanOptions{Where: []table.Eq{{Column: "cat", Value: "alpha"}}, Offset: 25, Limit: 10},
			slice(filter(func(r row) bool { return r["cat"] == "alpha" }), 25, 10)},
	}
	for _, c := range cases {
		if len(c.want) == 0 {
			t.Fatalf("%s: selects nothing; not a useful test", c.name)
		}
		got, _ := scanRows(t, d, c.opts)
		compareRows(t, "Go scan "+c.name, got, c.want)
	}
}
