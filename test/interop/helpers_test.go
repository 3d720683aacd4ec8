// Package interop holds the Go side of the LanceDB 0.31 interop tests: Go
// writes tables that LanceDB must read, maintain and race against, and Go
// reads tables LanceDB wrote. The LanceDB side is the Node scripts in this
// directory (see README.md); each prints one JSON document, and every
// assertion is made here.
package interop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// ---------------------------------------------------------------- node

// requireNode skips (or, with LC_REQUIRE_INTEROP=1 as CI sets it, fails)
// when node or the pinned LanceDB install is missing.
func requireNode(t testing.TB) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join("node_modules", "@lancedb", "lancedb", "package.json")); err != nil {
		why = "test/interop/node_modules is missing (run `npm ci` in test/interop)"
	}
	if why == "" {
		return
	}
	if os.Getenv("LC_REQUIRE_INTEROP") == "1" {
		t.Fatalf("interop: %s, and LC_REQUIRE_INTEROP=1", why)
	}
	t.Skipf("interop: %s", why)
}

// runNode runs `node script args...` in this directory and decodes the one
// JSON document it prints (numbers as json.Number).
func runNode(t testing.TB, script string, args ...string) map[string]any {
	t.Helper()
	out, err := runNodeErr(t, script, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runNodeErr(t testing.TB, script string, args ...string) (map[string]any, error) {
	t.Helper()
	requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("node %s %s: %s", script, shortArgs(args), time.Since(start).Round(time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("node %s %s: %v\nstderr:\n%s", script, shortArgs(args), err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("node %s: stdout is not one JSON object: %v\nstdout: %.500s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return m, nil
}

func shortArgs(args []string) string {
	var b []string
	for _, a := range args {
		if len(a) > 80 {
			a = a[:77] + "..."
		}
		b = append(b, strconv.Quote(a))
	}
	return strings.Join(b, " ")
}

// ---------------------------------------------------------------- value encoding
//
// The JSON value encoding of lib.mjs, and a normal form both sides are
// brought to before comparing: json.Number -> int64 when it is an exact
// integer, else float64; NaN/Inf stay the strings "NaN", "Inf", "-Inf";
// binary is {"len": int64, "sha256": hex}; lists are []any.

const maxSafe = 1<<53 - 1

func encInt(v int64) any {
	if v <= maxSafe && v >= -maxSafe {
		return v
	}
	return strconv.FormatInt(v, 10)
}

func encUint(v uint64) any {
	if v <= maxSafe {
		return int64(v)
	}
	return strconv.FormatUint(v, 10)
}

func encFloat(x float64) any {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return x
}

func encBytes(b []byte) any {
	h := sha256.Sum256(b)
	return map[string]any{"len": int64(len(b)), "sha256": hex.EncodeToString(h[:])}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// encodeValue encodes element i of arr as lib.mjs would.
func encodeValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return encInt(a.Value(i))
	case *array.Uint8:
		return int64(a.Value(i))
	case *array.Uint16:
		return int64(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	case *array.Uint64:
		return encUint(a.Value(i))
	case *array.Float32:
		return encFloat(float64(a.Value(i)))
	case *array.Float64:
		return encFloat(a.Value(i))
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return encBytes(a.Value(i))
	case *array.LargeBinary:
		return encBytes(a.Value(i))
	case *array.Timestamp:
		v := int64(a.Value(i))
		switch a.DataType().(*arrow.TimestampType).Unit {
		case arrow.Second:
			v *= 1_000_000
		case arrow.Millisecond:
			v *= 1000
		case arrow.Nanosecond:
			v = floorDiv(v, 1000)
		}
		return encInt(v)
	case *array.Date32:
		return int64(a.Value(i))
	case *array.List:
		s, e := a.ValueOffsets(i)
		return encodeRange(a.ListValues(), int(s), int(e))
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		return encodeRange(a.ListValues(), int(s), int(e))
	case *array.FixedSizeList:
		s, e := a.ValueOffsets(i)
		return encodeRange(a.ListValues(), int(s), int(e))
	case *array.Struct:
		o := map[string]any{}
		st := a.DataType().(*arrow.StructType)
		for k := 0; k < a.NumField(); k++ {
			o[st.Field(k).Name] = encodeValue(a.Field(k), i)
		}
		return o
	case *array.Dictionary:
		return encodeValue(a.Dictionary(), a.GetValueIndex(i))
	}
	panic(fmt.Sprintf("encodeValue: unsupported array type %s", arr.DataType()))
}

func encodeRange(arr arrow.Array, s, e int) []any {
	out := make([]any, 0, e-s)
	for j := s; j < e; j++ {
		out = append(out, encodeValue(arr, j))
	}
	return out
}

// normalize brings a value decoded with UseNumber, or built by encodeValue,
// to the normal form. An integral number in int64 range becomes int64
// whichever way it arrives: Go and JavaScript both print such a float64 as
// plain digits (they switch to exponent notation only from 1e21), so after
// JSON it would parse as an integer too.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			panic(fmt.Sprintf("normalize: bad number %q", x))
		}
		return normFloat(f)
	case int:
		return int64(x)
	case int64:
		return x
	case float64:
		return normFloat(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

func normFloat(f float64) any {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return int64(f)
	}
	return f
}

type row = map[string]any

// recordRows encodes every row of rec (normal form).
func recordRows(rec arrow.RecordBatch) []row {
	out := make([]row, rec.NumRows())
	for r := range out {
		o := row{}
		for c := 0; c < int(rec.NumCols()); c++ {
			o[rec.ColumnName(c)] = encodeValue(rec.Column(c), r)
		}
		out[r] = normalize(o).(map[string]any)
	}
	return out
}

// nodeRows returns the normalized "rows" of a dump.mjs / expected.json document.
func nodeRows(t testing.TB, doc map[string]any) []row {
	t.Helper()
	raw, ok := doc["rows"].([]any)
	if !ok {
		t.Fatalf("document has no rows array: keys %v", keysOf(doc))
	}
	out := make([]row, len(raw))
	for i, r := range raw {
		out[i] = normalize(r).(map[string]any)
	}
	return out
}

func keysOf(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

func sortByID(rows []row) {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i]["id"].(string) < rows[j]["id"].(string) })
}

func ids(rows []row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r["id"].(string)
	}
	return out
}

func brief(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 240 {
		s = s[:200] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

// compareRows asserts got and want hold the same rows in the same order with
// equal values in every column of want (and no other columns). It reports up
// to 20 differences.
func compareRows(t testing.TB, what string, got, want []row) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := 0; i < min(len(got), len(want)); i++ {
		g, w := got[i], want[i]
		for _, k := range sortedKeys(w, g) {
			gv, gok := g[k]
			wv, wok := w[k]
			if gok != wok || !reflect.DeepEqual(gv, wv) {
				bad++
				if bad <= 20 {
					t.Errorf("%s: row %d (id %v) column %q:\n  got  %s\n  want %s", what, i, w["id"], k, brief(gv), brief(wv))
				}
			}
		}
	}
	if bad > 20 {
		t.Errorf("%s: %d differences in all", what, bad)
	}
}

func sortedKeys(ms ...map[string]any) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func num(t testing.TB, doc map[string]any, key string) int64 {
	t.Helper()
	n, ok := normalize(doc[key]).(int64)
	if !ok {
		t.Fatalf("%q is %#v, want an integer (document keys %v)", key, doc[key], keysOf(doc))
	}
	return n
}

// ---------------------------------------------------------------- type names

// typeString names an Arrow type as lib.mjs typeString does (pyarrow style).
func typeString(dt arrow.DataType) string {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return "bool"
	case *arrow.Int8Type:
		return "int8"
	case *arrow.Int16Type:
		return "int16"
	case *arrow.Int32Type:
		return "int32"
	case *arrow.Int64Type:
		return "int64"
	case *arrow.Uint8Type:
		return "uint8"
	case *arrow.Uint16Type:
		return "uint16"
	case *arrow.Uint32Type:
		return "uint32"
	case *arrow.Uint64Type:
		return "uint64"
	case *arrow.Float16Type:
		return "halffloat"
	case *arrow.Float32Type:
		return "float"
	case *arrow.Float64Type:
		return "double"
	case *arrow.StringType:
		return "string"
	case *arrow.LargeStringType:
		return "large_string"
	case *arrow.BinaryType:
		return "binary"
	case *arrow.LargeBinaryType:
		return "large_binary"
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return fmt.Sprintf("timestamp[%s, tz=%s]", t.Unit, t.TimeZone)
		}
		return fmt.Sprintf("timestamp[%s]", t.Unit)
	case *arrow.Date32Type:
		return "date32[day]"
	case *arrow.ListType:
		return fmt.Sprintf("list<%s: %s>", t.ElemField().Name, typeString(t.Elem()))
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list<%s: %s>[%d]", t.ElemField().Name, typeString(t.Elem()), t.Len())
	case *arrow.StructType:
		var parts []string
		for _, f := range t.Fields() {
			parts = append(parts, f.Name+": "+typeString(f.Type))
		}
		return "struct<" + strings.Join(parts, ", ") + ">"
	}
	return dt.String()
}

// schemaJSON is lib.mjs schemaJSON for an Arrow schema, in normal form.
func schemaJSON(s *arrow.Schema) []any {
	var out []any
	for _, f := range s.Fields() {
		out = append(out, map[string]any{"name": f.Name, "type": typeString(f.Type), "nullable": f.Nullable})
	}
	return out
}

func checkSchemaJSON(t testing.TB, what string, got any, want *arrow.Schema) {
	t.Helper()
	g := normalize(got)
	w := schemaJSON(want)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: schema\n  got  %s\n  want %s", what, brief(g), brief(w))
	}
}

// ---------------------------------------------------------------- building

// appendNative appends a native Go value (nil = null) to a builder:
// bool, int32, int64, float32, float64, string, []byte, arrow.Timestamp,
// []float32 / []int32 for lists and fixed-size lists.
func appendNative(b array.Builder, v any) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.LargeStringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	case *array.TimestampBuilder:
		b.Append(v.(arrow.Timestamp))
	case *array.ListBuilder:
		b.Append(true)
		appendItems(b.ValueBuilder(), v)
	case *array.FixedSizeListBuilder:
		b.Append(true)
		appendItems(b.ValueBuilder(), v)
	default:
		panic(fmt.Sprintf("appendNative: builder %T", b))
	}
}

func appendItems(b array.Builder, v any) {
	switch items := v.(type) {
	case []float32:
		for _, x := range items {
			b.(*array.Float32Builder).Append(x)
		}
	case []int32:
		for _, x := range items {
			b.(*array.Int32Builder).Append(x)
		}
	default:
		panic(fmt.Sprintf("appendItems: %T", v))
	}
}

// buildBatch builds a record batch of schema s from native rows keyed by
// column name (missing = null).
func buildBatch(s *arrow.Schema, rows []map[string]any) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for _, r := range rows {
		for i, f := range s.Fields() {
			appendNative(b.Field(i), r[f.Name])
		}
	}
	return b.NewRecordBatch()
}

// ---------------------------------------------------------------- Go table helpers

func localStore(t testing.TB, dir, name string) objstore.Store {
	t.Helper()
	st, err := objstore.NewLocal(filepath.Join(dir, name+".lance"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func createTable(t testing.TB, st objstore.Store, s *arrow.Schema) *schema.Schema {
	t.Helper()
	ls, err := schema.FromArrow(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Create(context.Background(), st, ls, table.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ls
}

// writeFrag writes recs as one fragment, with the given page size (0 = default).
func writeFrag(t testing.TB, st objstore.Store, ls *schema.Schema, pageBytes int, recs ...arrow.RecordBatch) *pb.DataFragment {
	t.Helper()
	fw, err := table.NewFragmentWriter(context.Background(), st, ls, recs[0].Schema(), file.WriterOptions{PageBytes: pageBytes})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := fw.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fw.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func appendFrags(t testing.TB, st objstore.Store, frags ...*pb.DataFragment) *table.Dataset {
	t.Helper()
	d, err := table.Append(context.Background(), st, frags, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openTable(t testing.TB, st objstore.Store) *table.Dataset {
	t.Helper()
	d, err := table.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// scanRows scans d with opts and returns the encoded rows, plus the row
// addresses when opts.WithRowAddr (the address column is not in the rows).
func scanRows(t testing.TB, d *table.Dataset, opts table.ScanOptions) ([]row, []table.RowAddr) {
	t.Helper()
	var out []row
	var addrs []table.RowAddr
	err := d.Scan(context.Background(), opts, func(rec arrow.RecordBatch) error {
		if opts.WithRowAddr {
			last := int(rec.NumCols()) - 1
			if rec.ColumnName(last) != table.RowAddrColumn {
				return fmt.Errorf("last column is %q, want %q", rec.ColumnName(last), table.RowAddrColumn)
			}
			for _, v := range rec.Column(last).(*array.Uint64).Uint64Values() {
				addrs = append(addrs, table.RowAddr{Fragment: v >> 32, Offset: uint32(v)})
			}
		}
		for _, r := range recordRows(rec) {
			delete(r, table.RowAddrColumn)
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %+v: %v", opts, err)
	}
	return out, addrs
}

// dumpIDs returns the sorted ids LanceDB sees in the latest version.
func dumpIDs(t testing.TB, dir, name string) (count int64, idList []string) {
	t.Helper()
	doc := runNode(t, "dump.mjs", dir, name, "--columns", "id", "--order-by-col", "id")
	rows := nodeRows(t, doc)
	return num(t, doc, "count"), ids(rows)
}

func sortedIDs(rows []row) []string {
	out := ids(rows)
	sort.Strings(out)
	return out
}

func checkIDs(t testing.TB, what string, got, want []string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	gs, ws := map[string]int{}, map[string]int{}
	for _, x := range got {
		gs[x]++
	}
	for _, x := range want {
		ws[x]++
	}
	var missing, extra, dup []string
	for x := range ws {
		if gs[x] == 0 {
			missing = append(missing, x)
		}
	}
	for x, n := range gs {
		if ws[x] == 0 {
			extra = append(extra, x)
		} else if n > ws[x] {
			dup = append(dup, x)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(dup)
	t.Errorf("%s: %d ids, want %d; missing %s; unexpected %s; duplicated %s",
		what, len(got), len(want), brief(missing), brief(extra), brief(dup))
}

// columnMetas reads a data file's footer and column metadata, checking the
// 2.0 footer version.
func columnMetas(t testing.TB, st objstore.Store, df *pb.DataFile) []*pb.ColumnMetadata {
	t.Helper()
	b, err := st.Get(context.Background(), "data/"+df.GetPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 40 || string(b[len(b)-4:]) != "LANC" {
		t.Fatalf("%s: no LANC footer", df.GetPath())
	}
	ft := b[len(b)-40:]
	le := binary.LittleEndian
	cmoStart := le.Uint64(ft[8:])
	numCols := le.Uint32(ft[28:])
	if major, minor := le.Uint16(ft[32:]), le.Uint16(ft[34:]); major != 0 || minor != 3 {
		t.Errorf("%s: footer version %d.%d, want 0.3 (2.0)", df.GetPath(), major, minor)
	}
	out := make([]*pb.ColumnMetadata, numCols)
	for c := range out {
		pos := le.Uint64(b[cmoStart+16*uint64(c):])
		size := le.Uint64(b[cmoStart+16*uint64(c)+8:])
		out[c] = &pb.ColumnMetadata{}
		if err := proto.Unmarshal(b[pos:pos+size], out[c]); err != nil {
			t.Fatalf("%s: column %d metadata: %v", df.GetPath(), c, err)
		}
	}
	return out
}

// pageCounts returns the number of pages of each physical column of a data file.
func pageCounts(t testing.TB, st objstore.Store, df *pb.DataFile) []int {
	t.Helper()
	var out []int
	for _, cm := range columnMetas(t, st, df) {
		out = append(out, len(cm.GetPages()))
	}
	return out
}

// pageEncodings returns the decoded 2.0 ArrayEncoding of every page of the
// column holding field id in df.
func pageEncodings(t testing.TB, st objstore.Store, df *pb.DataFile, id int32) []*pb.ArrayEncoding {
	t.Helper()
	k := slices.Index(df.GetFields(), id)
	if k < 0 {
		t.Fatalf("%s holds no field %d", df.GetPath(), id)
	}
	cm := columnMetas(t, st, df)[df.GetColumnIndices()[k]]
	var out []*pb.ArrayEncoding
	for _, p := range cm.GetPages() {
		var a pb.AnyMsg
		if err := proto.Unmarshal(p.GetEncoding().GetDirect().GetEncoding(), &a); err != nil {
			t.Fatal(err)
		}
		if a.GetTypeUrl() != "/lance.encodings.ArrayEncoding" {
			t.Fatalf("page encoding type %q", a.GetTypeUrl())
		}
		var e pb.ArrayEncoding
		if err := proto.Unmarshal(a.GetValue(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, &e)
	}
	return out
}

// checkMultiPage asserts at least minCols of the physical columns of the
// fragment's file have more than one page.
func checkMultiPage(t testing.TB, st objstore.Store, f *pb.DataFragment, minCols int) {
	t.Helper()
	pc := pageCounts(t, st, f.GetFiles()[0])
	multi := 0
	for _, n := range pc {
		if n > 1 {
			multi++
		}
	}
	if multi < minCols {
		t.Errorf("fragment %d: pages per column %v, want >= %d columns with several pages", f.GetId(), pc, minCols)
	}
	t.Logf("fragment %d: pages per column %v", f.GetId(), pc)
}
